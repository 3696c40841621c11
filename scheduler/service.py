"""The scheduler as a service: an RPC server on topic ``scheduler``.

``select_destinations(context, request_spec)`` answers a dict, never an
exception (the caller is another process; a plain answer survives any bus):

- ``{"status": "placed", "selections": <a selections message>}``: every
  instance claimed, per instance ``[selected, *alternates]`` in the selected
  host's cell, each with its allocation request (joule.request_spec);
- ``{"status": "no_valid_host", "error": "<what each filter removed and why>"}``;
- ``{"status": "waiting", "error": ..., "wake": {family: hosts}}``: no host
  that is on fits, but sleeping ones would once woken (scheduler.waking);
  nothing was claimed, and the caller holds the request rather than fail it;
- ``{"status": "invalid", "error": ...}``: the request spec breaks the wire
  contract; nothing was claimed;
- ``{"status": "consumer_in_use" | "error", "error": ...}``: nothing of this
  request stays claimed (claims are released before answering);
- ``{"status": "expired", "error": ...}``: the call's ``deadline`` (1.3: the
  caller's clock, epoch seconds, at which it stops waiting, less a margin:
  joule.rpc) passed: a request not started by then is not started, no
  claim is written after it, and claims a request got too late are
  released (each only while it is still the one written: a retry's is
  never touched) before this is answered. The caller counts it as its own
  timeout.

Any number of workers share the topic. Requests are handled by a pool of
threads (``[DEFAULT] executor_thread_pool_size``), each with its own Scheduler (their
random number generators and statistics are per request stream). With
``[scheduler] batch_size`` > 1 the threads hand the requests they hold to one
``batcher.Batcher``: requests that arrive together share a candidate walk
and a claim (scheduler.batching); each still gets its own answer.
"""

import logging
import threading
import time

from joule import placement_client
from joule import request_spec as spec_mod
from joule import vocabulary
from joule.rpc import oslo_messaging  # imported there, quietly
from scheduler import batcher as batcher_mod
from scheduler import batching
from scheduler import claim as claim_mod
from scheduler import claim_feed
from scheduler import host_cache
from scheduler import lookups
from scheduler import metrics
from scheduler import pipeline
from scheduler import worker as worker_mod
from scheduler.errors import ConsumerInUse
from scheduler.errors import Expired
from scheduler.errors import NoValidHost
from scheduler.errors import SchedulerError
from scheduler.errors import WaitingForWake

LOG = logging.getLogger(__name__)

# The answer of a request whose caller's deadline passed (joule.rpc).
EXPIRED = "expired"
# No host that is on fits, sleeping ones would once woken (scheduler.waking).
WAITING = vocabulary.SCHEDULER_WAITING


class SchedulerEndpoint:
    # 1.1: build_outcomes (a fanout cast from the cell conductors).
    # 1.2: select_destinations_many (a super conductor's requests in one call).
    # 1.3: select_destinations(_many) take the caller's ``deadline``.
    target = oslo_messaging.Target(version="1.3")

    def __init__(self, conf, client_factory, publish_claims=None, name=None):
        """``publish_claims(sender, claims)``: a fanout cast of this
        worker's claims to the others (scheduler.claim_feed); None keeps
        them to this worker. ``name``: its RPC server name, its id on the
        claim feed (a super conductor sends a kind of request to it by
        that name: conductor.scheduler_routing)."""
        self.conf = conf
        self._client_factory = client_factory
        self._local = threading.local()
        self._all = []
        self._lock = threading.Lock()
        self.traits = lookups.KnownTraits()
        group = conf.scheduler
        self._batcher = None
        # One view per process, shared by its threads' batches (one batch
        # at a time holds an entry).
        self.host_cache = host_cache.HostCache(
            group.host_cache_seconds if group.batch_size > 1 else 0
        )
        # Only a worker that keeps walks has a view the others' claims
        # could correct, and tells them its own.
        self.claim_feed = None
        self.feed_endpoint = None
        if self.host_cache.enabled and publish_claims is not None:
            self.claim_feed = claim_feed.ClaimFeed(publish_claims, sender=name)
            self.host_cache.owner_id = self.claim_feed.sender
            self.feed_endpoint = claim_feed.FeedEndpoint(self._heard, self.scheduler_workers)
        if group.batch_size > 1:
            self._batcher = batcher_mod.Batcher(
                lambda specs, groups: self._scheduler().select_batch(specs, groups),
                group.batch_size,
                group.batch_window_ms / 1000.0,
                group.concurrent_batches,
            )

    def _scheduler(self):
        sched = getattr(self._local, "scheduler", None)
        if sched is None:
            # Traits known to exist and the kept walks are the process's.
            sched = self._local.scheduler = worker_mod.Scheduler(
                self.conf, self._client_factory(), traits=self.traits, host_cache=self.host_cache
            )
            # Its claims go to the other workers as they are sent.
            sched.claim_feed = self.claim_feed
            with self._lock:
                self._all.append(sched)
        return sched

    def races_lost(self):
        """Claims lost to concurrent writers by every thread of this endpoint."""
        with self._lock:
            return sum(s.stats["races_lost"] for s in self._all)

    def select_destinations(self, ctxt, request_spec, deadline=None):
        problem = _deadline_problem(deadline)
        if problem is not None:
            return {"status": "invalid", "error": problem}
        return self._answers([request_spec], deadline)[0]

    def select_destinations_many(self, ctxt, request_specs, deadline=None):
        """1.2: several requests in one call (a super conductor's concurrent
        requests), one answer each, in order; each answer is what
        ``select_destinations`` would have answered for that request alone.
        The requests join this worker's batches together, so a bulk call
        costs one message each way instead of one call per request."""
        problem = spec_mod.list_problem(
            "request_specs", request_specs, spec_mod.MAX_REQUESTS_PER_MESSAGE
        )
        if problem is None:
            problem = _deadline_problem(deadline)
        if problem is not None:
            LOG.warning("select_destinations_many: message refused: %s", problem)
            return {"status": "invalid", "error": problem}
        return self._answers(request_specs, deadline)

    def scheduler_workers(self):
        """The RPC server names of this worker and of the others it heard
        on the claim feed within ROUTE_PEER_SECONDS, sorted: the workers a
        super conductor sends each kind of request to
        (conductor.scheduler_routing), asked on the claims topic
        (claim_feed.FeedEndpoint); [] when it keeps no walks."""
        if self.claim_feed is None:
            return []
        return self.host_cache.live_workers(claim_feed.ROUTE_PEER_SECONDS)

    def build_outcomes(self, ctxt, failed_builds):
        """New failed-build counts of hosts, {host uuid: count} (cast by the
        cell conductors to every worker): the kept walks holding any of
        them are read again, so the BuildFailureWeigher sees the counts at
        the next batch."""
        if isinstance(failed_builds, dict) and failed_builds:
            self.host_cache.forget_hosts(set(failed_builds))

    def _heard(self, sender, claims):
        """Another worker's claims (scheduler.claim_feed), cast to every
        worker: added to the walks this one keeps. Our own are already in
        them."""
        if self.claim_feed is not None and sender == self.claim_feed.sender:
            return
        bad = claim_feed.problem(claims)
        if bad is not None:
            LOG.warning("claims_made from %s refused: %s", sender, bad)
            return
        if self.host_cache.apply_claims(claims, sender=str(sender)):
            # A worker we did not know: tell it we are here at once.
            self.claim_feed.announce()

    def stop(self):
        """Stop telling other workers our claims (the service stops)."""
        if self.claim_feed is not None:
            self.claim_feed.stop()

    def _answers(self, request_specs, deadline=None):
        start = time.perf_counter()
        sched = self._scheduler()
        lost_before = sched.stats["races_lost"]
        answers = [None] * len(request_specs)
        batched = []  # (position, spec, group) to hand to the batcher together
        try:
            for position, raw in enumerate(request_specs):
                try:
                    spec = spec_mod.load_request_spec(raw)
                except spec_mod.InvalidRequestSpec as exc:
                    answers[position] = {"status": "invalid", "error": str(exc)}
                    continue
                joins, group = self._joins_batch(sched, spec)
                if joins:
                    batched.append((position, spec, group))
                else:
                    answers[position] = self._decide(
                        sched, spec, deadline, sched.select_destinations, spec, deadline
                    )
            if batched:
                outcomes = self._batcher.submit_many(
                    [(spec, group) for _, spec, group in batched], deadline
                )
                for (position, spec, _), outcome in zip(batched, outcomes, strict=True):
                    answers[position] = self._decide(
                        sched, spec, deadline, self._resolve, sched, spec, outcome, deadline
                    )
        finally:
            metrics.RACES_LOST.inc(sched.stats["races_lost"] - lost_before)
        elapsed = time.perf_counter() - start
        for answer in answers:
            metrics.REQUESTS.labels(answer["status"]).inc()
            metrics.LATENCY.observe(elapsed)
        return answers

    @staticmethod
    def _decide(sched, spec, deadline, select, *args):
        """Run ``select(*args)`` and turn its outcome into the answer dict;
        selections made when the caller's ``deadline`` has passed are
        released (the caller gave the request up) and answered expired."""
        try:
            selections = select(*args)
        except WaitingForWake as exc:
            return {"status": WAITING, "error": str(exc), "wake": exc.wake}
        except NoValidHost as exc:
            for name, removed in ((exc.report or {}).get("removed_per_filter") or {}).items():
                metrics.NO_VALID_HOST.labels(name).inc(removed)
            return {"status": "no_valid_host", "error": str(exc)}
        except ConsumerInUse as exc:
            return {"status": "consumer_in_use", "error": str(exc)}
        except Expired as exc:
            return {"status": EXPIRED, "error": str(exc)}
        except SchedulerError as exc:
            return {"status": "error", "error": str(exc)}
        if pipeline.deadline_passed(deadline):
            return _released_late(sched, spec, selections)
        metrics.DECISIONS.inc(len(selections))
        return {
            "status": "placed",
            "selections": spec_mod.dump_selections(spec.request_id, selections),
        }

    def _joins_batch(self, sched, spec):
        """(True, its server group view or None) when ``spec`` may share a
        batch; (False, None) when it is scheduled alone."""
        if self._batcher is None or not batching.may_batch(spec):
            return False, None
        group = None
        if spec.server_group is not None:
            try:
                group = sched.load_group(spec)
            except SchedulerError:
                return False, None  # alone, it answers the same error with its report
            if not batching.batchable(spec, group):
                return False, None
        return True, group

    @staticmethod
    def _resolve(sched, spec, outcome, deadline=None):
        """The selections of a batched ``spec`` from its batch outcome."""
        kind, value = outcome
        if kind == batching.PLACED:
            return value
        if kind == batching.ERROR:
            raise value
        if kind == pipeline.EXPIRED:
            raise Expired(f"request {spec.request_id}: the caller's deadline passed while queued")
        return sched.select_destinations(spec, deadline)


def _deadline_problem(deadline):
    """Why ``deadline`` (a message's) is not one, or None."""
    if deadline is None or (
        isinstance(deadline, int | float) and not isinstance(deadline, bool) and deadline > 0
    ):
        return None
    return f"deadline must be epoch seconds (a positive number), not {deadline!r}"


def _released_late(sched, spec, selections):
    """The answer to a request placed after its caller's deadline: its
    claims released, each only while it is still the one this request
    wrote (scheduler.claim.release_own; a claim already released or made
    since by a retry is left), newest first."""
    released = 0
    for hosts in reversed(selections):
        chosen = hosts[0]
        try:
            done = claim_mod.release_own(
                sched.client, chosen.instance_uuid, chosen.allocation_request["allocations"]
            )
            released += done == claim_mod.RELEASED
        except placement_client.PlacementError as exc:
            # The conductor's sweep looks for it (conductor.abandoned).
            LOG.warning("%s: late claim not released (%s)", chosen.instance_uuid, exc)
    metrics.LATE_RELEASES.inc(released)
    LOG.warning(
        "%s: placed after the caller's deadline; %d of its %d claim(s) released "
        "(the others were released or changed since)",
        spec.request_id,
        released,
        len(selections),
    )
    return {
        "status": EXPIRED,
        "error": f"request {spec.request_id} placed after the caller's deadline; claims released",
    }
