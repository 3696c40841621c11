"""Candidate walks kept between batches: a worker's assumed view of the cluster.

A batch walks the candidate pages once for its requests (scheduler.batching).
Under a steady stream of requests the next batch of the same kind would read
the same pages again a few milliseconds later: at 5,000 hosts that walk, not
the decision, is most of what an instance costs (placement's candidate query
and the JSON of a thousand hosts each way). So a worker keeps each kind's
walk, with the capacity its own claims consumed already subtracted (the
assumed usage of Kubernetes' scheduler cache), and the next batch of that
kind places on it without reading placement at all.

A kept walk reads every page (``max_placement_results`` does not cap it):
it is paid once per kind per ``host_cache_seconds``, and every batch placed
on it ranks the whole cluster. A capped window kept for seconds would let
each worker fill its own part of the id space meanwhile (measured through
the bus on 5,000 identical hosts: 1,727 distinct hosts for 2,000 instances
and 30 % of them on one fifth of the hosts).

What keeps it honest:

- placement stays the arbiter: every claim is checked there, so a stale view
  costs a lost race (409, then the request is scheduled alone on a fresh
  walk), never an over-commit;
- an entry lives ``[scheduler] host_cache_seconds`` at most, so what other
  workers claimed and what was freed, and a host's traits (a node the power
  controller moved to eco leaves a performance walk at the next refresh),
  are seen within that time;
- an entry is dropped after any batch that lost a race or could not claim
  everything it planned, so the next batch reads afresh exactly when the view
  proved wrong;
- an entry is reused only by requests that ask for at least the amounts it
  was walked for (class by class): a host with room for them was in the walk.
  A new walk asks for the smallest amounts this worker has seen for the
  kind, so one walk soon serves every batch of it;
- one batch at a time holds a kind (``take`` to ``put``): two batches never
  plan on the same host states at once, and a batch of a kind another batch
  is walking or placing waits for it rather than read the same pages too;
- a request the cached view cannot place is scheduled alone, on a fresh walk
  of every page it needs, so the cache never turns a request that fits into
  NoValidHost;
- a kept walk is read again before it runs out, in the background
  (``refresh_due``, ``refreshed``): the batch that takes one past
  REFRESH_AT of its life places on it as usual and starts a walk of the
  kind beside it, which replaces it once read (the old one serves up to
  REFRESH_GRACE of its life meanwhile: what was freed is then seen within
  that, not within ``host_cache_seconds``). Batches of a kind waited for
  each walk of it (one batch holds a kind), so under a steady stream every
  walk, every ``host_cache_seconds``, stalled the kind for the walk's whole
  time (at 100 requests a second, the slowest requests came in clusters
  about 10 s apart: docs/benchmarks.md, issue 27's sixth pass). Every claim
  applied while the new walk is read is added to it when it is done (those
  its pages already showed are then counted twice, until the next walk:
  a host looks fuller than it is, never emptier), and what arrives after
  that goes to it as to any kept walk.

0 seconds turns it off (every batch walks), which is what a simulated clock
needs: there the wall clock says nothing about the cluster's time.
"""

import dataclasses
import hashlib
import threading
import time

from scheduler import metrics

# A new walk that finds at least this share of its hosts holding more than
# this worker's view of them says other workers claim on the same hosts: it
# is kept for SHARED_FACTOR of host_cache_seconds only (see HostCache._life).
FOREIGN_SHARE = 0.01
SHARED_FACTOR = 0.25

# Another worker counts as live (``workers``) this long after its last
# claims arrived.
PEER_SECONDS = 60.0

# A kept walk taken by a batch when it is older than this share of its life
# is read again in the background (HostCache.refresh_due), and while that
# walk is being read the old one serves up to REFRESH_GRACE of its life: so
# under a steady stream no batch waits for a walk of its kind, and a kind
# is read about as often as without it (at 0.75, 50 walks against 37 in
# two minutes of a steady load: the extra walks cost what the waits saved).
REFRESH_AT = 0.9
REFRESH_GRACE = 1.5

# How long a batch waits for a concurrent batch of its kind to hand the walk
# back before walking on its own (a batch places and claims in well under
# this; a placement stall must not hold every batch of a kind).
WAIT_SECONDS = 5.0


@dataclasses.dataclass
class Entry:
    """One kind's walk and what was derived from it."""

    walk: object  # scheduler.walk.CandidateWalk, its hosts with assumed usage
    ranker: object  # scheduler.ranking.Ranker over walk.passed
    walk_data: dict  # the walk's report fields, copied into each member's report
    resources: dict  # the amounts the walk asked for, per resource class
    born: float  # clock() when walked
    batches: int = 0  # batches placed on it after the first
    # It showed claims nobody told this worker of (HostCache.shows_foreign):
    # kept a quarter as long.
    shared: bool = False


def _in_a_thread(work):
    threading.Thread(target=work, name="walk-refresh", daemon=True).start()


class HostCache:
    """``background(work)`` runs a walk read again (``refresh_due``) beside
    the batches: in a thread of its own unless told otherwise (tests)."""

    def __init__(self, seconds, clock=time.monotonic, background=_in_a_thread):
        self.seconds = seconds
        self.clock = clock
        self.background = background
        self._entries = {}
        self._floors = {}  # key -> the smallest amounts walked for, per class
        self._previous = {}  # key -> the walk a new walk replaces
        self._stale = set()  # held keys whose walk must not be kept
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._held = {}  # key -> the thread whose batch holds it
        # Other workers' claims received while a batch holds the key
        # (scheduler.claim_feed), added to its walk when it is put back.
        self._foreign = {}
        self._peers = {}  # other workers heard on the claim feed -> when
        # This worker's id on the claim feed (its sender), once it has one.
        self.owner_id = None
        self._share = None  # (the workers it was computed for, Share)
        # Background walks (refresh_due): key -> (token, the claims applied
        # since the walk began), while one runs; and key -> the new walk,
        # read while a batch held the key, installed when it is put back.
        self._refreshing = {}
        self._refreshed = {}
        self.stats = {
            "hits": 0,
            "misses": 0,
            "dropped": 0,
            "foreign_claims": 0,
            "refreshes": 0,
        }

    @property
    def enabled(self):
        return self.seconds > 0

    def take(self, key, resources):
        """The entry for ``key`` if it is fresh and was walked for at most
        ``resources``, else None (the caller walks). Either way the caller
        holds ``key`` until ``put``: a concurrent batch of the same kind
        waits here (at most ``WAIT_SECONDS``) rather than walk it again."""
        if not self.enabled:
            return None
        with self._cond:
            deadline = time.monotonic() + WAIT_SECONDS
            while key in self._held:
                left = deadline - time.monotonic()
                if left <= 0:
                    # Stuck behind a slow batch: walk on our own, unheld.
                    self.stats["misses"] += 1
                    return None
                self._cond.wait(left)
            self._held[key] = threading.get_ident()
            entry = self._entries.pop(key, None)
            if entry is not None and self.usable(entry, resources, key):
                self.stats["hits"] += 1
                entry.batches += 1
                return entry
            if entry is not None:
                self._previous[key] = entry  # what the next walk is compared with
            self.stats["misses"] += 1
            return None

    def walk_amounts(self, key, resources):
        """The amounts a new walk of ``key`` asks for: the smallest of each
        class this worker has walked that kind for, so the walk also serves
        the later batches that ask for less than this one (a walk for more
        would leave out hosts with room for them, and be walked again)."""
        if not self.enabled:
            return dict(resources)
        with self._lock:
            floor = self._floors.get(key)
            if floor is None or set(floor) != set(resources):
                floor = dict(resources)
            else:
                floor = {rc: min(floor[rc], amount) for rc, amount in resources.items()}
            self._floors[key] = floor
            return dict(floor)

    def _expired(self, entry, key=None):
        """Past its life; or, while a walk of its kind ``key`` is being read
        again, past REFRESH_GRACE of it (under the lock)."""
        life = self._life(entry)
        if key is not None and key in self._refreshing:
            life *= REFRESH_GRACE
        return self.clock() - entry.born >= life

    def _life(self, entry):
        """How long ``entry`` is kept, judged now rather than when it was
        walked (under the lock):

        - a quarter of ``seconds`` when it showed claims this worker never
          heard of (``shows_foreign``);
        - otherwise ``seconds`` times the live workers: the others' claims
          reach this view on the feed, so what only a walk shows is what
          was freed and what changed on the nodes, and the workers together
          read each kind as often as one worker alone does. Without that,
          every worker read every kind every ``seconds``: at 5,000 hosts a
          walk is about half a second of CPU over placement, PostgreSQL and
          the worker, and 4 workers fed each other's claims still spent
          1.56 times one worker's CPU per instance (3,000 instances at
          5,000 hosts, 17.6 against 11.3 ms).

        Judged now because a worker's first walks come before it has heard
        any other worker: kept for ``seconds`` alone, four workers read
        every kind again after 10 s, 47 walks in a 45 s burst against one
        worker's 16 (issue 27).
        """
        if entry.shared:
            return self.seconds * SHARED_FACTOR
        return self.seconds * self._workers()

    def usable(self, entry, resources, key=None):
        if self._expired(entry, key):
            return False
        if set(entry.resources) != set(resources):
            return False
        return all(entry.resources[rc] <= amount for rc, amount in resources.items())

    def put(self, key, entry, keep=True):
        """Release ``key`` after a batch, with its walk (or None); ``keep``
        False drops the walk (the view proved stale). A fresher walk of the
        same kind put meanwhile (by a batch that gave up waiting) wins."""
        if not self.enabled:
            return
        with self._cond:
            if self._held.get(key) == threading.get_ident():
                del self._held[key]
            foreign = self._foreign.pop(key, ())
            stale = key in self._stale
            self._stale.discard(key)
            self._cond.notify_all()
            refreshed = self._refreshed.pop(key, None)
            if refreshed is not None:
                # Read while the batch placed: newer than its walk, and every
                # claim since (the batch's own included) was added to it.
                entry, keep, stale = refreshed, True, False
                foreign = ()
            if entry is None:
                return
            if not keep or stale or self._expired(entry, key):
                self.stats["dropped"] += 1
                return
            current = self._entries.get(key)
            if current is None or current.born <= entry.born:
                _add_claims(entry, foreign, rank=True)
                self._entries[key] = entry

    def apply_claims(self, claims, sender=None, skip=None):
        """Claims, [[host uuid, {provider: {class: amount}}]], added to the
        hosts of every kept walk, and of the walks a new walk will be
        compared with (``life``), so both show what placement holds; a walk
        a batch holds now gets them when it is put back. ``sender``: the
        other worker that made them (scheduler.claim_feed), None for this
        worker's own; ``skip``: the kind whose walk already holds them
        (the batch that planned them). Returns whether ``sender`` was heard
        for the first time (or again after it was taken to be gone)."""
        if not self.enabled:
            return False
        new = False
        if sender is not None:
            with self._lock:
                # An empty message is a worker saying it is there.
                new = sender not in self._live_peers()
                self._peers[sender] = self.clock()
        if not claims:
            return new
        if sender is not None:
            metrics.CLAIMS_FED.labels("received").inc(len(claims))
        with self._lock:
            if sender is not None:
                self.stats["foreign_claims"] += len(claims)
            for key, entry in self._entries.items():
                if key != skip:
                    _add_claims(entry, claims, rank=True)
            for key, entry in self._previous.items():
                if key != skip:
                    _add_claims(entry, claims, rank=False)
            for key in self._held:
                if key != skip:
                    self._foreign.setdefault(key, []).extend(claims)
            # A walk being read again, or read and waiting for its kind to be
            # put back, holds none of them, its own kind's included.
            for _token, log in self._refreshing.values():
                log.extend(claims)
            for entry in self._refreshed.values():
                _add_claims(entry, claims, rank=True)
        return new

    def workers(self):
        """This worker and the others heard from on the claim feed within
        PEER_SECONDS: the workers that read walks of the same cluster."""
        with self._lock:
            return self._workers()

    def _workers(self):
        return 1 + len(self._live_peers())  # under the lock

    def live_workers(self, within):
        """The ids of this worker and of the others heard on the claim
        feed within ``within`` seconds, sorted: the workers a super
        conductor may send requests to (``scheduler_workers``)."""
        with self._lock:
            now = self.clock()
            peers = [s for s, heard in self._live_peers().items() if now - heard <= within]
            return sorted([self.owner_id, *peers]) if self.owner_id is not None else []

    def _live_peers(self):
        now = self.clock()
        for sender, heard in list(self._peers.items()):
            if now - heard > PEER_SECONDS:
                del self._peers[sender]
        return self._peers

    def preference(self):
        """Which hosts this worker prefers among equally good ones (a
        ``Share``), or None while it knows of no other worker."""
        with self._lock:
            peers = self._live_peers()
            if not peers or self.owner_id is None:
                return None
            members = tuple(sorted([self.owner_id, *peers]))
            if self._share is None or self._share[0] != members:
                self._share = (members, Share(self.owner_id, members))
            return self._share[1]

    def forget_hosts(self, uuids):
        """Drop the kept walks holding any host of ``uuids`` (its node data,
        such as the failed-build count, changed), and those a batch holds
        now, which ``put`` then drops."""
        if not self.enabled:
            return
        with self._lock:
            for key, entry in list(self._entries.items()):
                if any(uuid in entry.ranker.index for uuid in uuids):
                    del self._entries[key]
                    self.stats["dropped"] += 1
            self._stale.update(self._held)
            # A walk read (or being read) before the change is as stale.
            self._refreshing.clear()
            self._refreshed.clear()

    def shows_foreign(self, key, hosts):
        """Whether a new walk of ``key`` (its ``hosts``) shows claims this
        worker never heard of: at least FOREIGN_SHARE of the hosts took
        more than its previous view of them (other workers without the
        claim feed, or claims the feed lost). Such a walk is kept a quarter
        of ``seconds`` (``_life``): independent views of concurrent workers
        pick the same hosts more the longer they are kept (on 5,000
        identical hosts, 4 workers and 2,000 instances reached 1,879
        distinct hosts with 10 s views and 1,955 with 3 s ones)."""
        with self._lock:
            old = self._previous.pop(key, None)
        return self.foreign_in(old, hosts)

    def foreign_in(self, old, hosts):
        """``shows_foreign`` against the kept walk ``old`` (None: nothing to
        compare with, so no)."""
        shared = False
        if old is not None and hosts:
            before = {h.uuid: h for h in old.walk.passed}
            foreign = 0
            for host in hosts:
                seen = before.get(host.uuid)
                if seen is not None and _took_more(host, seen):
                    foreign += 1
            shared = foreign >= FOREIGN_SHARE * len(hosts)
        if shared:
            self.stats["shared"] = self.stats.get("shared", 0) + 1
        metrics.KEPT_WALKS.labels("shared" if shared else "full").inc()
        return shared

    def refresh_due(self, key, entry):
        """A token when the batch that took ``entry`` (the kept walk of
        ``key``) is to start reading the kind again in the background: it is
        past REFRESH_AT of its life and no walk of the kind is being read
        again or waiting to be put in. The caller must then call
        ``refreshed`` with the token, whatever happens; None otherwise."""
        if not self.enabled:
            return None
        with self._lock:
            if key in self._refreshing or key in self._refreshed:
                return None
            if self.clock() - entry.born < REFRESH_AT * self._life(entry):
                return None
            token = object()
            self._refreshing[key] = (token, [])
            self.stats["refreshes"] += 1
            return token

    def refreshed(self, key, token, entry):
        """The walk ``refresh_due`` started is done: ``entry`` (None when it
        failed). It gets every claim applied meanwhile, then replaces the
        kind's kept walk, at once, or when the batch holding the kind puts
        it back. A walk whose hosts changed meanwhile (``forget_hosts``) is
        dropped."""
        with self._cond:
            started = self._refreshing.get(key)
            if started is None or started[0] is not token:
                return
            del self._refreshing[key]
            if entry is None:
                return
            _add_claims(entry, started[1], rank=True)
            if key in self._held:
                self._refreshed[key] = entry
                return
            current = self._entries.get(key)
            if current is None or current.born <= entry.born:
                self._entries[key] = entry

    def life(self, entry):
        """How long ``entry`` is kept, as things stand now (``_life``)."""
        with self._lock:
            return self._life(entry)


class Share:
    """The hosts one worker prefers among hosts of equal weight: those
    whose rendezvous hash over the live workers names it (each host names
    exactly one worker, and a worker that comes or goes moves only the
    hosts it wins or held). Workers that draw among the same tied hosts
    then draw from disjoint shares, so they do not race for one of them;
    a worker whose share has no usable host left draws from all of them
    (scheduler.ranking, scheduler.picking). Called with a host uuid."""

    def __init__(self, me, members):
        self.me = me
        self.members = members
        self._mine = {}

    def __call__(self, uuid):
        mine = self._mine.get(uuid)
        if mine is None:
            mine = self._mine[uuid] = self.me == max(self.members, key=lambda w: _score(w, uuid))
        return mine


def _score(worker, uuid):
    # Stable across processes (str hashes are salted per process).
    return hashlib.blake2b(f"{worker}/{uuid}".encode(), digest_size=8).digest()


def _add_claims(entry, claims, rank):
    """Add ``claims`` to the hosts of ``entry``'s walk that they landed on;
    ``rank``: move those hosts in its ranking too."""
    ranker = entry.ranker
    touched = {}
    for host_uuid, allocations in claims:
        i = ranker.index.get(host_uuid)
        if i is None:
            continue  # not in this walk (filtered out, or another kind)
        host = ranker.hosts[i]
        for rp, classes in allocations.items():
            have = host.providers.get(rp)
            if have is None:
                continue
            for rc, amount in classes.items():
                cap_used = have.get(rc)
                if cap_used is not None:
                    cap_used[1] += amount
                    touched[i] = host
    if rank:
        # Once per host, however many of the claims landed on it.
        for host in touched.values():
            ranker.update(host)


def _took_more(host, seen):
    """Whether ``host`` (fresh from placement) holds more of any class than
    ``seen`` (this worker's kept view of it, its own claims included)."""
    for rp, classes in host.providers.items():
        old = seen.providers.get(rp)
        if old is None:
            continue
        for rc, (_capacity, used) in classes.items():
            was = old.get(rc)
            if was is not None and used > was[1]:
                return True
    return False
