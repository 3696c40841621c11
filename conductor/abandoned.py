"""Instances whose scheduling this conductor gave up, watched for late claims.

A super conductor that gets no answer from the schedulers in time (every
try timed out, or a scheduler answered that the call's deadline passed)
releases what the request holds and fails its records. A scheduler may
still be working on it: with the call's deadline (scheduler RPC 1.3,
joule.rpc) it writes no claim after it and releases the claims it got too
late before it answers, but a few cases are beyond that: clocks apart by
more than the deadline's margin, a scheduler that died or lost placement
between its claim and its release, a claim write that placement committed
long after it was sent. So the instances are watched for ``watch_seconds``
after they were given up, and the conductor's sweep (conductor.sweep)
releases a claim it finds on one whose record is failed (a failed record is
never built again; its instance runs nowhere).

In memory: a conductor that dies within the watch leaves such a claim to
``placement-manage allocations audit --delete`` (a failed record's
allocations are what the audit lists).
"""

import threading
import time


def watch_seconds(conf):
    """How long a given-up instance is watched: a lease (the longest a
    scheduling call's records stay held without renewal) and a call
    timeout more (a claim write sent just before the deadline)."""
    return conf.conductor.lease_seconds + conf.rpc.call_timeout


class Abandoned:
    """The instances given up, each until its watch ends (monotonic)."""

    def __init__(self, watch_seconds=90.0):
        self.watch_seconds = watch_seconds
        self._until = {}
        self._lock = threading.Lock()

    def watch(self, instances):
        until = time.monotonic() + self.watch_seconds
        with self._lock:
            for instance in instances:
                self._until[instance] = until

    def forget(self, instance):
        with self._lock:
            self._until.pop(instance, None)

    def due(self, limit):
        """At most ``limit`` instances still watched (those whose watch
        ended are forgotten), the oldest first; each is moved to the end,
        so a long list is looked at in turns."""
        now = time.monotonic()
        with self._lock:
            for instance in [i for i, until in self._until.items() if until <= now]:
                del self._until[instance]
            chosen = list(self._until)[:limit]
            for instance in chosen:
                self._until[instance] = self._until.pop(instance)
        return chosen

    def __len__(self):
        with self._lock:
            return len(self._until)
