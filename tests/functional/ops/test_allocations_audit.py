"""placement-manage allocations audit: instance claims nobody builds or runs."""

import os
import subprocess
import sys
import uuid

import requests

from joule import placement_client
from joule import request_spec
from scheduler import conf as sconf_mod
from scheduler import worker as worker_mod
from tests import builders
from tests.specs import build_request_spec

BIN = os.path.dirname(sys.executable)


def _audit(db_url, *args):
    env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=db_url)
    return subprocess.run(
        [os.path.join(BIN, "placement-manage"), "allocations", "audit", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


class _PlacementGoesAway(requests.Session):
    """Placement stops answering after ``claims`` allocation writes (a restart
    in the middle of a multi-instance request): every later call fails."""

    def __init__(self, claims):
        super().__init__()
        self.claims = claims
        self.down = False

    def request(self, method, url, *args, **kwargs):
        if method == "PUT" and "/allocations/" in url:
            if self.claims == 0:
                self.down = True
            self.claims -= 1
        if self.down:
            raise requests.ConnectionError("Connection refused")
        return super().request(method, url, *args, **kwargs)


def _new():
    return str(uuid.uuid4())


def test_audit_finds_and_deletes_what_an_interrupted_request_left(db, db_url, client, live_server):
    for i in range(6):
        rp = builders.create_provider(db, name=f"cn{i}")
        builders.set_inventory(db, rp, "VCPU", 16)
        builders.set_inventory(db, rp, "MEMORY_MB", 32768)
    sconf = sconf_mod.make_conf(
        overrides={
            ("placement", "endpoint_override"): live_server.url,
            ("placement", "connect_retries"): 0,
        }
    )
    session = _PlacementGoesAway(claims=4)
    sched = worker_mod.Scheduler(
        sconf, placement_client.PlacementClient.from_conf(sconf, session=session)
    )
    spec = {
        "version": "1.0",
        "request_id": "req-interrupted",
        "num_instances": 10,
        "project_id": "p",
        "user_id": "u",
        "resources": {"VCPU": 1, "MEMORY_MB": 512},
    }
    try:
        sched.select_destinations(spec)
    except worker_mod.SchedulerError:
        pass
    else:
        raise AssertionError("the request should have failed when placement went away")
    assert session.down
    left = [c for c, a in _allocations(client).items() if a]
    assert len(left) == 4  # the claims made before placement went away, never released

    # Live work is not an orphan: a pending instance (a conductor holds it),
    # a placed one. A failed one still holding a claim is; so is a claim of
    # another consumer type, which is never the conductors' to judge.
    live_pending, live_placed, failed = _new(), _new(), _new()
    host = _providers(client)[0]
    for consumer in (live_pending, live_placed, failed):
        assert (
            client.post(
                "/build_requests",
                json={
                    "instance_uuid": consumer,
                    "request_id": "req-other",
                    "spec": build_request_spec(
                        consumer, "req-other", version=request_spec.REQUEST_SPEC_VERSION
                    ),
                },
            ).status_code
            == 201
        )
        _claim(client, consumer, host, "INSTANCE")
    client.put(f"/build_requests/{live_placed}", json={"status": "placed", "host_uuid": host})
    client.put(f"/build_requests/{failed}", json={"status": "failed", "reason": "x"})
    migration = _new()
    _claim(client, migration, host, "MIGRATION")

    res = _audit(db_url, "--verbose")
    assert res.returncode == 3, res.stderr
    listed = {
        line.split()[4].rstrip(":")
        for line in res.stdout.splitlines()
        if line.startswith("orphaned allocations of consumer")
    }
    assert listed == set(left) | {failed}
    assert "build request failed" in res.stdout and "no build request" in res.stdout
    assert "VCPU=1" in res.stdout

    res = _audit(db_url, "--delete")
    assert res.returncode == 4, res.stderr
    assert "5 of 5 orphaned consumer(s) deleted" in res.stdout
    remaining = {c for c, a in _allocations(client).items() if a}
    assert remaining == {live_pending, live_placed, migration}
    res = _audit(db_url)
    assert res.returncode == 0 and "no orphaned allocations found" in res.stdout


def _providers(client):
    return [p["uuid"] for p in client.get("/resource_providers").get_json()["resource_providers"]]


def _claim(client, consumer, host, consumer_type):
    resp = client.put(
        f"/allocations/{consumer}",
        json={
            "allocations": {host: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": consumer_type,
        },
    )
    assert resp.status_code == 204, resp.get_json()


def _allocations(client):
    out = {}
    for rp in _providers(client):
        for consumer, alloc in (
            client.get(f"/resource_providers/{rp}/allocations").get_json()["allocations"].items()
        ):
            out.setdefault(consumer, {})[rp] = alloc["resources"]
    return out
