"""Leases kept alive while a conductor works on the records it holds.

A conductor only acts on a build request it holds (conductor.records), and
its hold is a lease that runs out: a conductor that dies leaves its records
to be taken over by the sweep of another (conductor.sweep). A live one must
therefore renew what it holds before the lease runs out, and check that it
still holds a record before touching what the record stands for (its claim,
its build). Two shapes of that, one per side:

- ``Lease``: one record during a cell conductor's build (conductor.cell_build),
  renewed on demand between the steps of the build;
- ``Held``: the records of one request while the super conductor waits for
  the scheduler (conductor.super_conductor), renewed in the background, in
  one bulk call, then handed off to the cell conductors.
"""

import contextlib
import logging
import threading
import time

from conductor import records as records_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")


class Lease:
    """Keeps a record's lease alive during a long build: renews it once half
    of it has passed. ``keep()`` is False once the record is somebody else's.

    ``taken_at`` is when the take was *asked for* (monotonic): placement
    starts the lease somewhere between the asking and the answer, and a slow
    answer (a busy database, a bulk call queued behind another) must not
    make the lease look younger than it is, or a build could start after
    placement let another conductor take the record over."""

    def __init__(self, records, instance, generation, taken_at=None):
        self.records = records
        self.instance = instance
        self.generation = generation
        self.taken_at = time.monotonic() if taken_at is None else taken_at

    def keep(self):
        if time.monotonic() - self.taken_at < self.records.lease_seconds / 2:
            return True
        asked = time.monotonic()
        gen = self.records.take(self.instance, self.generation)
        if gen is None:
            return False
        self.generation, self.taken_at = gen, asked
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

    def hand_off(self, instances):
        """Leave the records for the receivers of the hand-off (one bulk
        call); return {instance: generation handed off} of those that were
        still ours."""
        with self._lock:
            mine = {i: self.generations.pop(i) for i in instances if i in self.generations}
        if not mine:
            return {}
        handed = self.records.take_many(mine, hand_off=True)
        return {i: g for i, g in handed.items() if g is not None}

    @contextlib.contextmanager
    def kept_alive(self):
        done = threading.Event()
        interval = self.records.lease_seconds / 3

        def loop():
            while not done.wait(interval):
                try:
                    self.renew()
                except records_mod.PLACEMENT_ERRORS as exc:
                    LOG.warning("lease renewal failed: %s", exc)

        thread = threading.Thread(target=loop, name="lease-renewal", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
