"""The queue of a scheduler worker's concurrent calls, handed out in batches.

Each executor thread that receives a call queues its request specs here and
blocks until their outcomes are known. Nobody runs a thread of its own for
it: a caller that finds a batch slot free and nobody gathering takes the
queue (up to ``[scheduler] batch_size``) and runs the batch
(scheduler.batching) for everyone in it; the others wait, their specs
joining the next batch. A spec whose caller's deadline passed while it
waited in the queue leaves it unrun (EXPIRED): nothing walked or claimed.
"""

import logging
import threading
import time

from scheduler.pipeline import ALONE
from scheduler.pipeline import EXPIRED
from scheduler.pipeline import deadline_passed

LOG = logging.getLogger(__name__)


class _Item:
    __slots__ = ("spec", "group", "deadline", "outcome", "done")

    def __init__(self, spec, group, deadline=None):
        self.spec = spec
        self.group = group
        self.deadline = deadline
        self.outcome = None
        self.done = False


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
        self._cond = threading.Condition()
        self._queue = []
        self._busy = 0
        self._gathering = False

    def submit(self, spec, group=None):
        return self.submit_many([(spec, group)])[0]

    def submit_many(self, pairs, deadline=None):
        """Queue several (spec, group) at once (a bulk call's requests) and
        block until each has its outcome; the outcomes, in order. They join
        the same batches as single calls' specs. ``deadline``: their
        caller's (epoch seconds) or None: a spec still queued when it has
        passed is taken out of its batch, its outcome (EXPIRED, None)."""
        items = [_Item(spec, group, deadline) for spec, group in pairs]
        cond = self._cond
        with cond:
            self._queue.extend(items)
            cond.notify_all()
            while not all(it.done for it in items):
                if not self._gathering and self._busy < self._slots and self._queue:
                    self._work()
                    continue
                cond.wait()
        return [it.outcome for it in items]

    @staticmethod
    def _drop_expired(batch):
        """The items of ``batch`` whose caller still waits; the others are
        done, (EXPIRED, None), before anything is walked or claimed."""
        keep = []
        for it in batch:
            if deadline_passed(it.deadline):
                it.outcome = (EXPIRED, None)
                it.done = True
            else:
                keep.append(it)
        return keep

    def _work(self):
        """Gather a batch and run it (called and returning with the lock held)."""
        cond = self._cond
        self._gathering = True
        if self._busy and self._window:
            deadline = time.monotonic() + self._window
            while len(self._queue) < self._size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                cond.wait(left)
        batch = self._queue[: self._size]
        del self._queue[: self._size]
        batch = self._drop_expired(batch)
        if not batch:
            self._gathering = False
            cond.notify_all()
            return
        self._busy += 1
        self._gathering = False
        cond.notify_all()
        cond.release()
        try:
            outcomes = self._run([it.spec for it in batch], [it.group for it in batch])
        except Exception:  # noqa: BLE001 - the batch failed: each goes alone
            LOG.exception("batch of %d request(s) failed; scheduling them alone", len(batch))
            outcomes = [(ALONE, None)] * len(batch)
        finally:
            cond.acquire()
            self._busy -= 1
        for it, outcome in zip(batch, outcomes, strict=True):
            it.outcome = outcome
            it.done = True
        cond.notify_all()
