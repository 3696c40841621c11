"""A request the scheduler says waits for sleeping hosts is held, its
records pending and their leases renewed, and scheduled again until it is
placed or has waited ``wake_wait_seconds`` (then it fails saying so)."""

import threading
import time

from conductor import super_conductor as super_mod
from joule import request_spec as spec_mod

INSTANCE = "6f1c9a52-9a0e-4d0b-9d8b-1f1f4d3c2b1a"
WAITING = {
    "status": "waiting",
    "error": "No valid host for request req-1 (...); waiting for 1 host(s) of family cpu:X to wake",
    "wake": {"cpu:X": 1},
}


class _Records:
    lease_seconds = 0.3
    owner = "me"

    def __init__(self):
        self.takes = 0

    def take_many(self, generations, hand_off=False, holders=None):
        self.takes += 1
        return {i: g + 1 for i, g in generations.items()}


class _Client:
    def __init__(self):
        self.released = []

    def delete_allocations(self, consumer, lease=None):
        self.released.append(consumer)


class _Scheduler:
    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = 0

    def select_destinations(self, spec, on_retry=None):
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class _Bus:
    def __init__(self, scheduler):
        self.scheduler = scheduler


class _Batchers:
    scheduling = None
    build_casts = None


class _Reporter:
    def __init__(self):
        self.failed = []
        self.done = threading.Event()

    def failed_many(self, spec, instances, reason, reply_topic, generations=None):
        self.failed.append((instances, reason))
        self.done.set()


def _spec():
    return spec_mod.load_request_spec(
        {
            "version": "1.0",
            "request_id": "req-1",
            "project_id": "p",
            "user_id": "u",
            "resources": {"VCPU": 1},
            "instance_uuids": [INSTANCE],
        }
    )


def _conductor(answers, wait_seconds, retry=0.05):
    records, reporter, scheduler = _Records(), _Reporter(), _Scheduler(answers)
    sc = super_mod.SuperConductor(
        records,
        _Client(),
        _Bus(scheduler),
        reporter,
        None,
        _Batchers(),
        wake_wait_seconds=wait_seconds,
        wake_retry_interval=retry,
    )
    dispatched = []

    def dispatch(spec, held, selections, reply_topic):
        dispatched.append(held.instances())
        reporter.done.set()

    sc._dispatch = dispatch
    return sc, records, reporter, scheduler, dispatched


def test_a_waiting_request_is_placed_once_the_hosts_are_on(monkeypatch):
    monkeypatch.setattr(spec_mod, "load_selections", lambda s: type("S", (), {"selections": s}))
    placed = {"status": "placed", "selections": [["host"]]}
    sc, records, reporter, scheduler, dispatched = _conductor([WAITING] * 3 + [placed], 30)
    sc.schedule_and_dispatch(_spec(), {INSTANCE: 0}, "topic")
    assert sc.wake_waits.count() == 1 and reporter.failed == []  # held, not failed
    assert reporter.done.wait(10)
    assert dispatched == [[INSTANCE]] and reporter.failed == []
    assert scheduler.calls == 4
    assert sc.wake_waits.count() == 0
    sc.wake_waits.stop()


def test_leases_are_renewed_while_it_waits():
    sc, records, reporter, scheduler, dispatched = _conductor([WAITING], 30, retry=5)
    sc.schedule_and_dispatch(_spec(), {INSTANCE: 0}, "topic")
    before = records.takes
    time.sleep(0.5)  # more than a lease of 0.3 s: renewed every third of it
    assert records.takes >= before + 2
    assert reporter.failed == [] and sc.wake_waits.count() == 1
    sc.wake_waits.stop()


def test_it_fails_once_it_waited_wake_wait_seconds_saying_what_for():
    sc, records, reporter, scheduler, dispatched = _conductor([WAITING], 0.3)
    sc.schedule_and_dispatch(_spec(), {INSTANCE: 0}, "topic")
    assert reporter.done.wait(10)
    [(instances, reason)] = reporter.failed
    assert instances == [INSTANCE]
    assert "waiting for 1 host(s) of family cpu:X to wake; not woken after" in reason
    assert "wake_wait_seconds = 0.3" in reason
    assert scheduler.calls >= 2 and dispatched == []
    sc.wake_waits.stop()


def test_with_no_wait_it_fails_at_once():
    sc, records, reporter, scheduler, dispatched = _conductor([WAITING], 0)
    sc.schedule_and_dispatch(_spec(), {INSTANCE: 0}, "topic")
    [(instances, reason)] = reporter.failed
    assert reason == f"scheduling failed: {WAITING['error']}"
    assert scheduler.calls == 1 and sc.wake_waits.count() == 0


def test_a_stopping_conductor_leaves_the_request_to_the_sweep():
    sc, records, reporter, scheduler, dispatched = _conductor([WAITING], 30)
    sc.wake_waits.stop()
    sc.schedule_and_dispatch(_spec(), {INSTANCE: 0}, "topic")
    assert reporter.failed == [] and dispatched == []  # pending: its lease runs out
