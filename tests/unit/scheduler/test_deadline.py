"""A scheduler call's deadline (RPC 1.3, issue 23 finding 2): requests whose
caller's deadline passed are neither run nor claimed, and a deadline that is
not a time is refused."""

import threading
import time

from scheduler import batcher as batcher_mod
from scheduler import pipeline
from scheduler import service as sched_service
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host


def test_the_batcher_answers_a_spec_whose_deadline_passed_without_running_it():
    ran = []

    def run(specs, groups):
        ran.append(list(specs))
        return [(pipeline.PLACED, s) for s in specs]

    batcher = batcher_mod.Batcher(run, size=8, window=0.0, slots=1)
    assert batcher.submit_many([("late", None)], time.time() - 1) == [(pipeline.EXPIRED, None)]
    assert ran == []
    assert batcher.submit_many([("soon", None)], time.time() + 30) == [(pipeline.PLACED, "soon")]
    assert ran == [["soon"]]


def test_a_spec_that_waited_past_its_deadline_behind_a_batch_is_dropped():
    gate = threading.Event()
    ran = []

    def run(specs, groups):
        ran.append(list(specs))
        if specs == ["first"]:
            gate.wait(5)
        return [(pipeline.PLACED, s) for s in specs]

    batcher = batcher_mod.Batcher(run, size=8, window=0.0, slots=1)
    first = threading.Thread(target=batcher.submit, args=("first",))
    first.start()
    while not ran:
        time.sleep(0.01)
    out = {}
    deadline = time.time() + 0.2

    def queued():
        out["x"] = batcher.submit_many([("queued", None)], deadline)

    second = threading.Thread(target=queued)
    second.start()
    time.sleep(0.4)  # its deadline passes while the first batch runs
    gate.set()
    first.join(5)
    second.join(5)
    assert out["x"] == [(pipeline.EXPIRED, None)]
    assert ran == [["first"]]


def _spec(n):
    return {
        "version": "1.0",
        "request_id": f"r{n}",
        "project_id": "p",
        "user_id": "u",
        "resources": {"VCPU": 1},
        "instance_uuids": [f"00000000-0000-4000-8000-{n:012d}"],
    }


def test_an_expired_call_claims_nothing_and_a_bad_deadline_is_refused():
    fake = FakePlacement([host("a")])
    endpoint = sched_service.SchedulerEndpoint(make_conf(), lambda: fake)
    assert endpoint.select_destinations({}, _spec(1), deadline=time.time() - 1)["status"] == (
        "expired"
    )
    many = endpoint.select_destinations_many({}, [_spec(2), _spec(3)], deadline=time.time() - 1)
    assert [a["status"] for a in many] == ["expired", "expired"]
    assert fake.consumers == {}
    for bad in ("soon", True, -5):
        assert endpoint.select_destinations({}, _spec(4), deadline=bad)["status"] == "invalid"
    assert endpoint.select_destinations({}, _spec(5), deadline=time.time() + 30)["status"] == (
        "placed"
    )
    assert endpoint.select_destinations({}, _spec(6))["status"] == "placed"
