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
reply topic).
"""

import threading
import time

from conductor import metrics


class _Slot:
    __slots__ = ("item", "done", "result")

    def __init__(self, item):
        self.item = item
        self.done = False
        self.result = None


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
        self._cond = threading.Condition()
        self._pending = []
        self._busy = 0
        self._gathering = False
        # How many flushes and items went through (tests and metrics).
        self.flushes = 0
        self.items = 0

    def submit(self, item):
        return self.submit_many([item])[0]

    def submit_many(self, items):
        """Submit items; block until their flush is done; return their results."""
        slots = [_Slot(i) for i in items]
        with self._cond:
            self._pending.extend(slots)
        while True:
            with self._cond:
                # One leader gathers at a time (a second one would split
                # the window's callers and could flush nothing).
                while not all(s.done for s in slots) and (
                    self._busy >= self._concurrent or self._gathering or not self._pending
                ):
                    self._cond.wait()
                if all(s.done for s in slots):
                    break
                self._busy += 1
                self._gathering = True
            self._lead()
        out = []
        for slot in slots:
            if isinstance(slot.result, BaseException):
                raise slot.result
            out.append(slot.result)
        return out

    def _lead(self):
        batch = []
        try:
            try:
                if self.window > 0 and self._company():
                    time.sleep(self.window)  # others join meanwhile
            finally:
                with self._cond:
                    batch = self._pending[: self.max_items]
                    del self._pending[: self.max_items]
                    self._gathering = False
                    self._cond.notify_all()  # the next leader may gather now
            if not batch:
                return
            try:
                results = self._flush([s.item for s in batch])
            except Exception as exc:  # noqa: BLE001 - every caller of the batch gets it
                results = [exc] * len(batch)
            for slot, result in zip(batch, results, strict=True):
                slot.result = result
            with self._cond:
                self.flushes += 1
                self.items += len(batch)
            if self._kind is not None:
                self._histogram.labels(self._kind).observe(len(batch))
        finally:
            with self._cond:
                for slot in batch:
                    slot.done = True
                self._busy -= 1
                self._cond.notify_all()


class Batchers:
    """One Batcher per key, made on first use: ``flush(key, items)``."""

    def __init__(self, flush, window, max_items, company=None, kind=None, histogram=None):
        self._make = lambda key: Batcher(
            lambda items: flush(key, items),
            window,
            max_items,
            company,
            kind=kind,
            histogram=histogram,
        )
        self._batchers = {}
        self._lock = threading.Lock()

    def submit(self, key, item):
        return self.submit_many(key, [item])[0]

    def submit_many(self, key, items):
        with self._lock:
            batcher = self._batchers.get(key)
            if batcher is None:
                batcher = self._batchers[key] = self._make(key)
        return batcher.submit_many(items)

    @property
    def flushes(self):
        with self._lock:
            return sum(b.flushes for b in self._batchers.values())


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
