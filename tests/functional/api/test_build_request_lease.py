"""Build request ownership: leases taken by compare-and-set, bulk create and finish."""

import datetime
import urllib.parse
import uuid

import sqlalchemy as sa

from placement import models
from tests import specs

LEASED = "placement.build_request.leased"
FINISHED = "placement.build_request.invalid_transition"
CONCURRENT = "placement.concurrent_update"


def _new():
    return str(uuid.uuid4())


def _code(resp):
    return resp.get_json()["errors"][0]["code"]


def _create(client, owner=None, lease=None, instance=None):
    instance = instance or _new()
    body = {
        "instance_uuid": instance,
        "request_id": "req-lease",
        "spec": specs.build_request_spec(instance, "req-lease"),
    }
    if owner is not None:
        body.update(owner=owner, lease_seconds=lease or 60)
    resp = client.post("/build_requests", json=body)
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()


def _expire(db, instance):
    """What passing time does to a lease, without waiting for it."""
    past = datetime.datetime(2000, 1, 1)
    with db.write() as conn:
        conn.execute(
            models.build_requests.update()
            .where(models.build_requests.c.instance_uuid == instance)
            .values(lease_expires_at=past)
        )


def _lease(client, instance, owner, generation, seconds=60, **extra):
    return client.put(
        f"/build_requests/{instance}/lease",
        json={"owner": owner, "generation": generation, "lease_seconds": seconds, **extra},
    )


def test_created_held_then_renewed_and_only_by_its_owner(client):
    rec = _create(client, owner="cond-a", lease=60)
    inst = rec["instance_uuid"]
    assert rec["owner"] == "cond-a" and rec["generation"] == 0
    assert rec["lease_expires_at"].endswith("Z")
    # Another conductor cannot take a live lease.
    resp = _lease(client, inst, "cond-b", 0)
    assert resp.status_code == 409 and _code(resp) == LEASED
    assert "held by cond-a" in resp.get_json()["errors"][0]["detail"]
    # The owner renews; the generation moves on.
    resp = _lease(client, inst, "cond-a", 0, seconds=120)
    assert resp.status_code == 200
    assert resp.get_json()["generation"] == 1
    # A renewal with the old generation is a lost compare-and-set.
    resp = _lease(client, inst, "cond-a", 0)
    assert resp.status_code == 409 and _code(resp) == CONCURRENT
    got = client.get(f"/build_requests/{inst}").get_json()
    assert (got["owner"], got["generation"]) == ("cond-a", 1)


def test_expired_lease_is_taken_over_once(client, db):
    rec = _create(client, owner="cond-a", lease=60)
    inst = rec["instance_uuid"]
    _expire(db, inst)
    listed = client.get("/build_requests?status=pending&lease_expired=true").get_json()
    assert [b["instance_uuid"] for b in listed["build_requests"]] == [inst]
    assert client.get("/build_requests?lease_expired=false").get_json()["build_requests"] == []
    # Two conductors read generation 0; the first take wins, the second loses.
    assert _lease(client, inst, "cond-b", 0).status_code == 200
    resp = _lease(client, inst, "cond-c", 0)
    assert resp.status_code == 409 and _code(resp) == CONCURRENT
    # The dead owner, come back, cannot finish what it no longer holds.
    resp = client.put(
        f"/build_requests/{inst}", json={"status": "failed", "reason": "late", "owner": "cond-a"}
    )
    assert resp.status_code == 409 and _code(resp) == LEASED
    got = client.get(f"/build_requests/{inst}").get_json()
    assert (got["owner"], got["status"], got["generation"]) == ("cond-b", "pending", 1)
    owned = client.get("/build_requests?owner=cond-b").get_json()["build_requests"]
    assert [b["instance_uuid"] for b in owned] == [inst]


def test_hand_off_leaves_it_unowned_but_reserved(client, db):
    inst = _create(client, owner="super-1")["instance_uuid"]
    resp = _lease(client, inst, "super-1", 0, seconds=30, hand_off=True)
    assert resp.status_code == 200
    assert resp.get_json()["owner"] is None
    # Not swept while reserved, but the receiver of the hand-off may take it.
    assert client.get("/build_requests?lease_expired=true").get_json()["build_requests"] == []
    resp = _lease(client, inst, "cell1-a", 1)
    assert resp.status_code == 200 and resp.get_json()["owner"] == "cell1-a"


def test_a_take_naming_the_holder_needs_no_hand_off_and_only_once(client):
    # A super conductor casts a build without handing it off: the cell
    # conductor names it as the holder, at the generation it was cast with.
    inst = _create(client, owner="super-1")["instance_uuid"]
    # Naming somebody else as the holder does not get past the live lease.
    resp = _lease(client, inst, "cell1-a", 0, holder="super-2")
    assert resp.status_code == 409 and _code(resp) == LEASED
    resp = _lease(client, inst, "cell1-a", 0, holder="super-1")
    assert resp.status_code == 200
    assert (resp.get_json()["owner"], resp.get_json()["generation"]) == ("cell1-a", 1)
    # The same message again (a redelivery, or a second cell conductor):
    # the generation moved, so it is lost; the record is unchanged.
    resp = _lease(client, inst, "cell1-b", 0, holder="super-1")
    assert resp.status_code == 409 and _code(resp) == CONCURRENT
    resp = client.put(
        "/build_requests/leases",
        json={
            "build_requests": [{"instance_uuid": inst, "generation": 1, "holder": "super-1"}],
            "owner": "cell1-b",
            "lease_seconds": 60,
        },
    )
    assert resp.status_code == 409 and _code(resp) == LEASED
    got = client.get(f"/build_requests/{inst}").get_json()
    assert (got["owner"], got["generation"]) == ("cell1-a", 1)


def test_bulk_takes_name_a_holder_per_record(client):
    held = [_create(client, owner="super-1")["instance_uuid"] for _ in range(2)]
    free = _create(client)["instance_uuid"]
    resp = client.put(
        "/build_requests/leases",
        json={
            "build_requests": [
                {"instance_uuid": held[0], "generation": 0, "holder": "super-1"},
                {"instance_uuid": held[1], "generation": 0, "holder": "super-1"},
                {"instance_uuid": free, "generation": 0},
            ],
            "owner": "cell1-a",
            "lease_seconds": 60,
        },
    )
    assert resp.status_code == 200, resp.get_json()
    assert {r["owner"] for r in resp.get_json()["build_requests"]} == {"cell1-a"}


def test_a_holder_on_a_hand_off_or_naming_the_taker_is_a_bad_request(client):
    inst = _create(client, owner="super-1")["instance_uuid"]
    for extra, owner in (({"hand_off": True}, "super-1"), ({}, "super-1")):
        resp = _lease(client, inst, owner, 0, holder="super-1", **extra)
        assert resp.status_code == 400, resp.get_json()
        assert "holder" in resp.get_json()["errors"][0]["detail"]
    resp = _lease(client, inst, "cell1-a", 0, holder="")
    assert resp.status_code == 400
    got = client.get(f"/build_requests/{inst}").get_json()
    assert (got["owner"], got["generation"]) == ("super-1", 0)


def test_finished_record_is_never_touched_again(client):
    inst = _create(client, owner="cond-a")["instance_uuid"]
    host = _new()
    resp = client.put(
        f"/build_requests/{inst}",
        json={"status": "placed", "host_uuid": host, "owner": "cond-a", "generation": 0},
    )
    assert resp.status_code == 200
    done = resp.get_json()
    assert (done["owner"], done["lease_expires_at"], done["generation"]) == (None, None, 1)
    for owner in ("cond-a", "cond-b"):
        resp = _lease(client, inst, owner, 1)
        assert resp.status_code == 409 and _code(resp) == FINISHED
    resp = client.put(f"/build_requests/{inst}", json={"status": "failed"})
    assert resp.status_code == 409 and _code(resp) == FINISHED
    # The same finish again is the idempotent no-op it always was.
    again = client.put(f"/build_requests/{inst}", json={"status": "placed", "host_uuid": host})
    assert again.status_code == 200 and again.get_json()["generation"] == 1
    got = client.get(f"/build_requests/{inst}").get_json()
    assert (got["status"], got["host_uuid"], got["generation"]) == ("placed", host, 1)


def test_finish_guarded_by_generation(client):
    inst = _create(client, owner="cond-a")["instance_uuid"]
    resp = client.put(
        f"/build_requests/{inst}", json={"status": "failed", "owner": "cond-a", "generation": 5}
    )
    assert resp.status_code == 409 and _code(resp) == CONCURRENT
    assert client.get(f"/build_requests/{inst}").get_json()["status"] == "pending"


def test_lease_errors(client):
    inst = _create(client)["instance_uuid"]
    for body in (
        {"owner": "a", "generation": 0},
        {"owner": "", "generation": 0, "lease_seconds": 5},
        {"owner": "a", "generation": -1, "lease_seconds": 5},
        {"owner": "a", "generation": 0, "lease_seconds": 0},
        {"owner": "a", "generation": 0, "lease_seconds": 5, "x": 1},
    ):
        resp = client.put(f"/build_requests/{inst}/lease", json=body)
        assert resp.status_code == 400, body
    resp = _lease(client, _new(), "a", 0)
    assert resp.status_code == 404 and _code(resp) == "placement.build_request.not_found"
    assert _lease(client, "nope", "a", 0).status_code == 404
    got = client.get(f"/build_requests/{inst}").get_json()
    assert (got["owner"], got["generation"]) == (None, 0)


def _records(n, request_id="req-bulk"):
    out = []
    for _ in range(n):
        instance = _new()
        out.append(
            {
                "instance_uuid": instance,
                "request_id": request_id,
                "workload_class": "standard",
                "spec": specs.build_request_spec(instance, request_id),
            }
        )
    return out


def _count(db):
    with db.read() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(models.build_requests)).scalar()


def test_bulk_create_all_or_nothing(client, db):
    recs = _records(3)
    resp = client.post(
        "/build_requests", json={"build_requests": recs, "owner": "super-1", "lease_seconds": 30}
    )
    assert resp.status_code == 201
    out = resp.get_json()["build_requests"]
    assert [r["instance_uuid"] for r in out] == [r["instance_uuid"] for r in recs]
    assert {r["owner"] for r in out} == {"super-1"}
    # One known instance among new ones: 409 and none of the new ones recorded.
    fresh = _records(2)
    resp = client.post("/build_requests", json={"build_requests": fresh + [recs[0]]})
    assert resp.status_code == 409 and _code(resp) == "placement.build_request.duplicate"
    assert recs[0]["instance_uuid"] in resp.get_json()["errors"][0]["detail"]
    assert _count(db) == 3
    # The same instance twice in one body, an empty list, a bad item: 400.
    for body in (
        {"build_requests": fresh + [fresh[0]]},
        {"build_requests": []},
        {"build_requests": [{**fresh[0], "status": "placed"}]},
    ):
        assert client.post("/build_requests", json=body).status_code == 400
    assert _count(db) == 3


def test_bulk_finish_all_or_nothing(client):
    recs = _records(3)
    client.post(
        "/build_requests", json={"build_requests": recs, "owner": "cell-a", "lease_seconds": 30}
    )
    a, b, c = (r["instance_uuid"] for r in recs)
    host = _new()
    # c is guarded by a wrong owner: nothing is finished.
    resp = client.put(
        "/build_requests",
        json={
            "build_requests": [
                {"instance_uuid": a, "status": "placed", "host_uuid": host, "owner": "cell-a"},
                {"instance_uuid": b, "status": "failed", "reason": "r"},
                {"instance_uuid": c, "status": "failed", "owner": "cell-b"},
            ]
        },
    )
    assert resp.status_code == 409 and _code(resp) == LEASED
    statuses = [client.get(f"/build_requests/{u}").get_json()["status"] for u in (a, b, c)]
    assert statuses == ["pending"] * 3
    # An unknown instance: 404, nothing finished.
    resp = client.put(
        "/build_requests",
        json={
            "build_requests": [
                {"instance_uuid": a, "status": "failed"},
                {"instance_uuid": _new(), "status": "failed"},
            ]
        },
    )
    assert resp.status_code == 404
    resp = client.put(
        "/build_requests", json={"build_requests": [{"instance_uuid": a, "status": "placed"}]}
    )
    assert resp.status_code == 400  # placed without host
    resp = client.put(
        "/build_requests",
        json={
            "build_requests": [
                {"instance_uuid": a, "status": "placed", "host_uuid": host, "owner": "cell-a"},
                {"instance_uuid": b, "status": "failed", "reason": "r"},
            ]
        },
    )
    assert resp.status_code == 200
    assert [r["status"] for r in resp.get_json()["build_requests"]] == ["placed", "failed"]
    assert client.get(f"/build_requests/{c}").get_json()["status"] == "pending"


def _leases(client, items, owner, seconds=30, **extra):
    return client.put(
        "/build_requests/leases",
        json={
            "build_requests": [{"instance_uuid": u, "generation": g} for u, g in items],
            "owner": owner,
            "lease_seconds": seconds,
            **extra,
        },
    )


def test_bulk_lease_all_or_nothing_names_every_loser(client, db):
    recs = _records(4)
    client.post(
        "/build_requests", json={"build_requests": recs, "owner": "super-1", "lease_seconds": 30}
    )
    a, b, c, d = (r["instance_uuid"] for r in recs)
    # The super conductor hands all four off in one call.
    resp = _leases(client, [(a, 0), (b, 0), (c, 0), (d, 0)], "super-1", hand_off=True)
    assert resp.status_code == 200, resp.get_json()
    out = resp.get_json()["build_requests"]
    assert [(r["instance_uuid"], r["owner"], r["generation"]) for r in out] == [
        (u, None, 1) for u in (a, b, c, d)
    ]
    # Another conductor took b meanwhile, d was finished, c is read stale:
    # 409, one error object per loser naming it, and a is not taken either.
    assert _lease(client, b, "cell-b", 1).status_code == 200
    client.put(f"/build_requests/{d}", json={"status": "failed", "reason": "r"})
    resp = _leases(client, [(a, 1), (b, 1), (c, 0), (d, 1)], "cell-a")
    assert resp.status_code == 409
    errs = resp.get_json()["errors"]
    assert [(e["instance_uuid"], e["code"]) for e in errs] == [
        (b, CONCURRENT),
        (c, CONCURRENT),
        (d, FINISHED),
    ]
    assert all(e["status"] == 409 and e["instance_uuid"] in e["detail"] for e in errs)
    got = client.get(f"/build_requests/{a}").get_json()
    assert (got["owner"], got["generation"]) == (None, 1)
    # A live lease of another owner is "leased".
    resp = _leases(client, [(b, 2)], "cell-a")
    assert resp.status_code == 409 and _code(resp) == LEASED
    assert resp.get_json()["errors"][0]["instance_uuid"] == b
    # The winners retried alone: taken, and renewed by the same owner.
    resp = _leases(client, [(a, 1), (c, 1)], "cell-a")
    assert resp.status_code == 200
    assert [r["generation"] for r in resp.get_json()["build_requests"]] == [2, 2]
    resp = _leases(client, [(a, 2), (c, 2)], "cell-a", seconds=60)
    assert resp.status_code == 200
    assert {r["owner"] for r in resp.get_json()["build_requests"]} == {"cell-a"}


def test_bulk_lease_bad_input_changes_nothing(client, db):
    recs = _records(2)
    client.post("/build_requests", json={"build_requests": recs})
    a, b = (r["instance_uuid"] for r in recs)
    unknown = _new()
    resp = _leases(client, [(a, 0), (unknown, 0), (b, 0)], "cell-a")
    assert resp.status_code == 404
    errs = resp.get_json()["errors"]
    assert [e["code"] for e in errs] == ["placement.build_request.not_found"]
    assert errs[0]["instance_uuid"] == unknown
    item = {"instance_uuid": a, "generation": 0}
    for body in (
        {"build_requests": [item], "owner": "x"},
        {"build_requests": [item], "lease_seconds": 5},
        {"build_requests": [], "owner": "x", "lease_seconds": 5},
        {"build_requests": [item, item], "owner": "x", "lease_seconds": 5},
        {"build_requests": [{**item, "generation": -1}], "owner": "x", "lease_seconds": 5},
        {
            "build_requests": [{"instance_uuid": "nope", "generation": 0}],
            "owner": "x",
            "lease_seconds": 5,
        },
        {"build_requests": [{**item, "x": 1}], "owner": "x", "lease_seconds": 5},
        {"build_requests": [item], "owner": "x", "lease_seconds": 5, "hand_off": "yes"},
    ):
        resp = client.put("/build_requests/leases", json=body)
        assert resp.status_code == 400, body
        assert resp.get_json()["errors"][0]["code"] == "placement.undefined_code"
    for u in (a, b):
        got = client.get(f"/build_requests/{u}").get_json()
        assert (got["owner"], got["generation"]) == (None, 0)


def test_bulk_finish_names_every_loser(client):
    recs = _records(3)
    client.post(
        "/build_requests", json={"build_requests": recs, "owner": "cell-a", "lease_seconds": 30}
    )
    a, b, c = (r["instance_uuid"] for r in recs)
    assert client.put(f"/build_requests/{c}", json={"status": "failed"}).status_code == 200
    resp = client.put(
        "/build_requests",
        json={
            "build_requests": [
                {"instance_uuid": a, "status": "failed", "owner": "cell-a"},
                {"instance_uuid": b, "status": "failed", "owner": "cell-b"},
                {"instance_uuid": c, "status": "placed", "host_uuid": _new()},
            ]
        },
    )
    assert resp.status_code == 409
    errs = resp.get_json()["errors"]
    assert [(e["instance_uuid"], e["code"]) for e in errs] == [(b, LEASED), (c, FINISHED)]
    assert client.get(f"/build_requests/{a}").get_json()["status"] == "pending"


def test_list_of_several_requests_in_one_read(client):
    for rid in ("req-x", "req-y", "req-z"):
        client.post("/build_requests", json={"build_requests": _records(2, rid)})
    resp = client.get("/build_requests?request_id=in:req-x,req-z,req-none")
    assert resp.status_code == 200
    got = resp.get_json()["build_requests"]
    assert sorted(r["request_id"] for r in got) == ["req-x", "req-x", "req-z", "req-z"]
    one = client.get("/build_requests?request_id=req-y").get_json()["build_requests"]
    assert [r["request_id"] for r in one] == ["req-y", "req-y"]
    for bad in (
        "in:",
        "in:req-x,",
        "in:req-x,,req-y",
        "in:req-x,../traits",
        "in:" + ",".join(f"r{i}" for i in range(101)),
        "in:" + "r" * 65,
    ):
        resp = client.get(f"/build_requests?request_id={urllib.parse.quote(bad)}")
        assert resp.status_code == 400, bad
        assert "Invalid query string parameters" in resp.get_json()["errors"][0]["detail"]


def test_a_write_that_lands_between_read_and_update_is_named(client, db):
    """A write that lands between an unlocked read and the guarded UPDATE
    (the callers lock their reads; this is the UPDATE's own guard): the
    bulk UPDATE finds one row fewer, names that record alone, and the whole
    call changes nothing."""
    from placement.objects import build_request as br

    recs = _records(3)
    client.post("/build_requests", json={"build_requests": recs})
    a, b, c = (r["instance_uuid"] for r in recs)
    with db.read() as conn:
        stale = br._rows_by_uuid(conn, [a, b, c])  # what this call read
    other = _lease(client, b, "cell-b", 0)  # the other writer
    assert other.status_code == 200
    # In the very second of the other write (placement's timestamps have
    # whole seconds): the values, not the time, tell the writes apart.
    with db.read() as conn:
        now = br._rows_by_uuid(conn, [b])[b].updated_at
    try:
        with db.write() as conn:
            br._guarded_update(
                conn,
                [(stale[u], 0, {}) for u in (a, b, c)],
                {"owner": "cell-a", "lease_expires_at": now, "updated_at": now},
                now,
            )
    except br.GenerationConflict as exc:
        assert exc.instance_uuid == b
    else:
        raise AssertionError("the lost record was not refused")
    got = {u: client.get(f"/build_requests/{u}").get_json() for u in (a, b, c)}
    assert [(got[u]["owner"], got[u]["generation"]) for u in (a, b, c)] == [
        (None, 0),
        ("cell-b", 1),
        (None, 0),
    ]


def test_a_concurrent_take_waits_for_the_bulk_write_and_is_refused_by_name(client, db):
    """A bulk take locks what it read: another conductor's take of one of
    its records waits until it commits, then is refused with that record's
    own error (not a generic conflict naming the whole batch)."""
    import threading
    import time

    from placement.objects import build_request as br

    recs = _records(3)
    client.post("/build_requests", json={"build_requests": recs})
    a, b, c = (r["instance_uuid"] for r in recs)
    answer = {}

    def other():
        answer["resp"] = _leases(client, [(b, 0)], "cell-b")

    thread = threading.Thread(target=other)
    with db.write() as conn:
        rows = br._rows_by_uuid(conn, [a, b, c], lock=True)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive()  # waiting for this transaction
        now = datetime.datetime(2030, 1, 1)
        br._guarded_update(
            conn,
            [(rows[u], 0, {}) for u in (a, b, c)],
            {"owner": "cell-a", "lease_expires_at": now, "updated_at": now},
            now,
        )
    thread.join(30)
    resp = answer["resp"]
    assert resp.status_code == 409
    errs = resp.get_json()["errors"]
    assert [(e["instance_uuid"], e["code"]) for e in errs] == [(b, CONCURRENT)]
    got = client.get(f"/build_requests/{b}").get_json()
    assert (got["owner"], got["generation"]) == ("cell-a", 1)
