"""Group commit (conductor.batch): callers of several threads share one flush."""

import threading

import pytest

from conductor import batch
from conductor import conf as cconf
from conductor import intake
from conductor import leases
from conductor import service as cond_service
from conductor import super_conductor
from joule import rpc
from joule.rpc import oslo_messaging
from tests.unit.wake_counts import callers_at_once


class _Flush:
    """A flush that holds its first call until released, so the callers that
    arrive meanwhile queue up for the next one."""

    def __init__(self):
        self.calls = []
        self.first_in = threading.Event()
        self.release = threading.Event()

    def __call__(self, items):
        self.calls.append(list(items))
        if len(self.calls) == 1:
            self.first_in.set()
            self.release.wait(10)
        return [("done", i) if i != "bad" else ValueError("bad item") for i in items]


def _run(batcher, items):
    out = {}

    def call(i):
        try:
            out[i] = batcher.submit(i)
        except ValueError as exc:
            out[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in items]
    return out, threads


def test_callers_queued_behind_a_flush_share_the_next_one():
    flush = _Flush()
    b = batch.Batcher(flush, window=0.0, max_items=100)
    first, threads = _run(b, ["a"])
    threads[0].start()
    assert flush.first_in.wait(10)
    rest, others = _run(b, ["b", "c", "bad", "d"])
    for t in others:
        t.start()
    # Wait until all four are queued behind the flush in flight.
    for _ in range(1000):
        with b._lock:
            if len(b._pending) == 4:
                break
        threading.Event().wait(0.01)
    flush.release.set()
    for t in threads + others:
        t.join(10)
    assert flush.calls[0] == ["a"]
    assert sorted(flush.calls[1]) == ["b", "bad", "c", "d"] and len(flush.calls) == 2
    assert first == {"a": ("done", "a")}
    # Each caller gets its own item's result; an item's error is raised in its caller only.
    assert {k: v for k, v in rest.items() if k != "bad"} == {
        "b": ("done", "b"),
        "c": ("done", "c"),
        "d": ("done", "d"),
    }
    assert isinstance(rest["bad"], ValueError)
    assert (b.flushes, b.items) == (2, 5)


def test_max_items_splits_and_a_failed_flush_fails_its_callers():
    calls = []

    def flush(items):
        calls.append(list(items))
        if "boom" in items:
            raise RuntimeError("placement down")
        return list(items)

    b = batch.Batcher(flush, window=0.0, max_items=2)
    assert b.submit_many([1, 2, 3, 4, 5]) == [1, 2, 3, 4, 5]
    assert calls == [[1, 2], [3, 4], [5]]
    with pytest.raises(RuntimeError, match="placement down"):
        b.submit_many(["boom", 6])
    # The batcher is usable after a failed flush.
    assert b.submit(7) == 7


def test_unique_rounds_keep_order_and_never_repeat_a_key():
    assert batch.unique_rounds([]) == []
    assert batch.unique_rounds(["a", "b", "a", "c", "a", "b"]) == [[0, 1, 3], [2, 5], [4]]


def _build(**over):
    b = {
        "instance_uuid": "6a6f756c-6500-4000-8000-000000000001",
        "request_spec": {},
        "selections": {},
        "generation": 3,
    }
    b.update(over)
    return b


@pytest.mark.parametrize(
    "builds",
    [
        [],
        {"instance_uuid": "x"},
        [_build(generation=-1)],
        [_build(generation=True)],
        [_build(generation="3")],
        [_build(instance_uuid="6A6F756C-6500-4000-8000-000000000001")],
        [_build(instance_uuid="../x")],
        [_build(), _build()],
        [{**_build(), "extra": 1}],
        [{k: v for k, v in _build().items() if k != "generation"}],
        [_build(reply_topic="")],
        [_build(reply_topic=7)],
    ],
)
def test_bad_build_many_messages_are_refused(builds):
    with pytest.raises(ValueError):
        intake.checked_builds(builds)


def test_good_build_many_message_passes():
    # 1.1 (the message's reply topic for every build) and 1.2 (a build's own,
    # or none: a build resumed by a sweep has nobody to tell).
    builds = [_build(), _build(instance_uuid="6a6f756c-6500-4000-8000-000000000002")]
    assert intake.checked_builds(builds) == builds
    builds.append(_build(instance_uuid="6a6f756c-6500-4000-8000-000000000003", reply_topic="t"))
    builds.append(_build(instance_uuid="6a6f756c-6500-4000-8000-000000000004", reply_topic=None))
    assert intake.checked_builds(builds) == builds


def test_one_message_names_only_the_reply_topics_that_differ():
    a, b, c = ({"instance_uuid": n} for n in "abc")
    builds, default = super_conductor.one_message([(a, "x"), (b, "y"), (c, "x")])
    assert default == "x"
    assert builds == [a, {"instance_uuid": "b", "reply_topic": "y"}, c]
    # One submitter: no build carries a topic (the message stays 1.1).
    assert super_conductor.one_message([(a, "x"), (c, "x")]) == ([a, c], "x")


def test_batchers_share_a_flush_only_within_a_key():
    flushes = []
    gate = threading.Event()

    def flush(key, items):
        flushes.append((key, list(items)))
        if len(flushes) == 1:
            gate.wait(10)
        return [f"{key}:{i}" for i in items]

    b = batch.Batchers(flush, window=0.0, max_items=100)
    out = {}

    def call(key, item):
        out[(key, item)] = b.submit(key, item)

    first = threading.Thread(target=call, args=("k1", 0))
    first.start()
    for _ in range(1000):
        if flushes:
            break
        threading.Event().wait(0.01)
    others = [threading.Thread(target=call, args=(k, i)) for k, i in [("k1", 1), ("k1", 2)]]
    for t in others:
        t.start()
    for _ in range(1000):
        with b._batchers["k1"]._lock:
            if len(b._batchers["k1"]._pending) == 2:
                break
        threading.Event().wait(0.01)
    # Another key is not held up behind k1's flush in flight.
    assert b.submit("k2", 9) == "k2:9"
    gate.set()
    for t in [first, *others]:
        t.join(10)
    assert flushes[0] == ("k1", [0]) and ("k2", [9]) in flushes
    assert sorted(flushes[-1][1]) == [1, 2] and len(flushes) == 3
    assert out == {("k1", 0): "k1:0", ("k1", 1): "k1:1", ("k1", 2): "k1:2"}
    assert b.flushes == 3


class _Records:
    lease_seconds = 0.3
    owner = "cond-a"

    def __init__(self, answers):
        self.answers = list(answers)
        self.takes = []
        self.bulk = []

    def take(self, instance, generation):
        self.takes.append((instance, generation))
        return self.answers.pop(0) if self.answers else generation + 1

    def take_many(self, generations, hand_off=False, holders=None):
        self.bulk.append(sorted(generations))
        return {i: self.take(i, g) for i, g in generations.items()}


def test_a_lease_is_renewed_in_the_background_while_the_build_runs():
    import time

    # Asked a whole beat ago: renewed at once, then every third of the lease,
    # each renewal at the generation the last one gave.
    records = _Records([])
    lease = leases.Lease(records, "i", 7, taken_at=time.monotonic() - 0.1)
    with lease.kept_alive():
        time.sleep(0.55)
        assert lease.keep()
    assert len(records.takes) >= 4
    assert [g for _i, g in records.takes] == list(range(7, 7 + len(records.takes)))
    assert lease.generation == 7 + len(records.takes)
    # The heartbeat stopped with the block: the lease runs out by its own watch.
    time.sleep(0.35)
    assert not lease.keep()


def test_the_builds_of_one_conductor_are_renewed_together_and_a_busy_one_after_its_write():
    import time

    records = _Records([])
    a = leases.Lease(records, "a", 1, taken_at=time.monotonic() - 0.1)
    b = leases.Lease(records, "b", 1, taken_at=time.monotonic() - 0.1)
    with a.kept_alive(), b.kept_alive():
        # b is busy with a guarded write while both are due: a is renewed
        # alone, b as soon as its write is done, at the generation it wrote with.
        def slow_write(**kw):
            assert kw["lease"] == (1, "cond-a")
            time.sleep(0.05)

        b.write(slow_write)
        time.sleep(0.25)
    assert ["a", "b"] in records.bulk
    assert records.bulk[0] in (["a"], ["a", "b"])
    assert a.keep() and b.keep() and a.generation > 2 and b.generation > 2


def test_a_refused_renewal_ends_the_hold_and_guarded_writes_are_not_sent():
    import time

    lost = _Records([None])
    lease = leases.Lease(lost, "i", 7, taken_at=time.monotonic() - 0.1)
    with lease.kept_alive():
        time.sleep(0.05)
    assert not lease.keep()
    sent = []
    with pytest.raises(leases.LeaseLost):
        lease.write(lambda *a, **kw: sent.append((a, kw)), "x")
    assert sent == []
    # A live lease sends its generation and owner with the write.
    held = leases.Lease(_Records([]), "j", 3)
    held.write(lambda *a, **kw: sent.append((a, kw)), "x")
    assert sent == [(("x",), {"lease": (3, "cond-a")})]


def test_concurrent_flushes_never_exceed_the_limit():
    """``concurrent=2``: a second flush starts while the first is in flight
    (a slow scheduling call does not hold the next group back), a third
    waits for one of them."""
    lock = threading.Lock()
    state = {"in_flight": 0, "most": 0}
    gate = threading.Event()

    def flush(items):
        with lock:
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
        gate.wait(10)
        with lock:
            state["in_flight"] -= 1
        return list(items)

    b = batch.Batcher(flush, window=0.0, max_items=1, concurrent=2)
    out, threads = _run(b, list("abcdef"))
    for t in threads:
        t.start()
    for _ in range(1000):
        with lock:
            if state["in_flight"] == 2:
                break
        threading.Event().wait(0.01)
    with lock:
        assert state["in_flight"] == 2  # two at once, not one
    gate.set()
    for t in threads:
        t.join(10)
    assert state["most"] == 2
    assert out == {i: i for i in "abcdef"}


class _DownCells:
    """A cells API whose casts fail (the broker is gone); the first one
    waits until released, so the others queue for the next message."""

    def __init__(self):
        self.messages = []
        self.first_in = threading.Event()
        self.release = threading.Event()

    def build_many(self, cell, builds, reply_topic):
        self.messages.append([b["instance_uuid"] for b in builds])
        if len(self.messages) == 1:
            self.first_in.set()
            self.release.wait(10)
        raise oslo_messaging.MessageDeliveryFailure("broker down")


def test_a_failed_build_many_raises_in_every_request_it_carried():
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    conductor = cond_service.Conductor(conf, None, rpc.transport_of(conf), None, "super-1")
    cells = conductor.conductors = _DownCells()
    raised = {}

    def hand(instance):
        try:
            conductor.super_conductor.cast_builds("cell1", [_build(instance_uuid=instance)], "t")
        except oslo_messaging.MessagingException as exc:
            raised[instance] = exc

    ids = [f"6a6f756c-6500-4000-8000-00000000000{n}" for n in range(4)]
    threads = [threading.Thread(target=hand, args=(i,)) for i in ids]
    threads[0].start()
    assert cells.first_in.wait(10)
    for t in threads[1:]:
        t.start()
    for _ in range(1000):
        if len(conductor.batchers.build_casts._batchers["cell1"]._pending) == 3:
            break
        threading.Event().wait(0.01)
    cells.release.set()
    for t in threads:
        t.join(10)
    assert cells.messages[0] == ids[:1] and sorted(cells.messages[1]) == ids[1:]
    # Each request whose builds were in a failed message hears of it, as
    # when it cast alone (its records, handed off, are left to the sweep).
    assert sorted(raised) == ids


def test_one_leader_gathers_at_a_time_and_no_flush_is_empty():
    """``concurrent=2`` with a window: a caller arriving while the leader
    sleeps out its window joins that batch instead of leading a second,
    empty one."""
    calls = []
    lock = threading.Lock()

    def flush(items):
        with lock:
            calls.append(list(items))
        return list(items)

    b = batch.Batcher(flush, window=0.2, max_items=100, concurrent=2)
    out, threads = _run(b, ["a", "b"])
    threads[0].start()
    threading.Event().wait(0.05)  # "a" leads and sleeps out its window
    threads[1].start()
    for t in threads:
        t.join(10)
    assert calls == [["a", "b"]]
    assert out == {"a": "a", "b": "b"}


def test_many_callers_each_get_their_results_and_a_flush_wakes_only_its_own():
    """200 callers (a super conductor's request threads), small flushes,
    two at once: no caller is lost between flushes, each gets its own
    items' results, and a caller is woken about once per flush that
    finished its items or made it the next leader, never by every flush
    (one condition shared by every thread woke all of them each time)."""
    lock = threading.Lock()
    calls = []

    def flush(items):
        with lock:
            calls.append(len(items))
        threading.Event().wait(0.001)
        return [item * 2 for item in items]

    b = batch.Batcher(flush, window=0.0, max_items=7, concurrent=2)
    results = {}

    def caller(n):
        results[n] = b.submit_many([n, n + 1000])

    wakes, all_returned = callers_at_once(200, caller)
    assert all_returned, "a caller was never woken"
    assert results == {n: [2 * n, 2 * (n + 1000)] for n in range(200)}
    assert sum(calls) == 400 and max(calls) <= 7
    # Each caller waits a few times at most, whatever the number of flushes (58+).
    assert max(wakes.values()) <= 6, wakes.most_common(3)
