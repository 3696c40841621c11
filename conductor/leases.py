"""Leases kept alive while a conductor works on the records it holds.

A conductor only acts on a build request it holds (conductor.records), and
its hold is a lease that runs out: a conductor that dies leaves its records
to be taken over by the sweep of another (conductor.sweep). A live one must
therefore renew what it holds before the lease runs out, and never touch
what the record stands for (its claim, its finish) once it is somebody
else's. Two shapes of that, one per side:

- ``Lease``: one record during a cell conductor's build (conductor.cell_build),
  renewed in the background while the build runs (a ``Heartbeat`` every
  third of the lease, one thread and one bulk take for every build of the
  conductor);
- ``Held``: the records of one request while the super conductor waits for
  the scheduler (conductor.super_conductor), renewed in the background
  (``HeldRenewals``: one thread for every request in hand, one bulk call
  per request), then left to the cell conductors, which take each record
  from it by name (placement's ``holder``) at the generation of the cast.

Both guard every write on a held record's claim (``write``): the write
carries the record's generation and owner, and placement applies it only
while the record is still held so, in the write's own transaction
(placement's Joule-Build-Lease header). Checking the lease before a write,
as the conductor once did, left a gap: a conductor stalled between the
check and the write (a slow build, a paused process) moved or released a
claim that was another conductor's by then. A renewal and a guarded write
of one record never run at once (a renewal changes the generation the
write carries).
"""

import concurrent.futures
import contextlib
import logging
import threading
import time
import weakref

from conductor import records as records_mod
from joule import placement_client as client_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")


class LeaseLost(Exception):
    """The record is somebody else's now (or its lease ran out): leave it."""

    def __init__(self, instance):
        super().__init__(f"build request {instance}: lease lost")
        self.instance = instance


def _guarded(write, args, kwargs, generation, owner):
    """``write(*args, lease=(generation, owner), **kwargs)``; True, or False
    when placement refused it because the lease is lost."""
    try:
        write(*args, lease=(generation, owner), **kwargs)
    except client_mod.Conflict as exc:
        if exc.lease_lost:
            return False
        raise
    return True


class _OnePerRecords:
    """One instance per records client, made on first use: a process keeps
    one renewal thread of each kind, whatever number of builds or requests
    it has in hand. Each subclass has its own table; an instance goes with
    its records client (weakly held)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._of = weakref.WeakKeyDictionary()
        cls._of_lock = threading.Lock()

    @classmethod
    def of(cls, records):
        with cls._of_lock:
            one = cls._of.get(records)
            if one is None:
                one = cls._of[records] = cls(records)
            return one


class Lease:
    """Keeps one record's lease alive during a build (``kept_alive``: a
    heartbeat every third of the lease) and guards the writes on its claim.

    ``taken_at`` is when the take was *asked for* (monotonic): placement
    starts the lease somewhere between the asking and the answer, and a slow
    answer (a busy database, a bulk call queued behind another) must not
    make the lease look younger than it is. ``keep()`` is False once the
    record is somebody else's, or once the lease ran out by this process's
    own watch (renewals failed for a whole lease)."""

    def __init__(self, records, instance, generation, taken_at=None):
        self.records = records
        self.instance = instance
        self.generation = generation
        self.taken_at = time.monotonic() if taken_at is None else taken_at
        self._held = True
        self._lock = threading.Lock()

    def _still_held(self):
        if self._held and time.monotonic() - self.taken_at >= self.records.lease_seconds:
            self._held = False
        return self._held

    def keep(self):
        with self._lock:
            return self._still_held()

    def check(self):
        """:raise LeaseLost: the record is no longer ours."""
        if not self.keep():
            raise LeaseLost(self.instance)

    def write(self, write, *args, **kwargs):
        """Run a write on the record's claim guarded by this lease (placement
        refuses it once the record is not ours at this generation).

        :raise LeaseLost: it was not ours (nothing was written).
        """
        with self._lock:
            if not self._still_held():
                raise LeaseLost(self.instance)
            if not _guarded(write, args, kwargs, self.generation, self.records.owner):
                self._held = False
                raise LeaseLost(self.instance)

    @contextlib.contextmanager
    def kept_alive(self):
        """Renew every third of the lease while the block runs (the
        conductor's Heartbeat); a renewal that fails for want of placement
        is tried again a second later (the lease holds for three), one
        refused ends the hold."""
        beat = Heartbeat.of(self.records)
        beat.add(self)
        try:
            yield self
        finally:
            beat.remove(self)
            with self._lock:
                pass  # a renewal in flight has finished: the generation is final


class Heartbeat(_OnePerRecords):
    """The renewals of one conductor's builds in hand, in one thread: every
    third of the lease, the leases due (and those due within half a beat)
    are renewed in one bulk take. (A
    thread per build cost a start and a join per instance, and a take per
    renewal.) A lease busy with a guarded write is renewed right after it.
    The thread ends once no build has been in hand for a while."""

    IDLE_SECONDS = 30.0
    RETRY_SECONDS = 1.0

    def __init__(self, records):
        self.records = records
        self._leases = set()
        self._cond = threading.Condition()
        self._thread = None
        # When the thread wakes next by itself (monotonic; None: it runs or
        # waits for a first lease). A lease due no sooner needs no wake-up:
        # waking the thread at every build to find nothing due, it looked
        # at every lease in hand each time.
        self._wakes_at = None

    def add(self, lease):
        with self._cond:
            self._leases.add(lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="lease-heartbeat")
                self._thread.daemon = True
                self._thread.start()
            due = lease.taken_at + self.records.lease_seconds / 3
            if self._wakes_at is None or due < self._wakes_at:
                self._cond.notify()

    def remove(self, lease):
        with self._cond:
            self._leases.discard(lease)

    def _loop(self):
        while True:
            due = self._wait_for_due()
            if due is None:
                return
            locked = [lease for lease in due if lease._lock.acquire(blocking=False)]
            try:
                asked = self._renew(locked)
            finally:
                for lease in locked:
                    lease._lock.release()
            if not asked:
                time.sleep(self.RETRY_SECONDS)
            elif len(locked) < len(due):
                time.sleep(0.01)  # the busy ones, once their write is done

    def _wait_for_due(self):
        """The leases due for renewal (waiting until some are), or None once
        idle for IDLE_SECONDS (the thread ends)."""
        interval = self.records.lease_seconds / 3
        with self._cond:
            while True:
                self._wakes_at = None  # set again only while it waits for a due lease
                if not self._leases:
                    self._cond.wait(self.IDLE_SECONDS)
                    if not self._leases:
                        self._thread = None
                        return None
                    continue
                now = time.monotonic()
                delay = min(lease.taken_at for lease in self._leases) + interval - now
                if delay <= 0:
                    # The ones due within half a beat come along: renewed a
                    # little early, they share this take instead of each
                    # having its own a moment later.
                    soon = now + interval / 2
                    return [x for x in self._leases if x.taken_at + interval <= soon]
                self._wakes_at = now + delay
                self._cond.wait(delay)

    def _renew(self, locked):
        """One bulk take for the due leases ``locked`` (the ones not busy
        writing); False when placement could not be asked."""
        live = [lease for lease in locked if lease._still_held()]
        with self._cond:
            # A lost lease is never renewed again: stop looking at it.
            self._leases.difference_update(x for x in locked if x not in live)
        if not live:
            return True
        asked = time.monotonic()
        try:
            got = self.records.take_many({x.instance: x.generation for x in live})
        except records_mod.PLACEMENT_ERRORS as exc:
            LOG.warning("lease renewal of %d build(s) failed: %s", len(live), exc)
            return False
        for lease in live:
            gen = got.get(lease.instance)
            if gen is None:
                lease._held = False
            else:
                lease.generation, lease.taken_at = gen, asked
        return True


class Held:
    """The records a super conductor holds while the scheduler works on them.

    ``kept_alive()`` renews their leases in the background, so a slow or
    retried scheduling call never lets them expire under a live conductor;
    ``renew()`` is also the check before touching their claims: a record
    whose renewal fails is somebody else's now and is forgotten.
    """

    def __init__(self, records, generations):
        self.records = records
        self.generations = dict(generations)
        self._lock = threading.Lock()

    def instances(self):
        with self._lock:
            return list(self.generations)

    def generations_of(self, instances):
        """{instance: generation held} of those of ``instances`` still held."""
        with self._lock:
            return {i: self.generations[i] for i in instances if i in self.generations}

    def write(self, instance, write, *args, **kwargs):
        """``Lease.write`` for one held record: False (and the record
        forgotten) when it was not ours any more."""
        with self._lock:
            generation = self.generations.get(instance)
            if generation is None:
                return False
            if _guarded(write, args, kwargs, generation, self.records.owner):
                return True
            del self.generations[instance]
            return False

    def renew(self):
        """Renew every lease (one bulk call); return the instances still held."""
        with self._lock:
            if self.generations:
                for instance, new in self.records.take_many(self.generations).items():
                    if new is None:
                        del self.generations[instance]
                    else:
                        self.generations[instance] = new
            return list(self.generations)

    def leave(self, instances):
        """Stop holding ``instances`` here, without a call: their builds are
        cast naming this conductor as their holder, and whoever receives a
        cast takes the record from it at the generation it carries (one
        write where a hand-off and a take were two). Returns {instance:
        generation} of those still held. The lease runs on meanwhile: a
        cast that is lost leaves the record to the sweep once it runs out."""
        with self._lock:
            return {i: self.generations.pop(i) for i in instances if i in self.generations}

    @contextlib.contextmanager
    def kept_alive(self):
        """Renew every third of the lease while the block runs, in the
        conductor's one ``HeldRenewals`` thread (a thread per request cost
        a start and a join per request, about 0.1 ms of CPU, for a
        renewal that a scheduling call rarely lasts long enough to need)."""
        renewals = HeldRenewals.of(self.records)
        renewals.add(self)
        try:
            yield
        finally:
            renewals.remove(self)  # a renewal in flight has finished: the generations are final


class HeldRenewals(_OnePerRecords):
    """The renewals of one super conductor's ``Held`` requests, in one
    thread: each is renewed a third of the lease after it was added, then
    every third of the lease from its last renewal (one bulk call each, as
    its own thread did). A renewal that fails is logged and tried again a
    beat later, as before. The thread ends once nothing has been held for a
    while."""

    IDLE_SECONDS = 30.0

    def __init__(self, records):
        self.records = records
        self._due = {}  # Held -> when it is renewed next (monotonic)
        self._renewing = set()  # the ones whose renewal runs now
        self._cond = threading.Condition()
        self._thread = None

    def add(self, held):
        with self._cond:
            # Never earlier than anything already waiting: the thread only
            # needs waking for its first one.
            self._due[held] = time.monotonic() + self.records.lease_seconds / 3
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="held-renewals", daemon=True
                )
                self._thread.start()
            elif len(self._due) == 1:
                self._cond.notify()

    def remove(self, held):
        """Stop renewing ``held``; returns once a renewal of it in flight is
        done (what follows, a hand-off or a finish, uses its generations)."""
        with self._cond:
            self._due.pop(held, None)
            while held in self._renewing:
                self._cond.wait()

    def _loop(self):
        interval = self.records.lease_seconds / 3
        while True:
            with self._cond:
                while True:
                    if not self._due:
                        self._cond.wait(self.IDLE_SECONDS)
                        if not self._due:
                            self._thread = None
                            return
                        continue
                    now = time.monotonic()
                    if min(self._due.values()) <= now:
                        # The ones due within half a beat come along, as
                        # the builds' Heartbeat does.
                        due = [h for h, at in self._due.items() if at <= now + interval / 2]
                        for held in due:
                            self._due[held] = now + interval
                        break
                    self._cond.wait(min(self._due.values()) - now)
            if len(due) == 1:
                self._renew(due[0])
            else:
                # Side by side: they share the records' bulk takes, and a
                # placement that does not answer holds them up together,
                # not one after the other (rare: a scheduler this slow).
                with concurrent.futures.ThreadPoolExecutor(min(len(due), 16)) as pool:
                    list(pool.map(self._renew, due))

    def _renew(self, held):
        with self._cond:
            if held not in self._due:
                return  # its block ended meanwhile
            self._renewing.add(held)
        try:
            held.renew()
        except records_mod.PLACEMENT_ERRORS as exc:
            LOG.warning("lease renewal failed: %s", exc)
        finally:
            with self._cond:
                self._renewing.discard(held)
                self._cond.notify_all()
