"""The cost of SQLite ``synchronous = FULL`` (the shipped setting) against
``NORMAL`` (the setting before issue 13), measured in one run.

Usage (from the repository, with the package installed):

    python -m benchmarks.sqlite_synchronous [--claims 400] [--rounds 2] [--dir DIR]

For each round and each mode, on a fresh SQLite file in ``--dir`` (default: a
temporary directory; it must be on a real disk, fsync on tmpfs costs nothing):
the app in-process on placement.db's engine (WAL, BEGIN IMMEDIATE), one
provider with 1,000,000 VCPU, then ``--claims`` sequential claims (PUT
/allocations/{new consumer}) and as many releases (DELETE). Prints claims/s,
releases/s and the median milliseconds of a claim, per mode (rounds
alternate NORMAL and FULL so drift in the machine's load hits both).
NORMAL is obtained by a second connect hook that runs after placement.db's.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

from sqlalchemy import event

from placement import app as app_mod
from placement import conf as conf_mod
from placement import db as db_mod

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def run_mode(directory, mode, claims):
    path = os.path.join(directory, f"bench-{mode}-{uuid.uuid4().hex[:8]}.sqlite")
    url = f"sqlite:///{path}"
    database = db_mod.Database(url)
    if mode == "NORMAL":

        @event.listens_for(database.engine, "connect")
        def _normal(dbapi_conn, _record):
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")

    conf = conf_mod.make_conf(overrides={("placement_database", "connection"): url})
    app = app_mod.create_app(conf, db=database, sync=True)
    with database.read() as conn:
        got = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    assert got == {"NORMAL": 1, "FULL": 2}[mode], got
    client = app.test_client()
    rp = str(uuid.uuid4())
    assert (
        client.post(
            "/resource_providers", json={"name": "bench", "uuid": rp}, headers=HEADERS
        ).status_code
        == 200
    )
    assert (
        client.put(
            f"/resource_providers/{rp}/inventories",
            json={
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": 1_000_000, "max_unit": 1_000_000}},
            },
            headers=HEADERS,
        ).status_code
        == 200
    )
    consumers = [str(uuid.uuid4()) for _ in range(claims)]
    timings = []
    started = time.perf_counter()
    for consumer in consumers:
        t0 = time.perf_counter()
        resp = client.put(
            f"/allocations/{consumer}",
            json={
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
            headers=HEADERS,
        )
        timings.append(time.perf_counter() - t0)
        assert resp.status_code == 204, resp.get_data(as_text=True)
    claim_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for consumer in consumers:
        assert client.delete(f"/allocations/{consumer}", headers=HEADERS).status_code == 204
    release_seconds = time.perf_counter() - started
    database.dispose()
    return claims / claim_seconds, claims / release_seconds, statistics.median(timings) * 1000


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    directory = args.dir or tempfile.mkdtemp(prefix="sqlite-sync-")
    results = {"NORMAL": [], "FULL": []}
    try:
        for _round in range(args.rounds):
            for mode in ("NORMAL", "FULL"):
                results[mode].append(run_mode(directory, mode, args.claims))
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    print(f"{args.claims} sequential claims and releases per round, {args.rounds} rounds")
    for mode, rows in results.items():
        claims = statistics.mean(r[0] for r in rows)
        releases = statistics.mean(r[1] for r in rows)
        median = statistics.mean(r[2] for r in rows)
        print(
            f"synchronous={mode:6s} claims/s {claims:7.1f}  releases/s {releases:7.1f}  "
            f"median claim {median:6.2f} ms  (rounds: "
            + ", ".join(f"{r[0]:.1f}" for r in rows)
            + ")"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
