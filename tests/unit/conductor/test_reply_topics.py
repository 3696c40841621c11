"""What a conductor keeps per submitter's reply topic is bounded, and a
submitter takes only what a conductor could have sent.

Every build-submit run has a reply topic of its own: the conductor's outcome
batcher of a topic is forgotten once the topic is idle (and the least
recently used beyond a count), made again if it comes back (its RPC client
likewise: test_outcome_clients.py). A submitter ignores an oversized or
malformed outcome message, with its reason logged, and goes on.
"""

import json
import logging
import queue
import threading
import time

import pytest

from conductor import batch
from conductor import conf as cconf
from conductor import submit
from joule import idle_cache
from joule import request_spec as spec_mod
from joule import rpc

# What a conductor may keep at most (conductor.batch, joule.rpc defaults).
BOUND = 1024


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _echo(key, items):
    return [f"{key}:{i}" for i in items]


# --- the cache ------------------------------------------------------------------


def test_idle_cache_forgets_the_idle_and_the_least_recently_used():
    clock, made, forgotten = _Clock(), [], []
    cache = idle_cache.IdleCache(
        lambda k: made.append(k) or k.upper(),
        max_entries=3,
        idle_seconds=60,
        forgotten=lambda k, v: forgotten.append(k),
        clock=clock,
    )
    for key in ("a", "b", "c"):
        assert cache.get(key) == key.upper()
    clock.now += 10
    cache.get("a")  # a is the most recently used now
    cache.get("d")  # one too many: b, the least recently used, goes
    assert forgotten == ["b"] and "b" not in cache and len(cache) == 3
    clock.now += 55  # c idle 65 s goes; a and d, 55 s, stay
    assert cache.prune() == 1 and forgotten == ["b", "c"]
    clock.now += 60
    cache.get("b")  # made again; a and d were idle
    assert made == ["a", "b", "c", "d", "b"]
    assert sorted(forgotten) == ["a", "b", "c", "d"] and len(cache) == 1


def test_idle_cache_keeps_what_is_busy_and_what_was_just_asked_for():
    clock = _Clock()
    busy = {"a"}
    cache = idle_cache.IdleCache(str.upper, 1, 60, busy=busy.__contains__, clock=clock)
    cache.get("a")
    cache.get("b")  # over the count, but a is busy and b was just asked for
    assert len(cache) == 2
    clock.now += 100
    assert cache.prune() == 1 and "a" in cache  # b went, idle
    busy.clear()
    assert cache.prune() == 1 and len(cache) == 0
    with pytest.raises(ValueError):
        idle_cache.IdleCache(str.upper, 0, 60)


# --- the conductor's batchers per reply topic -------------------------------------


def test_batchers_of_finished_runs_do_not_pile_up():
    b = batch.Batchers(_echo, window=0.0, max_items=10)
    for run in range(3 * BOUND):
        assert b.submit(f"build-submit.{run:032x}", 1) == f"build-submit.{run:032x}:1"
    assert len(b._batchers) <= BOUND
    assert b.flushes == 3 * BOUND  # the forgotten ones' flushes still count


def test_a_batcher_idle_for_a_while_is_forgotten_and_made_again_when_needed():
    clock = _Clock()
    b = batch.Batchers(_echo, 0.0, 10, max_keys=100, idle_seconds=300, clock=clock)
    b.submit("t1", 1)
    b.submit("t2", 1)
    clock.now += 200
    b.submit("t2", 2)
    clock.now += 150  # t1 idle 350 s, t2 150 s
    assert b.keys() == 1
    assert b.submit("t1", 3) == "t1:3"  # back: a new batcher
    assert b.keys() == 2 and b.flushes == 4


def test_a_batcher_in_use_is_not_forgotten():
    clock, gate, started = _Clock(), threading.Event(), threading.Event()

    def flush(key, items):
        if key == "slow":
            started.set()
            assert gate.wait(10)
        return _echo(key, items)

    b = batch.Batchers(flush, 0.0, 10, max_keys=1, idle_seconds=1, clock=clock)
    out = []
    slow = threading.Thread(target=lambda: out.append(b.submit("slow", 0)))
    slow.start()
    assert started.wait(10)
    slow_batcher = b._batchers["slow"]
    clock.now += 100  # long past idle, and one key over the count
    for n in range(5):
        assert b.submit(f"other{n}", n) == f"other{n}:{n}"
    assert b._batchers["slow"] is slow_batcher  # its caller is still in it
    gate.set()
    slow.join(10)
    assert out == ["slow:0"]
    clock.now += 100
    assert b.keys() == 0


def _transport():
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    return conf, rpc.transport_of(conf)


# --- the submitter's side ---------------------------------------------------------


def _outcome(instance, request_id="req-0"):
    return spec_mod.dump_build_result(
        spec_mod.BuildResult(instance, request_id, "standard", "failed", reason="no host")
    )


def _drained(inbox):
    out = []
    while not inbox.empty():
        out.append(inbox.get_nowait())
    return out


def test_an_oversized_instances_done_is_ignored_with_its_reason(caplog):
    inbox = queue.Queue()
    endpoint = submit._OutcomeEndpoint(inbox)
    limit = spec_mod.MAX_BUILDS_PER_MESSAGE
    instance = "3f0c5a8e-8f7e-4a37-9d43-0a3a2f6f5b11"
    with caplog.at_level(logging.WARNING, logger="build-submit"):
        endpoint.instances_done({}, [_outcome(instance)] * (limit + 1))
        endpoint.instances_done({}, {"not": "a list"})
    assert _drained(inbox) == []
    assert f"at most {limit} entries per message, got {limit + 1}" in caplog.text
    assert "outcomes must be a list, got dict" in caplog.text
    endpoint.instances_done({}, [_outcome(instance)] * 2)  # within bounds: taken
    assert len(_drained(inbox)) == 2


def test_a_malformed_refusal_is_ignored_or_made_text(caplog):
    inbox = queue.Queue()
    endpoint = submit._OutcomeEndpoint(inbox)
    with caplog.at_level(logging.WARNING, logger="build-submit"):
        endpoint.request_refused({}, ["req-1"], "junk")
        endpoint.request_refused({}, "x" * 65, "junk")
    assert _drained(inbox) == []
    assert caplog.text.count("request_refused ignored") == 2
    endpoint.request_refused({}, "req-1", {"not": "text"})
    endpoint.request_refused({}, "req-2", "e" * 10000)
    assert _drained(inbox) == [
        ("refused", {"request_id": "req-1", "error": "(a dict, not a message)"}),
        ("refused", {"request_id": "req-2", "error": "e" * submit.REFUSAL_ERROR_MAX}),
    ]


class _NoRecords:
    def all_pages(self, route, key, params=None):
        return []


class _Conductors:
    """Conductors that answer every request: first with messages no
    conductor sends, then (once those are in) with each instance's outcome."""

    def __init__(self, outcomes):
        self.outcomes = outcomes

    def build_instances(self, wire, reply_topic):
        send = self.outcomes
        send.request_refused(reply_topic, ["not", "an", "id"], "junk")
        send.instances_done(reply_topic, ["junk", {"version": "9.0"}, 7])
        time.sleep(0.5)  # the bus delivers in any order: the junk first
        for instance in wire["instance_uuids"]:
            send.instance_done(reply_topic, _outcome(instance, wire["request_id"]))


def test_malformed_outcome_messages_do_not_fail_the_run(caplog):
    conf, transport = _transport()
    sub = submit.Submitter(conf, transport, _NoRecords(), lambda line: None)
    sub.conductors = _Conductors(rpc.OutcomeAPI(transport))
    line = {
        "version": "1.0",
        "request_id": "req-0",
        "project_id": "p",
        "user_id": "u",
        "num_instances": 2,
        "resources": {"VCPU": 1},
    }
    requests = sub.parse([json.dumps(line)])
    with caplog.at_level(logging.WARNING, logger="build-submit"):
        counts = sub.run(requests, timeout=20, poll_interval=0.2)
    assert "request_refused ignored: request_id ['not', 'an', 'id']" in caplog.text
    assert caplog.text.count("outcome ignored") == 3
    assert counts["failed"] == 2 and counts["unanswered"] == 0, counts
