"""Each kind of request to one scheduler worker, so that its walk is read once.

A scheduler worker keeps one candidate walk per kind of request
(scheduler.host_cache; the kind: joule.request_spec.kind_key), and at
5,000 hosts a walk is 5 pages, 3.8 MB of JSON, read by placement from
PostgreSQL, encoded, decoded and built into host states. When every worker
takes every kind off the shared topic, each worker reads every kind: in a
burst of 10,000 instances four workers read 44-47 walks where one reads
17-18, and their views of one kind race for the same best hosts
(docs/benchmarks.md, "Each kind of request to one worker"). So a super
conductor sends each kind to one worker, its owner: the live worker whose
rendezvous hash with the kind's key is highest. Workers own kinds, not hosts: every worker
still sees and may use every host, and a worker that comes or goes moves
only the kinds it wins or held. (Why this and not one active scheduler or
one plan applier: docs/decisions.md.)

Who is live comes from the workers themselves: ``scheduler_workers``,
asked of any worker every REFRESH_SECONDS on the claims topic (RPC 1.1,
served by the feed's own RPC server, so it is answered at once however
many scheduling calls the worker holds), answers the workers it heard on
the claim feed (scheduler.claim_feed), where every worker says it is
there. An ask that goes unanswered keeps the workers known before, for
STALE_SECONDS (a dead worker among them is suspected at its first silent
call). The first ask is made by the first request that needs it (the
ones arriving meanwhile wait for it, ASK_TIMEOUT at most), the
later ones in the background.

What keeps it safe:

- routing is a preference, never a condition: with fewer than two workers
  known (one worker, workers that keep no walks, workers too old to say),
  or when none answers the ask, every call goes on the shared topic as
  before;
- a call sent to one worker that does not answer within the call timeout
  is retried on the shared topic, where any worker takes it (the caller's
  releases run first, as for any retry), and that worker gets no calls
  for SUSPECT_SECONDS;
- placement stays the arbiter of every claim: two workers placing one kind
  (a super conductor that has not yet seen a worker come or go) cost at
  most a lost race, never an over-commit.
"""

import concurrent.futures
import hashlib
import logging
import threading
import time

from joule import request_spec as spec_mod
from joule import rpc

LOG = logging.getLogger(__name__)

# How often the live workers are asked for again.
REFRESH_SECONDS = 5.0
# How long one ask waits for a worker's answer (at most the call timeout).
ASK_TIMEOUT = 2.0
# How long the requests that arrive during the first ask wait for it, beyond
# the ask's own timeout.
FIRST_WAIT_MARGIN = 0.5
# A worker that let a call sent to it time out gets no calls for this long
# (it may be gone: the claim feed says so within ROUTE_PEER_SECONDS).
SUSPECT_SECONDS = 30.0
# Workers known from the last answered ask are used for this long while
# later asks go unanswered.
STALE_SECONDS = 30.0
# Calls of one flush sent to their workers at once (one per worker among
# the flush's requests), beyond the one its own thread makes.
PARALLEL_CALLS = 16


class Router:
    """The owner of each kind of request among the live scheduler workers.

    ``api()`` returns the scheduler's bus client (looked up at each ask:
    the simulator and tests put direct calls in its place); one without
    ``scheduler_workers`` is never routed to. ``ask_timeout``: the call
    timeout (an ask waits ASK_TIMEOUT at most)."""

    def __init__(self, api, clock=time.monotonic, ask_timeout=ASK_TIMEOUT):
        self._api = api
        self._clock = clock
        self._ask_timeout = min(ASK_TIMEOUT, ask_timeout)
        self._lock = threading.Lock()
        self._members = ()
        self._asked = None  # clock() of the last ask begun (None: never)
        self._answered = None  # clock() of the last answered ask
        self._asking = False
        self._first = threading.Event()
        self._suspects = {}  # worker -> clock() until which it gets no calls
        self._owners = {}  # kind key -> owner, for the members as they are
        self._said = None  # the last state logged, so each change is said once
        self._pool = None  # the threads of the calls to several workers (run)

    def owner(self, dumped):
        """The worker to send ``dumped`` (a spec in its wire form) to, or
        None for the shared topic."""
        return self._owner_among(self._live(), dumped)

    def split(self, dumped_specs):
        """{worker or None: [positions of the specs it owns]}, in order
        (the live workers read once for all of them)."""
        members = self._live()
        groups = {}
        for position, dumped in enumerate(dumped_specs):
            groups.setdefault(self._owner_among(members, dumped), []).append(position)
        return groups

    def _owner_among(self, members, dumped):
        if len(members) < 2:
            return None
        key = spec_mod.kind_key(dumped)
        with self._lock:
            found = self._owners.get(key)
            if found is None or found not in members:
                found = max(members, key=lambda w: _score(w, key))
                self._owners[key] = found
        return found

    def run(self, fn, *args):
        """``fn(*args)`` in one of the router's threads (a Future): the
        calls of one flush to several workers go out at once."""
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    PARALLEL_CALLS, thread_name_prefix="scheduler-call"
                )
        return self._pool.submit(fn, *args)

    def suspect(self, worker):
        """``worker`` let a call time out: no calls to it for SUSPECT_SECONDS."""
        with self._lock:
            self._suspects[worker] = self._clock() + SUSPECT_SECONDS
            self._owners.clear()
        LOG.warning(
            "scheduler worker %s did not answer a call sent to it: its kinds of request "
            "go to the others for %g s",
            worker,
            SUSPECT_SECONDS,
        )

    def members(self):
        """The workers calls are routed to now (for tests and operators)."""
        return self._live()

    def _live(self):
        now = self._clock()
        with self._lock:
            first = self._asked is None
            due = not self._asking and (first or now - self._asked >= REFRESH_SECONDS)
            if due:
                self._asking = True
                self._asked = now
        if due and first:
            self._ask()
        elif due:
            threading.Thread(target=self._ask, name="scheduler-routing", daemon=True).start()
        elif not self._first.is_set():
            self._first.wait(self._ask_timeout + FIRST_WAIT_MARGIN)
        with self._lock:
            for worker, until in list(self._suspects.items()):
                if until <= now:
                    del self._suspects[worker]
            return tuple(w for w in self._members if w not in self._suspects)

    def _ask(self):
        members, state, answered = (), None, True
        try:
            ask = getattr(self._api(), "scheduler_workers", None)
            if ask is not None:  # else direct calls (the simulator's): one scheduler
                members = tuple(ask(self._ask_timeout))
        except rpc.Unanswered:
            # Also workers that keep no walks: they serve no claims topic.
            state, answered = "no scheduler worker answered which workers are live", False
        except rpc.SchedulerAnswerError as exc:
            state = f"the scheduler workers cannot say which of them are live ({exc})"
        except Exception as exc:  # noqa: BLE001 - routing is a preference: never fail a request
            state, answered = f"asking which scheduler workers are live failed: {exc}", False
        now = self._clock()
        with self._lock:
            if answered:
                self._answered = now
            elif self._answered is not None and now - self._answered < STALE_SECONDS:
                members = self._members  # keep those known for a while
            if state is None:
                state = "routed" if len(members) > 1 else None
            if members != self._members:
                self._owners.clear()
            self._members = members
            self._asking = False
            said, self._said = self._said, state
        self._first.set()
        if state == said:
            return
        if state == "routed":
            LOG.info("each kind of request goes to one of %d scheduler workers", len(members))
        elif state is not None and members:
            LOG.info("%s: routing to the %d workers known before", state, len(members))
        elif state is not None:
            LOG.info("%s: requests go to any worker on the shared topic", state)


def _score(worker, key):
    # Stable across processes (str hashes are salted per process).
    return hashlib.blake2b(f"{worker}/{key}".encode(), digest_size=8).digest()
