"""Identical and conflicting creates raced from threads against a live server.

Every create of our extensions is guarded by the database's unique
constraint (INSERT ... ON CONFLICT DO NOTHING), not by a read before the
insert, so a race answers what the same requests would answer one after
the other: one 201, then for build requests and server groups 409
``...duplicate`` naming the record, for scheduling reports (create or
replace) 200; never a 500, and the stored record is one of the bodies sent.
"""

import collections
import concurrent.futures
import threading
import uuid

import sqlalchemy as sa

from placement import models
from tests import builders
from tests import processes

THREADS = 12
ROUNDS = 8
BR_DUPLICATE = "placement.build_request.duplicate"
SG_DUPLICATE = "placement.server_group.duplicate"


def _race(calls):
    """Run the (method, url, body) calls at once; their (status, body)."""
    barrier = threading.Barrier(len(calls))

    def one(call):
        barrier.wait()
        return processes.api_request(*call)

    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(one, calls))


def _codes(results):
    return sorted((s, b["errors"][0]["code"] if s >= 400 else None) for s, b in results)


def _expect_losers_name(results, instance):
    """Every 409 names ``instance`` as the duplicate."""
    for status, body in results:
        if status == 409:
            assert body["errors"][0]["instance_uuid"] == instance


def _expect_one_winner(results, code):
    """One 201, every other call 409 ``code`` (the count of each answer when not)."""
    expected = [(201, None)] + [(409, code)] * (len(results) - 1)
    assert _codes(results) == expected, collections.Counter(_codes(results))


def test_build_request_creates_race(live_server, db):
    url = f"{live_server.url}/build_requests"
    for round_ in range(ROUNDS):
        instance = str(uuid.uuid4())
        # Half the threads send the same record, half another request's
        # record for the same instance; single and bulk forms mixed.
        calls = []
        for i in range(THREADS):
            record = builders.build_request(instance, f"req-{round_}-{i % 2}")
            body = record if i % 4 < 2 else {"build_requests": [record]}
            calls.append(("POST", url, body))
        results = _race(calls)
        _expect_one_winner(results, BR_DUPLICATE)
        _expect_losers_name(results, instance)
        with db.read() as conn:
            rows = conn.execute(
                sa.select(models.build_requests).where(
                    models.build_requests.c.instance_uuid == instance
                )
            ).all()
        assert len(rows) == 1


def test_bulk_build_request_creates_race_name_the_known(live_server, db):
    """Overlapping bulk creates: each loser is refused whole, naming the
    instances another call recorded, so a conductor resends the others."""
    url = f"{live_server.url}/build_requests"
    shared = str(uuid.uuid4())
    calls = []
    for i in range(THREADS):
        own = str(uuid.uuid4())
        body = {
            "build_requests": [
                builders.build_request(own, f"req-own-{i}"),
                builders.build_request(shared, "req-shared"),
            ]
        }
        calls.append(("POST", url, body))
    results = _race(calls)
    _expect_one_winner(results, BR_DUPLICATE)
    _expect_losers_name(results, shared)
    with db.read() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(models.build_requests))
        assert count.scalar() == 2  # the shared record and the winner's own


def test_server_group_creates_race(live_server, db):
    url = f"{live_server.url}/server_groups"
    for _round in range(ROUNDS):
        group = str(uuid.uuid4())
        calls = [
            (
                "POST",
                url,
                {
                    "uuid": group,
                    "name": f"g-{i % 2}",
                    "policy": "anti-affinity" if i % 2 else "affinity",
                    "project_id": "p",
                    "user_id": "u",
                },
            )
            for i in range(THREADS)
        ]
        results = _race(calls)
        _expect_one_winner(results, SG_DUPLICATE)
        status, body = processes.api_request("GET", f"{url}/{group}")
        assert status == 200 and body["name"] in ("g-0", "g-1")


def test_scheduling_report_creates_race(live_server, db):
    for round_ in range(ROUNDS):
        request_id = f"req-race-{round_}"
        single = f"{live_server.url}/scheduling_reports/{request_id}"
        bulk = f"{live_server.url}/scheduling_reports"
        calls = []
        for i in range(THREADS):
            report = {"project_id": "p", "report": {"writer": i % 3}}
            if i % 2:
                calls.append(("PUT", single, report))
            else:
                calls.append(("POST", bulk, {"reports": [{"request_id": request_id, **report}]}))
        results = _race(calls)
        assert all(s < 500 for s, _b in results), collections.Counter(_codes(results))
        singles = [s for (_m, u, _b), (s, _r) in zip(calls, results, strict=True) if u == single]
        bulks = [r for (_m, u, _b), (_s, r) in zip(calls, results, strict=True) if u == bulk]
        assert set(singles) <= {200, 201}
        assert all(isinstance(r, dict) and "created" in r for r in bulks), bulks
        created = singles.count(201) + sum(r["created"] for r in bulks)
        replaced = singles.count(200) + sum(r["replaced"] for r in bulks)
        assert (created, replaced) == (1, THREADS - 1), results
        status, body = processes.api_request("GET", single)
        assert status == 200 and body["report"]["writer"] in (0, 1, 2)
