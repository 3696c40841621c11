"""The weighers' ranking of a kept walk, updated per decision, not redone.

``batching.Ranker`` recomputes every host's normalized weights for every
decision: fine for a capped walk of a thousand hosts, but a kept walk
(scheduler.host_cache) holds the whole cluster, and at 5,000 hosts that
recomputation was 9 of the 12 ms a decision cost. Here a decision costs
about the hosts it looks at:

- totals (sum of multiplier x normalized value per weigher, nova's formula,
  the same numbers ``weighers.weigh_hosts`` gives) are kept per host, with a
  sorted index of (-total, position);
- ``update(host)`` (the host took an instance) recomputes that host's raw
  values; while every weigher's normalization bounds (its minimum, unless it
  has a fixed one, and its maximum, tracked with how many hosts sit on them)
  stay where they were, only that host's total moves, re-inserted in the
  index; when a bound moves, everything is recomputed once;
- a decision samples among the hosts tied at the best weight at random
  instead of collecting all of them (on a cluster of identical hosts every
  host ties: collecting them made each decision touch the whole cluster).
  A uniform draw among the usable tied hosts is what shuffling them and
  picking one does, so the herding defence is the same.
"""

import bisect

from scheduler import batching

# The hosts a decision keeps, best first, for the alternates of its instance
# (alternates.pick walks them until it has max_attempts - 1 in the cell).
ALTERNATES_PREFIX = 256
# Random draws among tied hosts before falling back to looking at them in
# order (a tie of mostly full hosts).
TIE_DRAWS = 64


class IncrementalRanker(batching.Ranker):
    """``batching.Ranker``'s hosts, raw values and multipliers, ranked
    incrementally (the module docstring)."""

    def __init__(self, state, weighers, top=16):
        super().__init__(state, weighers, top)
        self.minvals = [getattr(w, "minval", None) for w, _m in self.active]
        self._lost = None  # the lost set the index was built for
        self._totals = []
        self._keys = []  # sorted [(-total, position)] of the hosts not lost
        self._bounds = []  # per weigher: [low, low count, high, high count]
        self._fresh = False

    # -- building ------------------------------------------------------------

    def add(self, hosts):
        super().add(hosts)
        if hosts:
            self._fresh = False

    def _rebuild(self, lost):
        hosts = self.hosts
        live = [i for i, h in enumerate(hosts) if h.uuid not in lost]
        self._bounds = []
        for k in range(len(self.active)):
            values = [self.raw[k][i] for i in live]
            if values:
                low = min(values) if self.minvals[k] is None else self.minvals[k]
                high = max(values)
                bounds = [low, values.count(low), high, values.count(high)]
            else:
                bounds = [0, 0, 0, 0]
            self._bounds.append(bounds)
        self._totals = [0.0] * len(hosts)
        for i in live:
            self._totals[i] = self._total(i)
        self._keys = sorted((-self._totals[i], i) for i in live)
        self._lost = set(lost)
        self._fresh = True

    def _norm(self, k, value):
        low, _lc, high, _hc = self._bounds[k]
        span = high - low
        return 0.0 if span == 0 else (value - low) / span

    def _total(self, i):
        return sum(self.mult[k][i] * self._norm(k, self.raw[k][i]) for k in range(len(self.active)))

    # -- one host changed ----------------------------------------------------

    def update(self, host):
        i = self.index[host.uuid]
        old = [self.raw[k][i] for k in range(len(self.active))]
        super().update(host)
        if not self._fresh or host.uuid in self._lost:
            return
        for k in range(len(self.active)):
            if not self._track(k, old[k], self.raw[k][i]):
                self._fresh = False  # a bound moved: recompute at the next rank
                return
        total = self._total(i)
        keys = self._keys
        pos = bisect.bisect_left(keys, (-self._totals[i], i))
        del keys[pos]
        self._totals[i] = total
        bisect.insort(keys, (-total, i))

    def _track(self, k, old, new):
        """Move host counts on the bounds of weigher ``k``; False when a
        bound itself moves."""
        if old == new:
            return True
        bounds = self._bounds[k]
        low, low_count, high, high_count = bounds
        if new > high or (self.minvals[k] is None and new < low):
            return False
        if old == high:
            if high_count == 1:
                return False
            bounds[3] -= 1
        if self.minvals[k] is None and old == low:
            if low_count == 1:
                return False
            bounds[1] -= 1
        if new == high:
            bounds[3] += 1
        if self.minvals[k] is None and new == low:
            bounds[1] += 1
        return True

    # -- a decision ----------------------------------------------------------

    def rank(self, lost):
        if not self._fresh or self._lost != lost:
            self._rebuild(lost)
        return _View(self)

    def available(self, ranked, spec, merge, subset, rng, group=None):
        return ranked.available(lambda h: batching.fitting(h, spec, merge), subset, rng, group)

    def alternates_order(self, ranked):
        return ranked.hosts_prefix()

    def parts(self, i):
        names = [w.name for w, _m in self.active]
        return {
            names[k]: self.mult[k][i] * self._norm(k, self.raw[k][i])
            for k in range(len(self.active))
        }


class _View:
    """The ranking at one decision: iterable best first as (weight, parts,
    host) like ``batching.Ranker.rank``'s list (parts only for the first
    ``top``), sliceable from the start, and what a decision needs cheaply."""

    def __init__(self, ranker):
        self.ranker = ranker

    def __len__(self):
        return len(self.ranker._keys)

    def __iter__(self):
        r = self.ranker
        for n, (neg, i) in enumerate(list(r._keys)):
            yield (-neg, r.parts(i) if n < r.top else None, r.hosts[i])

    def __getitem__(self, item):
        if not isinstance(item, slice) or item.start not in (None, 0) or item.step not in (None, 1):
            raise TypeError("a ranking view slices from its start only")
        r = self.ranker
        stop = len(r._keys) if item.stop is None else item.stop
        return [
            (-neg, r.parts(i) if n < r.top else None, r.hosts[i])
            for n, (neg, i) in enumerate(r._keys[:stop])
        ]

    def hosts_prefix(self, count=ALTERNATES_PREFIX):
        r = self.ranker
        return [r.hosts[i] for _neg, i in r._keys[:count]]

    def available(self, fitting, subset, rng, group=None):
        """[(weight, allocation request, host)] for ``_pick``: the usable
        hosts tied at the best weight when there are at least ``subset`` of
        them, ``subset`` of those drawn at random (uniform, as shuffling
        the ties would); otherwise the first usable hosts in order, at least
        ``subset`` and every one tied with the best, as
        ``batching._available`` returns. ``fitting(host)``: its allocation
        request that fits, or None."""
        r = self.ranker
        keys = r._keys
        out = []
        start = 0
        # Skip the hosts that cannot take it, best first, to the best usable.
        while start < len(keys):
            host = r.hosts[keys[start][1]]
            if group is None or group.allows(host.uuid):
                areq = fitting(host)
                if areq is not None:
                    out.append((-keys[start][0], areq, host))
                    break
            start += 1
        if not out:
            return out
        best = keys[start][0]
        end = bisect.bisect_right(keys, (best, len(r.hosts)))
        tied = end - start
        if tied > TIE_DRAWS and subset < tied:
            seen = set()
            for _draw in range(TIE_DRAWS):
                if len(out) >= subset + 1:
                    break
                pos = rng.randrange(start, end)
                if pos in seen:
                    continue
                seen.add(pos)
                host = r.hosts[keys[pos][1]]
                if group is not None and not group.allows(host.uuid):
                    continue
                areq = fitting(host)
                if areq is not None:
                    out.append((-keys[pos][0], areq, host))
            if len(out) >= subset + 1:
                # Only the drawn ones (the first was found by position, not
                # drawn), so every usable tied host had the same chance.
                return out[1:]
        # Few ties, or the draws found too few: look in order, as alone.
        out = out[:1]
        for pos in range(start + 1, len(keys)):
            neg, i = keys[pos]
            if len(out) >= subset and -neg < out[0][0]:
                break
            host = r.hosts[i]
            if group is not None and not group.allows(host.uuid):
                continue
            areq = fitting(host)
            if areq is not None:
                out.append((-neg, areq, host))
        return out
