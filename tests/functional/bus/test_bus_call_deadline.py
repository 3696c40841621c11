"""A scheduler call slower than ``[rpc] call_timeout`` leaves no claim on the
instance its conductor failed (issue 23, finding 2).

The super conductor sends each try of a scheduler call with its deadline
(scheduler RPC 1.3); a scheduler drops a request whose deadline passed,
writes no claim after it, and releases the claims it got too late before it
answers ``expired``. What the deadline cannot close (a scheduler whose clock
is behind by more than the margin) the conductor's sweep releases: a claim
on an instance it failed because no scheduler answered in time.

In-process services over oslo.messaging's in-memory transport, placement
over REST on both databases (tests/bus.py).
"""

import threading
import time

import pytest

from joule import request_spec as spec_mod
from scheduler import conf as sconf
from scheduler import service as sched_service
from tests import bus

CALL_TIMEOUT = 2  # seconds: [rpc] call_timeout of these tests
SLOW = 3.5  # seconds a slow placement takes to answer a claim


class _SlowClaims:
    """A placement client whose claim writes answer after ``delay`` seconds
    (the write lands, then the answer is slow: placement stalled)."""

    def __init__(self, client, delay):
        self._client = client
        self.delay = delay

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_allocations(self, consumer, allocation_request, *args, **kwargs):
        if allocation_request.get("allocations"):  # a claim, not a release
            time.sleep(self.delay)
        return self._client.put_allocations(consumer, allocation_request, *args, **kwargs)

    def post_allocations(self, claims):
        time.sleep(self.delay)
        return self._client.post_allocations(claims)


class _Watched:
    """Wraps a scheduler endpoint: counts the calls that returned, and
    (``skew``) shifts the deadline they carry, as a scheduler whose clock is
    that many seconds behind the conductor's would read it."""

    def __init__(self, endpoint, skew=0.0):
        self.endpoint = endpoint
        self.target = endpoint.target
        self.skew = skew
        self.finished = threading.Semaphore(0)
        self.answers = []

    def _shifted(self, kwargs):
        if self.skew and kwargs.get("deadline") is not None:
            kwargs["deadline"] += self.skew
        return kwargs

    def select_destinations(self, ctxt, **kwargs):
        try:
            answer = self.endpoint.select_destinations(ctxt, **self._shifted(kwargs))
            self.answers.append(answer)
            return answer
        finally:
            self.finished.release()

    def select_destinations_many(self, ctxt, **kwargs):
        try:
            answer = self.endpoint.select_destinations_many(ctxt, **self._shifted(kwargs))
            self.answers.extend(answer if isinstance(answer, list) else [answer])
            return answer
        finally:
            self.finished.release()

    def build_outcomes(self, ctxt, **kwargs):
        return self.endpoint.build_outcomes(ctxt, **kwargs)


def _conf(live_server, batch_size):
    return bus.make_conf(
        live_server.url,
        {
            ("rpc", "call_timeout"): CALL_TIMEOUT,
            ("rpc", "call_retries"): 0,
            ("scheduler", "batch_size"): batch_size,
            ("conductor", "sweep_interval"): 0.3,
        },
    )


def _slow_endpoint(conf, delay=SLOW):
    return sched_service.SchedulerEndpoint(
        conf, lambda: _SlowClaims(sconf.placement_client_of(conf), delay)
    )


def _submit_and_wait(cloud, watched, requests):
    counts, lines = cloud.submit(bus.spec_lines(requests), timeout=60)
    # Every request was answered (failed: its call timed out) ...
    assert counts["failed"] == requests and counts["unanswered"] == 0, counts
    # ... while the scheduler still worked on it: wait until it finished.
    assert watched.finished.acquire(timeout=30), "the scheduler never finished"
    return [line for line in lines if line.get("status") in ("placed", "failed")]


def _holding(db):
    allocs, records, _over = bus.ledger(db)
    return {i: allocs[i] for i in allocs if records[i].status == "failed"}


@pytest.mark.parametrize("batch_size", [1, 8], ids=["alone", "batched"])
def test_a_scheduler_slower_than_the_call_leaves_no_claim_on_the_failed_instance(
    live_server, db, batch_size
):
    bus.load_cluster(db, nodes=4, cores=8, cells=1)
    conf = _conf(live_server, batch_size)
    watched = _Watched(_slow_endpoint(conf))
    with bus.running(conf, cells=("cell1",), scheduler=watched) as cloud:
        done = _submit_and_wait(cloud, watched, 1)
        assert all(line["status"] == "failed" for line in done), done
        # The claim landed after the conductor gave up; the scheduler, past
        # the call's deadline, released it before answering.
        assert _holding(db) == {}
        assert [a["status"] for a in watched.answers] == ["expired"]
        bus.check_invariants(db, done, dict(cloud.driver._running))


def test_the_sweep_releases_a_late_claim_the_deadline_missed(live_server, db):
    """A scheduler whose clock is 60 s behind takes the deadline for far
    off: it answers placed, too late. The conductor's sweep finds the claim
    on the instance it failed and releases it."""
    bus.load_cluster(db, nodes=4, cores=8, cells=1)
    conf = _conf(live_server, 1)
    watched = _Watched(_slow_endpoint(conf), skew=60.0)
    with bus.running(conf, cells=("cell1",), scheduler=watched) as cloud:
        done = _submit_and_wait(cloud, watched, 1)
        assert [a["status"] for a in watched.answers] == ["placed"]
        give_up = time.monotonic() + 10
        while _holding(db) and time.monotonic() < give_up:
            time.sleep(0.2)
        assert _holding(db) == {}, "the late claim of a failed instance stayed"
        bus.check_invariants(db, done, dict(cloud.driver._running))


def _spec(n=0):
    return {
        "version": "1.0",
        "request_id": f"deadline-{n}",
        "project_id": "p",
        "user_id": "u",
        "resources": {"VCPU": 1, "MEMORY_MB": 256},
        "instance_uuids": [f"00000000-0000-4000-8000-{n:012d}"],
    }


@pytest.mark.parametrize("batch_size", [1, 8], ids=["alone", "batched"])
def test_an_expired_request_is_answered_expired_with_nothing_claimed(live_server, db, batch_size):
    bus.load_cluster(db, nodes=4, cores=8, cells=1)
    conf = _conf(live_server, batch_size)
    endpoint = sched_service.SchedulerEndpoint(conf, lambda: sconf.placement_client_of(conf))
    past = time.time() - 1
    one = endpoint.select_destinations({}, request_spec=_spec(0), deadline=past)
    many = endpoint.select_destinations_many({}, request_specs=[_spec(1), _spec(2)], deadline=past)
    assert one["status"] == "expired"
    assert [a["status"] for a in many] == ["expired", "expired"]
    allocs, _records, _over = bus.ledger(db)
    assert allocs == {}
    # With time left, the same request is placed (the deadline is the only difference).
    placed = endpoint.select_destinations({}, request_spec=_spec(3), deadline=time.time() + 30)
    assert placed["status"] == "placed"
    chosen = spec_mod.load_selections(placed["selections"]).selections[0][0]
    assert set(bus.ledger(db)[0]) == {chosen.instance_uuid}


def test_a_deadline_passing_while_placement_is_slow_claims_nothing_after_it(live_server, db):
    """The deadline passes during the walk (a slow placement): the claim
    that would follow is never written."""
    bus.load_cluster(db, nodes=4, cores=8, cells=1)
    conf = _conf(live_server, 1)

    class _SlowWalk(_SlowClaims):
        def candidate_pages(self, *args, **kwargs):
            time.sleep(self.delay)
            return self._client.candidate_pages(*args, **kwargs)

    endpoint = sched_service.SchedulerEndpoint(
        conf, lambda: _SlowWalk(sconf.placement_client_of(conf), 1.0)
    )
    answer = endpoint.select_destinations({}, request_spec=_spec(4), deadline=time.time() + 0.5)
    assert answer["status"] == "expired", answer
    assert bus.ledger(db)[0] == {}
