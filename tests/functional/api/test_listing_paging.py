"""Paging of our listings (limit, marker, links), counts, and the purge of
finished build requests and old scheduling reports."""

import datetime
import os
import sys
import urllib.parse
import uuid

import pytest
import sqlalchemy as sa

from placement import models
from placement import paging
from tests import builders
from tests import processes

BAD_VALUE = "placement.query.bad_value"
BAD_MARKER = "placement.query.bad_page_marker"
BIN = os.path.dirname(sys.executable)


def _code(resp):
    return resp.get_json()["errors"][0]["code"]


def _create(client, records):
    resp = client.post("/build_requests", json={"build_requests": records})
    assert resp.status_code == 201, resp.get_json()
    return [r["instance_uuid"] for r in records]


def _walk(client, path, key):
    """Every item of a listing, following its next links; and the pages."""
    items, pages = [], 0
    while path:
        resp = client.get(path)
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        items.extend(body[key])
        pages += 1
        nexts = [link["href"] for link in body["links"] if link["rel"] == "next"]
        assert len(nexts) <= 1
        path = nexts[0] if nexts else None
    return items, pages


def test_build_requests_page_with_links(client):
    perf = _create(client, [builders.build_request(workload_class="performance") for _ in range(5)])
    _create(client, [builders.build_request() for _ in range(3)])
    items, pages = _walk(
        client, "/build_requests?workload_class=performance&limit=2", "build_requests"
    )
    assert [i["instance_uuid"] for i in items] == perf
    assert pages == 3
    # The last page says so; without a limit the default applies.
    body = client.get("/build_requests").get_json()
    assert len(body["build_requests"]) == 8 and body["links"] == []
    # A next link keeps the query's filters and limit.
    link = client.get("/build_requests?status=pending&limit=3").get_json()["links"][0]["href"]
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    assert query["status"] == ["pending"] and query["limit"] == ["3"] and "marker" in query


def test_build_requests_default_limit(client):
    _create(client, [builders.build_request() for _ in range(paging.DEFAULT_LIMIT + 1)])
    body = client.get("/build_requests").get_json()
    assert len(body["build_requests"]) == paging.DEFAULT_LIMIT
    assert len(body["links"]) == 1
    items, pages = _walk(client, "/build_requests", "build_requests")
    assert (len(items), pages) == (paging.DEFAULT_LIMIT + 1, 2)
    assert len({i["instance_uuid"] for i in items}) == len(items)


@pytest.mark.parametrize(
    "path, other",
    [
        ("/build_requests", "owner=other"),
        ("/server_groups", "project_id=other"),
        ("/nodes", "cell=other"),
        ("/workload_usages", "in_tree=6c1d3c5e-8f59-4d52-9b8e-2b7f0a4c1e11"),
    ],
)
def test_bad_limits_and_markers(client, path, other):
    _create(client, [builders.build_request() for _ in range(3)])
    for limit in (str(paging.MAX_LIMIT + 1), "0", "-1", "x", "1.5", "99999999999"):
        resp = client.get(f"{path}?limit={limit}")
        assert resp.status_code == 400, limit
        assert _code(resp) == BAD_VALUE
        assert f"from 1 to {paging.MAX_LIMIT}" in resp.get_json()["errors"][0]["detail"]
    assert client.get(f"{path}?limit={paging.MAX_LIMIT}").status_code == 200
    for marker in ("garbage", "MTphYmM6MQ", ""):
        resp = client.get(f"{path}?marker={marker}")
        assert resp.status_code == 400 and _code(resp) == BAD_MARKER, marker
    # A marker of another query is refused.
    marker = paging.encode_marker(1, {"limit": "1"})
    resp = client.get(f"{path}?limit=1&{other}&marker={marker}")
    assert resp.status_code == 400 and _code(resp) == BAD_MARKER


def test_build_request_counts(client):
    _create(client, [builders.build_request(workload_class="performance") for _ in range(4)])
    other = _create(client, [builders.build_request(request_id="req-2") for _ in range(2)])
    assert (
        client.put(
            f"/build_requests/{other[0]}", json={"status": "failed", "reason": "x"}
        ).status_code
        == 200
    )

    def count(query=""):
        resp = client.get(f"/build_requests/counts{query}")
        assert resp.status_code == 200, resp.get_json()
        return resp.get_json()["count"]

    assert count() == 6
    assert count("?status=pending&workload_class=performance") == 4
    assert count("?status=failed") == 1
    assert count("?request_id=in:req-2,req-page&status=pending") == 5
    assert count("?lease_expired=true") == 6
    for bad in ("?limit=3", "?status=running", "?marker=x"):
        assert client.get(f"/build_requests/counts{bad}").status_code == 400, bad


def test_server_groups_page(client):
    made = []
    for i in range(5):
        body = {"name": f"g{i}", "policy": "affinity", "project_id": f"p{i % 2}", "user_id": "u"}
        resp = client.post("/server_groups", json=body)
        assert resp.status_code == 201
        made.append(resp.get_json()["uuid"])
    items, pages = _walk(client, "/server_groups?limit=2", "server_groups")
    assert [g["uuid"] for g in items] == made and pages == 3
    items, pages = _walk(client, "/server_groups?project_id=p0&limit=2", "server_groups")
    assert [g["uuid"] for g in items] == made[0::2] and pages == 2
    assert client.get("/server_groups").get_json()["links"] == []


def _age(db, table, key, value, days):
    when = datetime.datetime.utcnow().replace(microsecond=0) - datetime.timedelta(days=days)
    with db.write() as conn:
        conn.execute(
            table.update().where(table.c[key] == value).values(created_at=when, updated_at=when)
        )


def test_purge_finished_build_requests_and_old_reports(client, db, db_url):
    br = models.build_requests
    records = _create(client, [builders.build_request() for _ in range(5)])
    old_placed, old_failed, old_pending, new_placed, old_running = records
    host = builders.create_provider(db, name="purge-host")
    builders.set_inventory(db, host, "VCPU", 8)
    for inst in (old_placed, new_placed, old_running):
        resp = client.put(f"/build_requests/{inst}", json={"status": "placed", "host_uuid": host})
        assert resp.status_code == 200
    client.put(f"/build_requests/{old_failed}", json={"status": "failed"})
    for inst in (old_placed, old_failed, old_pending, old_running):
        _age(db, br, "instance_uuid", inst, 10)
    # An old placed record whose instance still holds allocations stays: the
    # allocations audit would take a running instance without one for an orphan.
    claim = {
        "allocations": {host: {"resources": {"VCPU": 1}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert client.put(f"/allocations/{old_running}", json=claim).status_code == 204
    for rid in ("req-old", "req-new"):
        assert client.put(f"/scheduling_reports/{rid}", json={"report": {}}).status_code == 201
    _age(db, models.scheduling_reports, "request_id", "req-old", 10)

    bad = processes.manage(db_url, "build-requests", "purge", "--before", "yesterday")
    assert bad.returncode == 1 and "--before 'yesterday'" in bad.stderr
    done = processes.manage(db_url, "build-requests", "purge", "--before", "7d")
    assert done.returncode == 0, done.stderr
    assert "2 finished build request(s)" in done.stdout
    with db.read() as conn:
        left = set(conn.execute(sa.select(br.c.instance_uuid)).scalars())
    assert left == {old_pending, new_placed, old_running}

    when = (datetime.datetime.utcnow() - datetime.timedelta(days=7)).isoformat() + "Z"
    done = processes.manage(db_url, "scheduling-reports", "purge", "--before", when)
    assert done.returncode == 0 and "1 scheduling report(s)" in done.stdout, done.stderr
    assert client.get("/scheduling_reports/req-old").status_code == 404
    assert client.get("/scheduling_reports/req-new").status_code == 200


# --- GET /nodes and GET /workload_usages ---------------------------------------


def _bulk_roots(db, count, prefix, cell=None):
    """``count`` root providers with a node record (``cell``), in one write
    each (a thousand through the API would take most of a minute); their
    uuids, in the order they were created."""
    rp, node = models.resource_providers, models.nodes
    now = datetime.datetime.utcnow().replace(microsecond=0)
    uuids = [str(uuid.uuid4()) for _ in range(count)]
    with db.write() as conn:
        for i, u in enumerate(uuids):
            conn.execute(
                rp.insert().values(uuid=u, name=f"{prefix}-{i:05d}", generation=0, created_at=now)
            )
        conn.execute(
            rp.update().where(rp.c.root_provider_id.is_(None)).values(root_provider_id=rp.c.id)
        )
        ids = dict(conn.execute(sa.select(rp.c.uuid, rp.c.id).where(rp.c.uuid.in_(uuids))).all())
        conn.execute(
            node.insert(),
            [
                {"resource_provider_id": ids[u], "cell": cell, "labels": "{}", "created_at": now}
                for u in uuids
            ],
        )
    return uuids


def _claim(client, rp, workload_class="performance"):
    body = {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "workload_class": workload_class,
    }
    resp = client.put(f"/allocations/{uuid.uuid4()}", json=body, version="1.28")
    assert resp.status_code == 204, resp.get_json()


def _bulk_usages(db, roots):
    """One performance consumer holding 1 VCPU on each of ``roots`` (SQL)."""
    now = datetime.datetime.utcnow().replace(microsecond=0)
    rp = models.resource_providers
    with db.write() as conn:
        project = conn.execute(
            models.projects.insert().values(external_id="bulk-p")
        ).inserted_primary_key[0]
        user = conn.execute(
            models.users.insert().values(external_id="bulk-u")
        ).inserted_primary_key[0]
        ids = dict(conn.execute(sa.select(rp.c.uuid, rp.c.id).where(rp.c.uuid.in_(roots))).all())
        consumers = [str(uuid.uuid4()) for _ in roots]
        conn.execute(
            models.consumers.insert(),
            [
                {
                    "uuid": c,
                    "project_id": project,
                    "user_id": user,
                    "generation": 1,
                    "workload_class": "performance",
                    "created_at": now,
                }
                for c in consumers
            ],
        )
        conn.execute(
            models.allocations.insert(),
            [
                {
                    "resource_provider_id": ids[r],
                    "consumer_id": c,
                    "resource_class_id": 0,
                    "used": 1,
                    "created_at": now,
                }
                for r, c in zip(roots, consumers, strict=True)
            ],
        )


def test_nodes_page_in_creation_order_with_the_cell_filter(client, db):
    # Names out of creation order: the listing's order is the providers', not their names'.
    made = []
    for i in range(7):
        rp = builders.create_provider(db, name=f"node-{(7 - i) % 7}")
        resp = client.put(f"/nodes/{rp}", json={"cell": f"cell{i % 2}"})
        assert resp.status_code == 201, resp.get_json()
        made.append(rp)
    items, pages = _walk(client, "/nodes?limit=3", "nodes")
    assert [n["uuid"] for n in items] == made and pages == 3
    items, pages = _walk(client, "/nodes?cell=cell0&limit=2", "nodes")
    assert [n["uuid"] for n in items] == made[0::2] and pages == 2
    assert all(n["cell"] == "cell0" for n in items)
    # An exact fit: no next link on the page that ends the listing.
    items, pages = _walk(client, "/nodes?cell=cell1&limit=3", "nodes")
    assert [n["uuid"] for n in items] == made[1::2] and pages == 1
    body = client.get("/nodes").get_json()
    assert [n["uuid"] for n in body["nodes"]] == made and body["links"] == []
    link = client.get("/nodes?cell=cell1&limit=1").get_json()["links"][0]["href"]
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    assert query["cell"] == ["cell1"] and query["limit"] == ["1"] and "marker" in query
    # A node deleted behind the marker does not break the walk.
    first = client.get("/nodes?limit=2").get_json()
    assert client.delete(f"/nodes/{made[1]}").status_code == 204
    rest, _pages = _walk(client, first["links"][0]["href"], "nodes")
    assert [n["uuid"] for n in rest] == made[2:]


def test_nodes_default_limit(client, db):
    made = _bulk_roots(db, paging.DEFAULT_LIMIT + 1, "bulk", cell="c1")
    body = client.get("/nodes").get_json()
    assert [n["uuid"] for n in body["nodes"]] == made[: paging.DEFAULT_LIMIT]
    assert len(body["links"]) == 1
    items, pages = _walk(client, "/nodes?cell=c1", "nodes")
    assert [n["uuid"] for n in items] == made and pages == 2
    assert client.get("/nodes?cell=c2").get_json() == {"nodes": [], "links": []}


def test_workload_usages_page_by_root(client, db):
    roots = []
    for i in range(5):
        root = builders.create_provider(db, name=f"wu-root-{4 - i}")
        builders.set_inventory(db, root, "VCPU", 8)
        roots.append(root)
    child = builders.create_provider(db, name="wu-child", parent_uuid=roots[3])
    builders.set_inventory(db, child, "VCPU", 8)
    idle = builders.create_provider(db, name="wu-idle")
    for root in roots:
        _claim(client, root)
    _claim(client, roots[1], "standard")
    _claim(client, child, "standard")  # counted on its root
    expected = {r: {"performance": 1, "standard": 0} for r in roots}
    expected[roots[1]]["standard"] = expected[roots[3]]["standard"] = 1

    pages, path, merged = 0, "/workload_usages?limit=2", []
    while path:
        body = client.get(path).get_json()
        assert len(body["resource_providers"]) <= 2
        merged.extend(body["resource_providers"].items())
        pages += 1
        nexts = [link["href"] for link in body["links"] if link["rel"] == "next"]
        path = nexts[0] if nexts else None
    assert merged == list(expected.items()) and pages == 3
    body = client.get("/workload_usages").get_json()
    assert list(body["resource_providers"].items()) == list(expected.items())
    assert body["links"] == []
    # in_tree answers one tree: one page, idle or not.
    body = client.get(f"/workload_usages?in_tree={child}&limit=1").get_json()
    assert body == {"resource_providers": {roots[3]: expected[roots[3]]}, "links": []}
    body = client.get(f"/workload_usages?in_tree={idle}&limit=1").get_json()
    assert body == {"resource_providers": {idle: {"performance": 0, "standard": 0}}, "links": []}


def test_workload_usages_default_limit(client, db):
    roots = _bulk_roots(db, paging.DEFAULT_LIMIT + 1, "wu-bulk")
    _bulk_usages(db, roots)
    body = client.get("/workload_usages").get_json()
    assert list(body["resource_providers"]) == roots[: paging.DEFAULT_LIMIT]
    assert len(body["links"]) == 1
    rest = client.get(body["links"][0]["href"]).get_json()
    assert rest == {
        "resource_providers": {roots[-1]: {"performance": 1, "standard": 0}},
        "links": [],
    }
