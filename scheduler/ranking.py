"""Stage 3: the weighers' ranking of a walk's hosts, kept up to date per decision.

Raw values are computed once per host and again only for a host that took
an instance; each weigher's values are min-max normalized over the hosts
still in play (scheduler.weighers.normalize), times its multiplier (the
host's own from a node label, else the configured one), summed per host:
nova's formula, the numbers ``weighers.weigh_hosts`` gives. A decision costs
about the hosts it looks at, not the cluster:

- totals are kept per host, with a sorted index of (-total, position), so
  equal totals keep placement's order (a stable sort);
- ``update(host)`` recomputes that host's raw values; while every weigher's
  bounds (its minimum, unless it has a fixed one, and its maximum, tracked
  with how many hosts sit on them) stay where they were, only that host's
  total moves, re-inserted in the index; when a bound moves, everything is
  recomputed once, at the next ``rank``;
- ``rank(excluded)`` leaves hosts out of the normalization (lost races, a
  hard server group's ruled-out hosts); a different set recomputes;
- a decision among more than TIE_DRAWS hosts tied at the best weight draws
  at random among them instead of collecting all of them (on a cluster of
  identical hosts every host ties). A uniform draw among the usable tied
  hosts is what shuffling them and picking one does, so nova's herding
  defence (scheduler.picking) is the same;
- with other scheduler workers on the claim feed, a decision takes a host of
  its own share within NEAR_TIE of the best before the best itself, so
  workers placing from views that agree do not all race for one host.
"""

import bisect

from scheduler import weighers as weighers_mod
from scheduler.weighers.normalize import bounds as value_bounds
from scheduler.weighers.normalize import scale
from scheduler.weighers.normalize import scale_all

# The hosts a decision keeps, best first, for the alternates of its instance
# (alternates.pick walks them until it has max_attempts - 1 in the cell).
ALTERNATES_PREFIX = 256
# Random draws among tied hosts before falling back to looking at them in
# order (a tie of mostly full hosts).
TIE_DRAWS = 64
# With other scheduler workers on the claim feed, a host of this worker's
# share (scheduler.host_cache.Share) within NEAR_TIE of the best weight is
# taken before a better one outside it, looking at most NEAR_SCAN hosts
# down the ranking: workers placing the same kind of request from views
# that agree would otherwise all take the one best host and all but one
# lose the race for it. NEAR_TIE is 1 % of one weigher's normalized range
# (at a multiplier of 1), chosen, not tuned: with 4 workers the races fell
# from 7-12 to 5.5-5.7 per 1,000 (docs/benchmarks.md).
NEAR_TIE = 0.01
NEAR_SCAN = 16


class Ranker:
    """The ranking of the hosts ``add``ed, for the request ``state`` (the
    weighers' raw values read it); ``top``: how many of the best carry their
    per-weigher parts (the scheduling report's)."""

    def __init__(self, state, weighers, top=16):
        self.state = state
        self.top = top
        self.active = [
            (w, m) for w, m in weighers if getattr(w, "applies", None) is None or w.applies(state)
        ]
        self.names = [w.name for w, _m in self.active]
        # The node label that overrides each weigher's multiplier.
        self.label_keys = [
            weighers_mod.MULTIPLIER_LABEL_PREFIX + w.multiplier_option for w, _m in self.active
        ]
        self.minvals = [getattr(w, "minval", None) for w, _m in self.active]
        self.hosts = []
        self.index = {}
        self.raw = [[] for _ in self.active]
        self.mult = [[] for _ in self.active]
        self.excluded = None  # the set the index was built for
        self.totals = []
        self.keys = []  # sorted [(-total, position)] of the hosts in play
        self.bounds = []  # per weigher: [low, low count, high, high count]
        self.fresh = False
        # How many of a decision's best hosts its alternates are drawn from
        # (None: all; a walk kept for many batches keeps ALTERNATES_PREFIX).
        self.alternates_prefix = None
        # Among hosts tied at the best weight, the ones this worker draws
        # first (scheduler.host_cache.Share: a uuid -> bool), or None.
        self.prefers = None

    # -- hosts ---------------------------------------------------------------

    def add(self, hosts):
        # Column by column: a kept walk adds the whole cluster at once.
        for host in hosts:
            self.index[host.uuid] = len(self.hosts)
            self.hosts.append(host)
        state = self.state
        host_multiplier = weighers_mod.host_multiplier
        for k, (weigher, multiplier) in enumerate(self.active):
            raw = weigher.raw
            self.raw[k].extend([raw(host, state) for host in hosts])
            key = self.label_keys[k]
            self.mult[k].extend([host_multiplier(host, key, multiplier) for host in hosts])
        if hosts:
            self.fresh = False

    def update(self, host):
        """``host`` took (or gave back) capacity: its raw values again."""
        i = self.index[host.uuid]
        old = [self.raw[k][i] for k in range(len(self.active))]
        for k, (weigher, _m) in enumerate(self.active):
            self.raw[k][i] = weigher.raw(host, self.state)
        if not self.fresh or host.uuid in self.excluded:
            return
        for k in range(len(self.active)):
            if not self._track(k, old[k], self.raw[k][i]):
                self.fresh = False  # a bound moved: recompute at the next rank
                return
        keys = self.keys
        del keys[bisect.bisect_left(keys, (-self.totals[i], i))]
        self.totals[i] = self._total(i)
        bisect.insort(keys, (-self.totals[i], i))

    # -- the ranking ---------------------------------------------------------

    def rank(self, excluded):
        """The ranking of every host not in ``excluded`` (uuids), a View."""
        if not self.fresh or self.excluded != excluded:
            self._rebuild(excluded)
        return View(self)

    def parts(self, i):
        """Host ``i``'s weighted part per weigher."""
        return {
            self.names[k]: self.mult[k][i] * self._norm(k, self.raw[k][i])
            for k in range(len(self.active))
        }

    def _rebuild(self, excluded):
        live = [i for i, h in enumerate(self.hosts) if h.uuid not in excluded]
        self.bounds = []
        # Weigher by weigher over the live hosts, adding in the weighers'
        # order: the same sums as ``_total`` gives one host at a time.
        totals = [0.0] * len(self.hosts)
        for k in range(len(self.active)):
            raw = self.raw[k]
            values = [raw[i] for i in live]
            if not values:
                self.bounds.append([0, 0, 0, 0])
                continue
            low, high = value_bounds(values, self.minvals[k])
            self.bounds.append([low, values.count(low), high, values.count(high)])
            if high == low:
                continue  # every part is 0: no total moves
            mult = self.mult[k]
            for i, value in zip(live, scale_all(values, low, high), strict=True):
                totals[i] += mult[i] * value
        self.totals = totals
        self.keys = sorted((-totals[i], i) for i in live)
        self.excluded = set(excluded)
        self.fresh = True

    def _norm(self, k, value):
        low, _low_count, high, _high_count = self.bounds[k]
        return scale(value, low, high)

    def _total(self, i):
        return sum(self.mult[k][i] * self._norm(k, self.raw[k][i]) for k in range(len(self.active)))

    def _track(self, k, old, new):
        """Move host counts on the bounds of weigher ``k``; False when a
        bound itself moves."""
        if old == new:
            return True
        fixed_low = self.minvals[k] is not None
        bounds = self.bounds[k]
        low, low_count, high, high_count = bounds
        if new > high or (not fixed_low and new < low):
            return False
        if old == high:
            if high_count == 1:
                return False
            bounds[3] -= 1
        if not fixed_low and old == low:
            if low_count == 1:
                return False
            bounds[1] -= 1
        if new == high:
            bounds[3] += 1
        if not fixed_low and new == low:
            bounds[1] += 1
        return True


class View:
    """The ranking at one decision: iterable best first as (weight, parts,
    host) (parts only for the first ``top``), sliceable from the start, and
    what a decision needs cheaply."""

    def __init__(self, ranker):
        self.ranker = ranker

    def __len__(self):
        return len(self.ranker.keys)

    def __iter__(self):
        return iter(self[:])

    def __getitem__(self, item):
        if not isinstance(item, slice) or item.start not in (None, 0) or item.step not in (None, 1):
            raise TypeError("a ranking view slices from its start only")
        r = self.ranker
        keys = r.keys if item.stop is None else r.keys[: item.stop]
        return [
            (-neg, r.parts(i) if n < r.top else None, r.hosts[i]) for n, (neg, i) in enumerate(keys)
        ]

    def hosts_prefix(self, count=ALTERNATES_PREFIX):
        """The best ``count`` hosts, for a decision's alternates."""
        r = self.ranker
        return [r.hosts[i] for _neg, i in r.keys[:count]]

    def available(self, fitting, subset, rng, allows=None):
        """[(weight, allocation request, host)] a pick chooses from: the
        usable hosts tied at the best weight when there are more than
        TIE_DRAWS of them, ``subset`` of those drawn at random; otherwise the
        first usable hosts in order, at least ``subset`` and every one tied
        with the best (all a pick looks at), led by a host of this worker's
        share within NEAR_TIE of the best when the best is not in it (with
        other workers on the claim feed only). ``fitting(host)``: its
        allocation request that fits, or None; ``allows(uuid)``: whether a
        hard server group lets the host take one more."""
        r = self.ranker
        keys = r.keys

        def usable(pos):
            neg, i = keys[pos]
            host = r.hosts[i]
            if allows is not None and not allows(host.uuid):
                return None
            areq = fitting(host)
            return None if areq is None else (-neg, areq, host)

        start = 0
        while start < len(keys) and (first := usable(start)) is None:
            start += 1
        if start == len(keys):
            return []
        end = bisect.bisect_right(keys, (keys[start][0], len(r.hosts)))
        if end - start > TIE_DRAWS and subset < end - start:
            drawn = None
            if r.prefers is not None:
                # This worker's share of the ties first: concurrent workers
                # draw from disjoint shares instead of racing.
                prefers, hosts = r.prefers, r.hosts
                drawn = _draw(
                    lambda pos: usable(pos) if prefers(hosts[keys[pos][1]].uuid) else None,
                    start,
                    end,
                    subset,
                    rng,
                )
            if drawn is None:
                drawn = _draw(usable, start, end, subset, rng)
            if drawn is not None:
                return drawn
        out = [first]
        for pos in range(start + 1, len(keys)):
            if len(out) >= subset and -keys[pos][0] < out[0][0]:
                break
            item = usable(pos)
            if item is not None:
                out.append(item)
        if r.prefers is not None and not r.prefers(first[2].uuid):
            near = self._near_preferred(usable, start, first[0])
            if near is not None:
                return [near] + [item for item in out if item[2] is not near[2]]
        return out

    def _near_preferred(self, usable, start, best):
        """The first usable host of this worker's share ranked within
        NEAR_TIE of ``best`` (at most NEAR_SCAN hosts down), or None."""
        r = self.ranker
        keys, prefers, hosts = r.keys, r.prefers, r.hosts
        for pos in range(start + 1, min(start + 1 + NEAR_SCAN, len(keys))):
            neg, i = keys[pos]
            if -neg < best - NEAR_TIE:
                return None
            if prefers(hosts[i].uuid):
                item = usable(pos)
                if item is not None:
                    return item
        return None


def _draw(usable, start, end, subset, rng):
    """``subset`` usable hosts drawn at random between ``start`` and
    ``end`` (the tied ones), or None when TIE_DRAWS draws found too few
    (a tie of mostly full hosts: they are looked at in order instead)."""
    out = []
    seen = set()
    for _draw_number in range(TIE_DRAWS):
        if len(out) >= subset:
            return out
        pos = rng.randrange(start, end)
        if pos in seen:
            continue
        seen.add(pos)
        item = usable(pos)
        if item is not None:
            out.append(item)
    return out if len(out) >= subset else None
