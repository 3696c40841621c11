"""What a process keeps per peer, forgotten once the peer has gone quiet.

A conductor keeps an RPC client and a batcher per submitter's reply topic
(``build-submit`` makes a new topic every run): kept forever, they grow with
every run. ``IdleCache`` holds them least recently used first and forgets an
entry unused for ``idle_seconds``, and the least recently used ones beyond
``max_entries``. An entry that ``busy(key)`` says is in use is never
forgotten, nor the one just asked for (they may hold the cache above
``max_entries`` for a while). An entry forgotten and wanted again is made
again: what is kept is a saving, never a state.

Not thread-safe: its owner calls it under its own lock (the owner often has
more to do under that lock, e.g. count a user of the entry).
"""

import collections
import time


class IdleCache:
    def __init__(
        self, make, max_entries, idle_seconds, busy=None, forgotten=None, clock=time.monotonic
    ):
        if max_entries < 1 or idle_seconds <= 0:
            raise ValueError("max_entries must be at least 1 and idle_seconds positive")
        self._make = make
        self.max_entries = max_entries
        self.idle_seconds = idle_seconds
        self._busy = busy or (lambda _key: False)
        # forgotten(key, value): called for each entry forgotten.
        self._forgotten = forgotten
        self._clock = clock
        # key -> [value, last used]; least recently used first.
        self._entries = collections.OrderedDict()
        # How many entries were forgotten (tests and logs).
        self.evicted = 0

    def get(self, key):
        """The entry of ``key``, made if missing; it becomes the most recently used."""
        now = self._clock()
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = [self._make(key), now]
        else:
            entry[1] = now
            self._entries.move_to_end(key)
        self._prune(now, keep=key)
        return entry[0]

    def touch(self, key):
        """``key`` was used just now (e.g. a long use of it ended)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry[1] = self._clock()
            self._entries.move_to_end(key)

    def prune(self):
        """Forget what is idle or too many now; return how many were."""
        return self._prune(self._clock())

    def _prune(self, now, keep=None):
        # Oldest first, up to the first entry neither idle nor too many: in
        # the common case (nothing to forget) one look at the oldest.
        gone = []
        over = len(self._entries) - self.max_entries
        for key, (_value, used) in self._entries.items():
            if over <= 0 and now - used < self.idle_seconds:
                break  # the rest were used later still
            if key != keep and not self._busy(key):
                gone.append(key)
                over -= 1
        for key in gone:
            value, _used = self._entries.pop(key)
            if self._forgotten is not None:
                self._forgotten(key, value)
        self.evicted += len(gone)
        return len(gone)

    def values(self):
        return [value for value, _used in self._entries.values()]

    def __getitem__(self, key):
        """The entry of ``key`` as it is (neither made nor touched)."""
        return self._entries[key][0]

    def __contains__(self, key):
        return key in self._entries

    def __len__(self):
        return len(self._entries)
