"""Regressions found by the correctness review (review2)."""

from tests import builders as b
from tests.conftest import ApiClient, make_conf
from placement import app as app_mod


def _compute(db, name, vcpu=8, mem=4096):
    rp = b.create_provider(db, name=name)
    b.set_inventory(db, rp, "VCPU", vcpu)
    b.set_inventory(db, rp, "MEMORY_MB", mem)
    return rp


def _walk(client, url):
    seen = []
    while url:
        resp = client.get(url, version="1.39")
        assert resp.status_code == 200, resp.get_data(as_text=True)
        body = resp.get_json()
        seen.extend(next(iter(ar["allocations"])) for ar in body["allocation_requests"])
        nxt = [link["href"] for link in body["links"] if link["rel"] == "next"]
        url = nxt[0] if nxt else None
    return seen


def test_paged_walk_with_limit_reaches_every_root(client, db):
    """``limit`` applies per page: a page cut short by it must still link on."""
    cns = [_compute(db, f"cn{i}") for i in range(5)]
    seen = _walk(client, "/allocation_candidates?resources=VCPU:1&page_size=3&limit=2")
    assert seen == cns


def test_paged_walk_with_max_candidates_reaches_every_root(db_url, db):
    conf = make_conf(db_url, **{"placement.max_allocation_candidates": 2})
    client = ApiClient(app_mod.create_app(conf, db=db, sync=False).test_client())
    cns = [_compute(db, f"cn{i}") for i in range(5)]
    seen = _walk(client, "/allocation_candidates?resources=VCPU:1&page_size=3")
    assert seen == cns
