"""Requests held while the nodes they fit on wake.

The scheduler answers ``waiting`` for a request no host that is on can take
but sleeping hosts could (scheduler.waking). Failing it would throw away
work the power controller is about to make room for: it wakes nodes for
the pending build requests it sees, and a held request's records are
pending. So the super conductor hands the request here instead: its
records stay pending and held (their leases renewed, one bulk call per
request every third of the lease, as while scheduling), and every
``[conductor] wake_retry_interval`` seconds it is scheduled again, until it
is placed on hosts that are on, fails for another reason, or has waited
``wake_wait_seconds``: then it fails with the scheduler's sentence and how
long it waited.

A conductor that dies with requests held leaves their leases to run out:
another conductor's sweep takes them over and schedules them again (a new
wait, counted from then). The wait is kept in this process only; the
records say nothing of it but their pending status.
"""

import concurrent.futures
import heapq
import itertools
import logging
import threading
import time

from conductor import metrics
from conductor import records as records_mod

LOG = logging.getLogger("conductor.service")


class Waiting:
    """One held request: what scheduling it again needs."""

    def __init__(self, spec, held, reply_topic, since, reason):
        self.spec = spec
        self.held = held
        self.reply_topic = reply_topic
        self.since = since  # monotonic: when its first ``waiting`` answer came
        self.reason = reason


class WakeWaits:
    """The requests this conductor holds for waking nodes.

    :param retry: ``retry(waiting)``, schedules a held request again (the
        super conductor's; it may hand the request back through ``hold``).
    """

    def __init__(self, records, retry, wait_seconds, retry_interval, workers=2, clock=None):
        self.records = records
        self.retry = retry
        self.wait_seconds = wait_seconds
        self.retry_interval = retry_interval
        self.clock = clock or time.monotonic
        self._due = []  # heap of (when, seq, Waiting)
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread = None
        self._stopped = False
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, "wake-wait")
        self._held = set()  # the Waiting entries held now, for the lease renewals

    @property
    def enabled(self):
        return self.wait_seconds > 0

    def waited(self, since):
        return self.clock() - since

    def may_wait(self, since):
        """Whether a request first answered ``waiting`` at ``since`` may
        wait one more retry."""
        return self.enabled and self.waited(since) + self.retry_interval <= self.wait_seconds

    def hold(self, waiting):
        """Hold ``waiting`` until its next try (True: it is not to be failed)."""
        with self._cond:
            if self._stopped:
                # Shutting down: the records stay pending, their leases run
                # out, and a live conductor's sweep schedules them again.
                LOG.warning("%s: not held (stopping); left to the sweep", waiting.spec.request_id)
                return True
            when = self.clock() + self.retry_interval
            heapq.heappush(self._due, (when, next(self._seq), waiting))
            self._held.add(waiting)
            metrics.WAITING_FOR_WAKE.set(len(self._held))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="wake-waits", daemon=True)
                self._thread.start()
            self._cond.notify()
        return True

    def count(self):
        with self._cond:
            return len(self._held)

    def stop(self):
        """Stop retrying (the records' leases then run out and the sweep of
        a live conductor takes them over)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self):
        renew_every = self.records.lease_seconds / 3
        renewed = self.clock()
        while True:
            with self._cond:
                while not self._stopped:
                    now = self.clock()
                    if self._due and self._due[0][0] <= now:
                        break
                    if now - renewed >= renew_every:
                        break
                    wake_at = min(
                        self._due[0][0] if self._due else now + renew_every,
                        renewed + renew_every,
                    )
                    self._cond.wait(max(0.01, wake_at - now))
                if self._stopped:
                    return
                now = self.clock()
                due = []
                while self._due and self._due[0][0] <= now:
                    due.append(heapq.heappop(self._due)[2])
                held = list(self._held)
            if now - renewed >= renew_every:
                renewed = now
                self._renew([w for w in held if w not in due])
            for waiting in due:
                with self._cond:
                    self._held.discard(waiting)
                    metrics.WAITING_FOR_WAKE.set(len(self._held))
                self._pool.submit(self._try, waiting)

    def _renew(self, held):
        for waiting in held:
            try:
                if not waiting.held.renew():
                    # Taken over (its lease ran out under a stall): its
                    # taker schedules it; nothing of it is ours to retry.
                    with self._cond:
                        self._held.discard(waiting)
                        self._due = [d for d in self._due if d[2] is not waiting]
                        heapq.heapify(self._due)
                        metrics.WAITING_FOR_WAKE.set(len(self._held))
            except records_mod.PLACEMENT_ERRORS as exc:
                LOG.warning(
                    "%s: lease renewal failed while waiting: %s", waiting.spec.request_id, exc
                )

    def _try(self, waiting):
        try:
            self.retry(waiting)
        except Exception:  # noqa: BLE001 - the records stay pending: the sweep takes them over
            LOG.exception("%s: scheduling again after the wait failed", waiting.spec.request_id)
