"""GET /allocation_candidates: wire behaviour, upstream's bugs avoided, paging
and node data. Data comes from tests/builders.py and placement/objects (no HTTP
set-up through other APIs)."""

import uuid as uuid_lib

import pytest

from placement.objects import node as node_obj
from tests import builders as b
from tests.conftest import ApiClient

AGG = "14a5c8a3-5a99-4e8f-88be-00d85fcb1c17"


def _compute(db, name, vcpu=8, mem=4096, disk=None, traits=(), aggs=(), parent=None):
    rp = b.create_provider(db, name=name, parent_uuid=parent)
    if vcpu:
        b.set_inventory(db, rp, "VCPU", vcpu)
    if mem:
        b.set_inventory(db, rp, "MEMORY_MB", mem)
    if disk:
        b.set_inventory(db, rp, "DISK_GB", disk)
    if traits:
        b.set_traits(db, rp, *traits)
    if aggs:
        b.set_aggregates(db, rp, *aggs)
    return rp


def _get(client, query, version="1.39", status=200):
    resp = client.get("/allocation_candidates?" + query, version=version)
    assert resp.status_code == status, resp.get_data(as_text=True)
    return resp.get_json()


def _alloc_sets(body):
    """Allocation requests as a comparable set (dict form)."""
    out = set()
    for ar in body["allocation_requests"]:
        out.add(
            frozenset(
                (rp, rc, amt)
                for rp, v in ar["allocations"].items()
                for rc, amt in v["resources"].items()
            )
        )
    return out


def test_simple_flat(client, db):
    cn1 = _compute(db, "cn1", disk=100)
    cn2 = _compute(db, "cn2", vcpu=1, disk=100)
    body = _get(client, "resources=VCPU:2,MEMORY_MB:1024")
    assert _alloc_sets(body) == {frozenset({(cn1, "VCPU", 2), (cn1, "MEMORY_MB", 1024)})}
    summ = body["provider_summaries"][cn1]
    assert summ["resources"]["DISK_GB"] == {"capacity": 100, "used": 0}
    assert summ["root_provider_uuid"] == cn1 and summ["parent_provider_uuid"] is None
    assert summ["traits"] == []
    assert cn2 not in body["provider_summaries"]
    assert body["allocation_requests"][0]["mappings"] == {"": [cn1]}


def test_old_microversions_shapes(client, db):
    cn1 = _compute(db, "cn1", disk=100)
    body = _get(client, "resources=VCPU:1", version="1.10")
    assert body["allocation_requests"] == [
        {"allocations": [{"resource_provider": {"uuid": cn1}, "resources": {"VCPU": 1}}]}
    ]
    # Before 1.27 only requested classes; before 1.17 no traits.
    assert body["provider_summaries"] == {cn1: {"resources": {"VCPU": {"capacity": 8, "used": 0}}}}
    body = _get(client, "resources=VCPU:1", version="1.12")
    assert body["allocation_requests"] == [{"allocations": {cn1: {"resources": {"VCPU": 1}}}}]
    assert _get(client, "resources=VCPU:1", version="1.9", status=404)


def test_bad_input(client, db):
    _compute(db, "cn1")
    cases = [
        ("resources=VCPU:0", "Requested resource VCPU requires amount >= 1"),
        ("resources=VCPU", "Badly formed resources parameter"),
        ("resources=CUSTOM_NOPE:1", "Invalid resource class in resources parameter"),
        ("resources=VCPU:1&required=CUSTOM_NOPE", "No such trait(s): CUSTOM_NOPE"),
        ("resources=VCPU:1&member_of=not-a-uuid", "Expected 'member_of' parameter"),
        ("resources=VCPU:1&limit=0", "Failed validating 'pattern'"),
        ("resources1=VCPU:1&resources2=VCPU:1", 'The "group_policy" parameter is required'),
        (
            "resources=VCPU:1&required=A,!A".replace("A", "HW_CPU_X86_AVX2"),
            "Conflicting required and forbidden traits",
        ),
        ("resources=VCPU:1&page_size=0", "Invalid page_size"),
        ("resources=VCPU:1&page_size=10&page_marker=garbage", "Invalid page_marker"),
        ("resources=VCPU:1&node_data=maybe", "Invalid node_data"),
    ]
    for query, text in cases:
        resp = client.get("/allocation_candidates?" + query)
        assert resp.status_code == 400, (query, resp.get_data(as_text=True))
        assert text in resp.get_json()["errors"][0]["detail"], query
    # A marker that does not decode has the extension's own code, so a client
    # can tell it to start the walk over.
    resp = client.get("/allocation_candidates?resources=VCPU:1&page_size=10&page_marker=x")
    assert resp.get_json()["errors"][0]["code"] == "placement.query.bad_page_marker"
    resp = client.get(
        "/allocation_candidates?resources=VCPU:1&required=!HW_CPU_X86_AVX2", version="1.21"
    )
    assert resp.status_code == 400


def test_forbidden_trait(client, db):
    """Upstream 16.0.0 answers 500 on PostgreSQL here."""
    cn1 = _compute(db, "cn1", traits=["HW_CPU_X86_AVX2"])
    cn2 = _compute(db, "cn2")
    body = _get(client, "resources=VCPU:1&required=!HW_CPU_X86_AVX2", version="1.22")
    assert set(body["provider_summaries"]) == {cn2}
    body = _get(client, "resources=VCPU:1&required=in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE")
    assert set(body["provider_summaries"]) == {cn1}


def test_nested_granular_not_inflated(client, db):
    """resources=VCPU:1&resources1=VCPU:1 on a root and child: never 3 VCPU."""
    root = _compute(db, "root", vcpu=4, mem=0)
    child = _compute(db, "child", vcpu=4, mem=0, parent=root)
    body = _get(client, "resources=VCPU:1&resources1=VCPU:1&group_policy=none")
    got = _alloc_sets(body)
    assert got == {
        frozenset({(root, "VCPU", 2)}),
        frozenset({(child, "VCPU", 2)}),
        frozenset({(root, "VCPU", 1), (child, "VCPU", 1)}),
    }
    for ar in body["allocation_requests"]:
        assert sum(v["resources"]["VCPU"] for v in ar["allocations"].values()) == 2
    assert set(body["provider_summaries"]) == {root, child}
    assert body["provider_summaries"][child]["parent_provider_uuid"] == root
    # Before 1.29 a candidate may not use two providers of one tree.
    old = _get(client, "resources=VCPU:1&resources1=VCPU:1&group_policy=none", version="1.28")
    for ar in old["allocation_requests"]:
        assert len(ar["allocations"]) == 1


def test_sharing_with_group_policy_none(client, db):
    agg = str(uuid_lib.uuid4())
    cn1 = _compute(db, "cn1", aggs=[agg])
    cn2 = _compute(db, "cn2", aggs=[agg])
    ss = b.create_provider(db, name="ss")
    b.set_inventory(db, ss, "DISK_GB", 1000)
    b.set_traits(db, ss, "MISC_SHARES_VIA_AGGREGATE")
    b.set_aggregates(db, ss, agg)
    body = _get(client, "resources=VCPU:1&resources1=DISK_GB:10&group_policy=none")
    assert _alloc_sets(body) == {
        frozenset({(cn1, "VCPU", 1), (ss, "DISK_GB", 10)}),
        frozenset({(cn2, "VCPU", 1), (ss, "DISK_GB", 10)}),
    }
    assert set(body["provider_summaries"]) == {cn1, cn2, ss}
    # A sharing-only request is listed once, not once per anchor.
    body = _get(client, "resources=DISK_GB:10")
    assert _alloc_sets(body) == {frozenset({(ss, "DISK_GB", 10)})}


def test_limit_and_usage(client, db):
    cns = [_compute(db, f"cn{i}") for i in range(5)]
    b.allocate(db, str(uuid_lib.uuid4()), {cns[0]: {"VCPU": 8}})
    body = _get(client, "resources=VCPU:1")
    assert len(body["allocation_requests"]) == 4
    body = _get(client, "resources=VCPU:1&limit=2")
    assert len(body["allocation_requests"]) == 2
    assert len(body["provider_summaries"]) == 2


def test_paging_walk_and_node_data(client, db):
    cns = [_compute(db, f"cn{i}") for i in range(7)]
    b.allocate(db, str(uuid_lib.uuid4()), {cns[3]: {"VCPU": 8}})
    node_obj.put_node(
        db, cns[0], "cell1", {"rack": "r1"}, reserved=False, unschedulable=True, generation=None
    )
    node_obj.put_hardware(db, cns[0], {"cpu_model": "EPYC", "gpu_count": 0})
    node_obj.set_twins(
        db, [{"uuid": cns[0], "generation": None, "profile": "eco", "schedulable_class": "eco"}]
    )
    seen = []
    url = "/allocation_candidates?resources=VCPU:1&page_size=2&node_data=true"
    pages = 0
    while url:
        resp = client.get(url)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        body = resp.get_json()
        pages += 1
        roots = [next(iter(ar["allocations"])) for ar in body["allocation_requests"]]
        assert len(roots) <= 2
        assert set(body["nodes"]) == set(roots)
        seen.extend(roots)
        nxt = [link["href"] for link in body["links"] if link["rel"] == "next"]
        url = nxt[0] if nxt else None
        # Allocations changing between pages never bring a root back.
        b.allocate(db, str(uuid_lib.uuid4()), {cns[6]: {"VCPU": 1}})
    assert seen == [cn for i, cn in enumerate(cns) if i != 3]
    assert pages == 3
    first = _get(client, "resources=VCPU:1&page_size=1&node_data=true")
    assert first["nodes"][cns[0]] == {
        "name": "cn0",
        "cell": "cell1",
        "family": "cpu:EPYC",
        "profile": "eco",
        "schedulable_class": "eco",
        "labels": {"rack": "r1"},
        "unschedulable": True,
        "reserved": False,
        "failed_builds": 0,
        "heartbeat_age": None,
    }
    second = _get(
        client,
        "resources=VCPU:1&page_size=1&node_data=true"
        + "&page_marker="
        + first["links"][0]["href"].split("page_marker=")[1],
    )
    assert second["nodes"][cns[1]]["cell"] is None
    assert second["nodes"][cns[1]]["family"] is None
    # A hardware record with the cores and the CPU maximum gives its work
    # per watt: 128 cores over 2 packages of 360 W and 2 boards of 300 W.
    node_obj.put_hardware(
        db,
        cns[1],
        {
            "cpu_model": "EPYC",
            "cpu_cores": 128,
            "cpu_sockets": 2,
            "cpu_max_cap_watts": 360.0,
            "gpu_count": 2,
            "gpu_model": "L4",
            "gpu_max_cap_watts": 300.0,
        },
    )
    again = _get(client, "resources=VCPU:1&page_size=7&node_data=true")
    assert again["nodes"][cns[1]]["cores_per_watt"] == pytest.approx(128 / 1320, abs=1e-6)
    assert "cores_per_watt" not in again["nodes"][cns[0]]  # no cores in its record
    # A marker from another query is refused.
    marker = first["links"][0]["href"].split("page_marker=")[1]
    resp = client.get("/allocation_candidates?resources=VCPU:2&page_size=1&page_marker=" + marker)
    assert resp.status_code == 400
    assert resp.get_json()["errors"][0]["code"] == "placement.query.bad_page_marker"
    # Vanilla requests never see extension keys.
    assert set(_get(client, "resources=VCPU:1")) == {"allocation_requests", "provider_summaries"}


def _walk(client, url):
    """The provider of each allocation request, following ``next`` links to the end."""
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


def test_paged_walk_with_max_candidates_reaches_every_root(db, make_flask_client):
    """[placement] max_allocation_candidates caps a page, not the walk."""
    client = ApiClient(make_flask_client(**{"placement.max_allocation_candidates": 2}))
    cns = [_compute(db, f"cn{i}") for i in range(5)]
    seen = _walk(client, "/allocation_candidates?resources=VCPU:1&page_size=3")
    assert seen == cns


def _marker(body):
    return body["links"][0]["href"].split("page_marker=")[1]


def test_walk_from_a_start_point_wraps_and_lists_each_root_once(client, db):
    """page_start: a walk begins at that point of the root-id range, runs to the
    highest root, wraps to the lowest and stops before its start: every viable
    root exactly once, whatever the start and page size."""
    cns = [_compute(db, f"cn{i}") for i in range(10)]
    b.allocate(db, str(uuid_lib.uuid4()), {cns[4]: {"VCPU": 8}})  # full: never listed
    viable = [cn for i, cn in enumerate(cns) if i != 4]
    firsts = set()
    for start in ("0", "0.05", "0.35", "0.5", "0.73", "0.999999"):
        for size in (1, 3, 20):
            seen = _walk(
                client,
                f"/allocation_candidates?resources=VCPU:1&page_size={size}&page_start={start}",
            )
            assert sorted(seen) == sorted(viable), (start, size)
            # A rotation of the id order: from some root on, then wrapped.
            at = viable.index(seen[0])
            assert seen == viable[at:] + viable[:at], (start, size)
            firsts.add(seen[0])
    assert len(firsts) >= 5  # different starts begin at different roots
    # 0 is the lowest root: the same walk as without page_start.
    assert _walk(
        client, "/allocation_candidates?resources=VCPU:1&page_size=4&page_start=0"
    ) == _walk(client, "/allocation_candidates?resources=VCPU:1&page_size=4")
    # limit cuts pages short, not the wrapped walk.
    seen = _walk(
        client, "/allocation_candidates?resources=VCPU:1&page_size=3&limit=2&page_start=0.6"
    )
    assert sorted(seen) == sorted(viable)


def test_walk_from_a_start_point_finds_the_only_fitting_highest_roots(client, db):
    """Only the two highest ids fit: a walk from any start finds both."""
    cns = [_compute(db, f"cn{i}", vcpu=2) for i in range(8)]
    cns += [_compute(db, f"big{i}", vcpu=32) for i in range(2)]
    for start in ("0", "0.1", "0.5", "0.85", "0.95"):
        seen = _walk(
            client, f"/allocation_candidates?resources=VCPU:16&page_size=2&page_start={start}"
        )
        assert sorted(seen) == sorted(cns[8:]), start


def test_wrapped_walk_survives_changes_between_pages(client, db):
    cns = [_compute(db, f"cn{i}") for i in range(6)]
    first = _get(client, "resources=VCPU:1&page_size=2&page_start=0.5")
    seen = [next(iter(ar["allocations"])) for ar in first["allocation_requests"]]
    # A root is added after the walk began (highest id, inside the first segment)
    # and one already listed fills up: neither is listed twice nor lost.
    late = _compute(db, "late")
    b.allocate(db, str(uuid_lib.uuid4()), {seen[0]: {"VCPU": 8}})
    url = first["links"][0]["href"]
    seen += _walk(client, url)
    assert len(seen) == len(set(seen))
    assert set(seen) == set(cns) | {late}


def test_page_start_bad_values(client, db):
    _compute(db, "cn1")
    base = "/allocation_candidates?resources=VCPU:1"
    for value in ("1", "1.0", "-0.1", "0.5x", "abc", "", ".5", "0.", "0,5", "nan", "0." + "1" * 18):
        resp = client.get(f"{base}&page_size=2&page_start={value}")
        assert resp.status_code == 400, value
        error = resp.get_json()["errors"][0]
        assert error["code"] == "placement.query.bad_value", value
        assert "Invalid page_start" in error["detail"]
    resp = client.get(f"{base}&page_start=0.5")
    assert resp.status_code == 400
    assert resp.get_json()["errors"][0]["code"] == "placement.query.missing_value"
    resp = client.get(f"{base}&page_size=2&page_start=0.5&page_start=0.6")
    assert resp.status_code == 400
    assert resp.get_json()["errors"][0]["code"] == "placement.query.duplicate_key"


def test_wrapped_marker_tampering_is_refused(client, db):
    import base64

    cns = [_compute(db, f"cn{i}") for i in range(4)]
    body = _get(client, "resources=VCPU:1&page_size=1&page_start=0.5")
    marker = _marker(body)
    raw = base64.urlsafe_b64decode(marker + "=" * (-len(marker) % 4)).decode()
    version, after, start, wrapped, fp = raw.split(":")
    assert version == "2" and wrapped == "0"
    for bad in (
        f"2:{after}:{start}:2:{fp}",
        f"2:{after}:-1:0:{fp}",
        f"2:{after}:{start}:0",
        f"2:{after}:{start}:0:{fp}:x",
        f"2:{after}:{start}:0:000000000000",
    ):
        forged = base64.urlsafe_b64encode(bad.encode()).decode().rstrip("=")
        resp = client.get(
            "/allocation_candidates?resources=VCPU:1&page_size=1&page_marker=" + forged
        )
        assert resp.status_code == 400, bad
        assert resp.get_json()["errors"][0]["code"] == "placement.query.bad_page_marker"
    # The marker carries the start: page_start on a later page does not move it.
    a = _walk(client, body["links"][0]["href"])
    b2 = _walk(client, body["links"][0]["href"].replace("page_start=0.5", "page_start=0.1"))
    assert a == b2 and len(a) == len(cns) - 1


def test_eco_and_draining_nodes_left_out_by_the_profile_trait(client, db):
    """root_required=!CUSTOM_POWER_PROFILE_ECO drops eco and draining nodes (a
    draining node's profile is eco already) and keeps performance nodes and nodes
    without a twin."""
    perf, eco, draining, bare = (_compute(db, n) for n in ("perf", "eco", "drain", "bare"))
    node_obj.set_twins(
        db,
        [
            {
                "uuid": perf,
                "generation": None,
                "profile": "performance",
                "schedulable_class": "performance",
            },
            {"uuid": eco, "generation": None, "profile": "eco", "schedulable_class": "eco"},
            {
                "uuid": draining,
                "generation": None,
                "profile": "eco",
                "schedulable_class": "draining",
            },
        ],
    )
    for extra in ("", "&page_size=10", "&page_size=1&page_start=0.5"):
        seen = _walk(
            client,
            "/allocation_candidates?resources=VCPU:1"
            "&root_required=!CUSTOM_POWER_PROFILE_ECO" + (extra or "&page_size=1000"),
        )
        assert sorted(seen) == sorted([perf, bare]), extra
