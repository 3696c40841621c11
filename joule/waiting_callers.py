"""A thread waiting on a batcher for its items, with a wake-up of its own.

Both group commits (conductor.batch, the conductor's placement calls and
messages; scheduler.batcher, a worker's scheduling batches) block each
caller until the batch holding its items is done. One condition shared by
every waiting thread woke all of them at every flush to find nothing to do
(a super conductor holds about 200, a scheduler worker up to 128: 40 % of
the super conductor's samples in the bus benchmark's profile). Each caller
waits on its own ``Caller`` instead: a finished batch wakes the callers
whose last item it finished, and the batcher wakes one caller to lead or
gather the next batch.
"""

import threading


class Caller:
    """How many of one caller's items are still open, and its wake-up."""

    __slots__ = ("remaining", "wake")

    def __init__(self, count):
        self.remaining = count
        self.wake = threading.Event()

    def finished_one(self):
        """One of its items is done (under the batcher's lock); the last one
        wakes the caller."""
        self.remaining -= 1
        if not self.remaining:
            self.wake.set()
