"""The queue of a scheduler worker's concurrent calls, handed out in batches.

Each executor thread that receives a call queues its request specs here and
blocks until their outcomes are known. Nobody runs a thread of its own for
it: a caller that finds a batch slot free and nobody gathering takes the
queue (up to ``[scheduler] batch_size``) and runs the batch
(scheduler.batching) for everyone in it; the others wait, their specs
joining the next batch. A spec whose caller's deadline passed while it
waited in the queue leaves it unrun (EXPIRED): nothing walked or claimed.
"""

import collections
import logging
import threading
import time

from joule import waiting_callers
from scheduler.pipeline import ALONE
from scheduler.pipeline import EXPIRED
from scheduler.pipeline import deadline_passed

LOG = logging.getLogger(__name__)


class _Item:
    __slots__ = ("spec", "group", "deadline", "outcome", "caller")

    def __init__(self, spec, group, deadline, caller):
        self.spec = spec
        self.group = group
        self.deadline = deadline
        self.outcome = None
        self.caller = caller  # joule.waiting_callers.Caller

    def finish(self, outcome):
        """(Under the batcher's lock.)"""
        self.outcome = outcome
        self.caller.finished_one()


class Batcher:
    """The queue of a worker's concurrent calls.

    ``submit(spec, group)`` blocks its caller until the spec's outcome is
    known (``group``: its server group view, or None).
    No thread of its own: a caller that finds a batch slot free and nobody
    gathering takes the queue (up to ``size``) and runs ``run(specs)``; the
    others wait, their specs joining the next batch. When another batch is
    already in hand the gatherer waits up to ``window`` seconds for more to
    arrive; on an idle worker it starts at once.
    """

    def __init__(self, run, size, window, slots):
        self._run = run
        self._size = size
        self._window = window
        self._slots = slots
        self._lock = threading.Lock()
        self._queue = collections.deque()
        self._busy = 0
        # The call of the caller gathering a batch, or None.
        self._gatherer = None

    def submit(self, spec, group=None):
        return self.submit_many([(spec, group)])[0]

    def submit_many(self, pairs, deadline=None):
        """Queue several (spec, group) at once (a bulk call's requests) and
        block until each has its outcome; the outcomes, in order. They join
        the same batches as single calls' specs. ``deadline``: their
        caller's (epoch seconds) or None: a spec still queued when it has
        passed is taken out of its batch, its outcome (EXPIRED, None)."""
        call = waiting_callers.Caller(len(pairs))
        items = [_Item(spec, group, deadline, call) for spec, group in pairs]
        if not items:
            return []
        with self._lock:
            self._queue.extend(items)
            if self._gatherer is not None and len(self._queue) >= self._size:
                self._gatherer.wake.set()  # its batch is full: no need to wait on
        while True:
            with self._lock:
                if not call.remaining:
                    # Woken to gather but done meanwhile: pass it on.
                    self._wake_next_gatherer()
                    break
                gather = self._gatherer is None and self._busy < self._slots and self._queue
                if gather:
                    self._gatherer = call
                call.wake.clear()
            if gather:
                self._work(call)
            else:
                call.wake.wait()
        return [it.outcome for it in items]

    def _wake_next_gatherer(self):
        """(Under the lock.) Wake the caller of the oldest queued spec when
        a batch could be gathered now."""
        if self._queue and self._gatherer is None and self._busy < self._slots:
            self._queue[0].caller.wake.set()

    @staticmethod
    def _drop_expired(batch):
        """The items of ``batch`` whose caller still waits; the others are
        done, (EXPIRED, None), before anything is walked or claimed."""
        keep = []
        for it in batch:
            if deadline_passed(it.deadline):
                it.finish((EXPIRED, None))
            else:
                keep.append(it)
        return keep

    def _work(self, call):
        """Gather a batch and run it (called and returning without the lock)."""
        if self._window:
            deadline = time.monotonic() + self._window
            while True:
                with self._lock:
                    if not self._busy or len(self._queue) >= self._size:
                        break
                    call.wake.clear()
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                call.wake.wait(left)
        with self._lock:
            queue = self._queue
            batch = [queue.popleft() for _ in range(min(self._size, len(queue)))]
            batch = self._drop_expired(batch)
            self._gatherer = None
            if batch:
                self._busy += 1
            self._wake_next_gatherer()
        if not batch:
            return
        try:
            outcomes = self._run([it.spec for it in batch], [it.group for it in batch])
        except Exception:  # noqa: BLE001 - the batch failed: each goes alone
            LOG.exception("batch of %d request(s) failed; scheduling them alone", len(batch))
            outcomes = [(ALONE, None)] * len(batch)
        with self._lock:
            self._busy -= 1
            for it, outcome in zip(batch, outcomes, strict=True):
                it.finish(outcome)
            self._wake_next_gatherer()
