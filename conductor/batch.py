"""Group commit: independent callers share one placement request.

A conductor handles several RPC messages at once (one executor thread
each); each wants a record taken, finished, created or handed off. A
``Batcher`` collects what the threads submit and sends it as one bulk
request: the first caller to find no request in flight becomes the leader,
waits ``window`` seconds for others to join, and flushes up to
``max_items`` items; callers arriving while a flush is in flight queue up
for the next one, whose leader is one of them (with ``concurrent`` > 1 up
to that many flushes run at once, the next leader gathering while the
others are in flight). So a busy conductor sends
one request per flush instead of one per item.

The leader only waits when ``company()`` says other work is in flight
that may join (the conductor counts the messages it is handling), so a lone
caller pays nothing.

``flush(items)`` returns one result per item, in order; a result that is an
exception is raised in the caller of that item. An exception raised by
``flush`` itself is raised in every caller of the batch.

``Batchers`` keeps one ``Batcher`` per key, for items that can only share a
flush with items of the same key (messages to one cell, outcomes to one
reply topic). Keys come and go (every build-submit run has a reply topic of
its own), so a key's batcher is forgotten once no caller has used it for
``idle_seconds``, and the least recently used idle ones beyond ``max_keys``
(joule.idle_cache); one with callers in it is kept. A forgotten key that
comes back gets a new batcher.
"""

import collections
import threading
import time

from conductor import metrics
from joule import idle_cache
from joule import waiting_callers

# Batchers kept per key (Batchers): a key unused for this long is forgotten,
# and the least recently used beyond the count. A batcher holds nothing
# between flushes, so forgetting costs only a new one when the key returns.
MAX_KEYS = 1024
IDLE_SECONDS = 300.0


class _Slot:
    __slots__ = ("item", "result", "caller")

    def __init__(self, item, caller):
        self.item = item
        self.result = None
        self.caller = caller  # joule.waiting_callers.Caller


class Batcher:
    def __init__(
        self, flush, window, max_items, company=None, kind=None, concurrent=1, histogram=None
    ):
        self._flush = flush
        # Flushes that may be in flight at once (a slow flush, such as a
        # scheduling call, need not hold back the next batch).
        self._concurrent = concurrent
        # The label of the histogram of items per flush (by default
        # joule_conductor_placement_batch_items), if any.
        self._kind = kind
        self._histogram = histogram or metrics.BATCH
        self.window = window
        self.max_items = max_items
        # company() -> True when other work is in flight that may join the
        # batch: the leader only waits out the window then (a lone caller,
        # e.g. the simulator's one thread, never waits).
        self._company = company or (lambda: True)
        self._lock = threading.Lock()
        self._pending = collections.deque()
        self._busy = 0
        self._gathering = False
        # How many flushes and items went through (tests and metrics).
        self.flushes = 0
        self.items = 0

    def submit(self, item):
        return self.submit_many([item])[0]

    def submit_many(self, items):
        """Submit items; block until their flush is done; return their results."""
        call = waiting_callers.Caller(len(items))
        slots = [_Slot(i, call) for i in items]
        if not slots:
            return []
        with self._lock:
            self._pending.extend(slots)
        while True:
            with self._lock:
                if not call.remaining:
                    # Woken as the next leader but done meanwhile: pass it on.
                    self._wake_next_leader()
                    break
                # One leader gathers at a time (a second one would split
                # the window's callers and could flush nothing).
                lead = self._busy < self._concurrent and not self._gathering and self._pending
                if lead:
                    self._busy += 1
                    self._gathering = True
                else:
                    call.wake.clear()
            if lead:
                self._lead()
            else:
                call.wake.wait()
        out = []
        for slot in slots:
            if isinstance(slot.result, BaseException):
                raise slot.result
            out.append(slot.result)
        return out

    def _wake_next_leader(self):
        """(Under the lock.) Wake the caller of the oldest queued item when
        a flush could start now; it leads it."""
        if self._pending and self._busy < self._concurrent and not self._gathering:
            self._pending[0].caller.wake.set()

    def _take(self):
        """(Under the lock.) Up to max_items queued slots, oldest first."""
        pending = self._pending
        count = min(self.max_items, len(pending))
        return [pending.popleft() for _ in range(count)]

    def _lead(self):
        batch = []
        try:
            try:
                if self.window > 0 and self._company():
                    time.sleep(self.window)  # others join meanwhile
            finally:
                with self._lock:
                    batch = self._take()
                    self._gathering = False
                    self._wake_next_leader()  # the next leader may gather now
            if not batch:
                return
            try:
                results = self._flush([s.item for s in batch])
            except Exception as exc:  # noqa: BLE001 - every caller of the batch gets it
                results = [exc] * len(batch)
            for slot, result in zip(batch, results, strict=True):
                slot.result = result
            with self._lock:
                self.flushes += 1
                self.items += len(batch)
            if self._kind is not None:
                self._histogram.labels(self._kind).observe(len(batch))
        finally:
            with self._lock:
                for slot in batch:
                    slot.caller.finished_one()
                self._busy -= 1
                self._wake_next_leader()


class Batchers:
    """One Batcher per key, made on first use: ``flush(key, items)``; the
    batchers of keys gone quiet are forgotten (``max_keys``,
    ``idle_seconds``: see the module's docstring)."""

    def __init__(
        self,
        flush,
        window,
        max_items,
        company=None,
        kind=None,
        histogram=None,
        max_keys=MAX_KEYS,
        idle_seconds=IDLE_SECONDS,
        clock=time.monotonic,
    ):
        def make(key):
            return Batcher(
                lambda items: flush(key, items),
                window,
                max_items,
                company,
                kind=kind,
                histogram=histogram,
            )

        # Callers inside a key's batcher (from taking it to their flush's
        # end): a batcher in use is never forgotten.
        self._users = collections.Counter()
        self._forgotten_flushes = 0
        self._batchers = idle_cache.IdleCache(
            make,
            max_keys,
            idle_seconds,
            busy=self._users.__getitem__,
            forgotten=self._forget,
            clock=clock,
        )
        self._lock = threading.Lock()

    def submit(self, key, item):
        return self.submit_many(key, [item])[0]

    def submit_many(self, key, items):
        with self._lock:
            batcher = self._batchers.get(key)
            self._users[key] += 1
        try:
            return batcher.submit_many(items)
        finally:
            with self._lock:
                self._users[key] -= 1
                if not self._users[key]:
                    del self._users[key]
                    self._batchers.touch(key)  # idle from now on, not from its start
                self._batchers.prune()

    def _forget(self, _key, batcher):
        # Under self._lock (the cache is only called under it).
        self._forgotten_flushes += batcher.flushes

    def keys(self):
        """How many keys have a batcher now."""
        with self._lock:
            self._batchers.prune()
            return len(self._batchers)

    @property
    def flushes(self):
        with self._lock:
            return self._forgotten_flushes + sum(b.flushes for b in self._batchers.values())


def unique_rounds(keys):
    """Split positions 0..n-1 into rounds in which no key appears twice
    (a bulk body names each record once), keeping the order."""
    rounds, seen = [], []
    for index, key in enumerate(keys):
        for number, used in enumerate(seen):
            if key not in used:
                used.add(key)
                rounds[number].append(index)
                break
        else:
            seen.append({key})
            rounds.append([index])
    return rounds
