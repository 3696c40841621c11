"""A super conductor's held requests renewed by its one renewal thread."""

import threading
import time

from conductor import leases


class _Records:
    lease_seconds = 0.3
    owner = "cond-a"

    def __init__(self, pause=0.0):
        self.calls = []
        self.pause = pause
        self.lock = threading.Lock()

    def take_many(self, generations, hand_off=False, holders=None):
        with self.lock:
            self.calls.append(dict(generations))
        time.sleep(self.pause)
        return {i: g + 1 for i, g in generations.items()}


def test_held_records_are_renewed_every_third_of_the_lease_and_not_after():
    records = _Records()
    held = leases.Held(records, {"a": 1, "b": 5})
    with held.kept_alive():
        time.sleep(0.35)  # three beats of 0.1 s: renewed at about 0.1, 0.2, 0.3
    renewals = len(records.calls)
    assert 2 <= renewals <= 4
    # Each renewal at the generations the last one gave.
    assert records.calls[0] == {"a": 1, "b": 5} and records.calls[1] == {"a": 2, "b": 6}
    assert held.generations_of(["a", "b"]) == {"a": 1 + renewals, "b": 5 + renewals}
    time.sleep(0.25)
    assert len(records.calls) == renewals  # the block ended: no renewal since


def test_a_request_scheduled_within_a_beat_costs_no_renewal_and_no_thread_of_its_own():
    records = _Records()
    before = threading.active_count()
    helds = [leases.Held(records, {f"i{n}": 0}) for n in range(50)]
    for held in helds:
        with held.kept_alive():
            pass
    # One renewal thread for the conductor, however many requests.
    assert threading.active_count() <= before + 1
    time.sleep(0.15)
    assert records.calls == []


def test_leaving_the_block_waits_for_a_renewal_in_flight():
    # The finish after the block carries the generation: a renewal that
    # ended after it would make that generation stale.
    records = _Records(pause=0.15)
    held = leases.Held(records, {"a": 1})
    with held.kept_alive():
        time.sleep(0.13)  # the renewal (due at 0.1 s) is in flight now
    assert records.calls == [{"a": 1}]
    assert held.generations_of(["a"]) == {"a": 2}


def test_two_requests_due_together_are_renewed_side_by_side():
    records = _Records(pause=0.2)
    a, b = leases.Held(records, {"a": 1}), leases.Held(records, {"b": 1})
    start = time.monotonic()
    with a.kept_alive(), b.kept_alive():
        time.sleep(0.12)
    # Both renewals (0.2 s each) were in flight at once, not one after the other.
    assert time.monotonic() - start < 0.45
    assert sorted(next(iter(c)) for c in records.calls) == ["a", "b"]
