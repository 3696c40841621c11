"""Conductor over the fake placement: reschedule to alternates, failures, resume."""

import pytest

from conductor import driver as driver_mod
from conductor import manager
from joule import request_spec as spec_mod
from joule.request_spec import InvalidRequestSpec
from scheduler import worker
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host


def spec(**kw):
    data = {"version": "1.0", "resources": {"VCPU": 2, "MEMORY_MB": 1024}, "project_id": "p",
            "user_id": "u"}
    data.update(kw)
    return data


def make(hosts, driver=None, **conf):
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(**conf), fake)
    cond = manager.Conductor(sched, fake, driver or driver_mod.SimulatedDriver())
    return fake, cond


def test_simulated_driver_injection_is_reproducible():
    sel = spec_mod.Selection("i", "h-uuid", "h1", "c", {}, True)
    d = driver_mod.SimulatedDriver(failing_hosts={"h1"})
    with pytest.raises(driver_mod.BuildFailed, match="h1 fails every build"):
        d.spawn("i", sel)

    def draws(seed):
        drv = driver_mod.SimulatedDriver(failure_rate=0.5, seed=seed)
        out = []
        for n in range(20):
            try:
                drv.spawn(str(n), sel)
                out.append(True)
            except driver_mod.BuildFailed:
                out.append(False)
        return out

    assert draws(7) == draws(7) and True in draws(7) and False in draws(7)
    with pytest.raises(ValueError):
        driver_mod.SimulatedDriver(failure_rate=1.5)


def test_placed_build_is_recorded():
    fake, cond = make([host("a")])
    [res] = cond.build(spec(workload_class="performance"))
    assert res.status == "placed" and res.host_name == "a" and res.rescheduled == 0
    br = fake.build_requests[res.instance_uuid]
    assert br["status"] == "placed" and br["host_uuid"] == res.host_uuid
    assert br["workload_class"] == "performance"


def test_failed_build_moves_claim_to_alternate_in_one_write():
    hosts = [host("bad", ram=99999), host("good", ram=50000)]
    fake, cond = make(hosts, driver_mod.SimulatedDriver(failing_hosts={"bad"}))
    [res] = cond.build(spec())
    assert res.status == "placed" and res.host_name == "good" and res.rescheduled == 1
    assert fake.holder_of(res.instance_uuid) == [hosts[1]["uuid"]]
    assert fake.used[hosts[0]["uuid"]]["VCPU"] == 0
    # The move was a PUT with the consumer generation, never a DELETE first.
    ops = [op for op, c in fake.calls if c == res.instance_uuid]
    assert ops == ["PUT", "PUT"]


def test_alternate_taken_releases_failed_host_and_claims_next():
    hosts = [host("bad", ram=99999), host("taken", ram=60000), host("last", ram=50000)]
    fake, cond = make(hosts, driver_mod.SimulatedDriver(failing_hosts={"bad"}))
    # Another scheduler fills "taken" after our selection.
    orig = fake.put_allocations

    def put(consumer, areq, *a, **kw):
        if hosts[1]["uuid"] in areq["allocations"]:
            fake.steal.add(hosts[1]["uuid"])
        return orig(consumer, areq, *a, **kw)

    fake.put_allocations = put
    [res] = cond.build(spec())
    assert res.status == "placed" and res.host_name == "last"
    assert fake.holder_of(res.instance_uuid) == [hosts[2]["uuid"]]
    assert fake.used[hosts[0]["uuid"]]["VCPU"] == 0


def test_all_alternates_fail_leaves_no_allocation():
    hosts = [host(f"h{i}") for i in range(3)]
    fake, cond = make(hosts, driver_mod.SimulatedDriver(failure_rate=1.0), max_attempts=3)
    [res] = cond.build(spec())
    assert res.status == "failed" and res.attempts == 3
    assert "failed on all 3 host(s)" in res.reason
    assert fake.consumers == {}
    assert fake.build_requests[res.instance_uuid]["status"] == "failed"
    assert all(u["VCPU"] == 0 for u in fake.used.values())


def test_no_valid_host_fails_every_instance_with_reason():
    fake, cond = make([host("e", klass="eco")])
    results = cond.build(spec(workload_class="performance", num_instances=2))
    assert [r.status for r in results] == ["failed", "failed"]
    assert "JoulieFilter had placement leave out hosts with CUSTOM_POWER_PROFILE_ECO" in \
        results[0].reason
    assert {b["status"] for b in fake.build_requests.values()} == {"failed"}


def test_bad_spec_records_nothing():
    fake, cond = make([host("a")])
    with pytest.raises(InvalidRequestSpec):
        cond.build(spec(workload_class="urgent"))
    assert fake.build_requests == {}


def test_restarted_conductor_resumes_pending_requests():
    fake, cond = make([host("a"), host("b")])
    # A conductor recorded a request, claimed it, then died before building.
    s = spec(request_id="req-crash")
    parsed = spec_mod.load_request_spec(s)
    inst = parsed.instance_uuids[0]
    fake.create_build_request(inst, "req-crash", "standard", spec_mod.dump_request_spec(parsed))
    cond.scheduler.select_destinations(parsed)
    assert fake.holder_of(inst)
    fresh = manager.Conductor(worker.Scheduler(make_conf(), fake), fake,
                              driver_mod.SimulatedDriver())
    [res] = fresh.resume_pending()
    assert res.status == "placed" and res.instance_uuid == inst
    assert fake.build_requests[inst]["status"] == "placed"
    assert len(fake.holder_of(inst)) == 1
    assert sum(u["VCPU"] for u in fake.used.values()) == 2  # claimed once, not twice
    assert fresh.resume_pending() == []


def test_instance_claimed_by_another_conductor_is_left_to_it():
    fake, cond = make([host("a"), host("b")])
    parsed = spec_mod.load_request_spec(spec(request_id="req-twice"))
    inst = parsed.instance_uuids[0]
    fake.create_build_request(inst, "req-twice", "standard", spec_mod.dump_request_spec(parsed))
    # The other conductor's scheduler claimed it first.
    cond.scheduler.select_destinations(parsed)
    [res] = cond._schedule_and_build(parsed)
    assert res.status == "skipped" and "already holds allocations" in res.reason
    assert fake.build_requests[inst]["status"] == "pending"
    assert len(fake.holder_of(inst)) == 1
