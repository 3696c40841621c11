"""Batch scheduling: concurrent select_destinations calls share one walk.

A scheduler-worker's executor threads hand the calls they receive to a
``Batcher`` (the queue, below); whoever finds a free batch slot takes what
has arrived (up to ``[scheduler] batch_size``) and runs ``schedule_batch``:

1. group the requests by what makes one candidate walk valid for all of
   them: everything but their ids, instances and resource amounts (same
   resource classes, traits, aggregates, workload class, cell, zone, node
   selector, project...). A group walks the candidates once, asking for the
   smallest amount of each class any member needs, so every host that fits
   any member is read (and filtered, once);
2. place the members one after the other, instance by instance, on that
   walk: each sees what the earlier ones took (assumed usage, kept in the
   host states), the weighers rank again as capacity is consumed (raw
   values are recomputed for the one host that changed), the herding
   defences apply as alone (shuffled ties, ``host_subset_size``), and a
   host is usable for a member only when its own amounts still fit;
3. claim the group in one ``POST /allocations`` (all or none). When it
   loses (409: another worker took the capacity, or placement refuses an
   amount the summaries cannot show, e.g. max_unit), each member claims its
   own instances in one POST; a member that loses again is scheduled alone.

Anything a batch cannot decide for a member (no host left for it in the
walk, an error, placement unreachable) sends that member back to its own
thread to be scheduled alone, exactly as without batching, so each caller
gets the answer (selections, NoValidHost with its per-filter explanation,
ConsumerInUse...) it would have got alone. Placement stays the arbiter:
assumed usage only saves round trips, every claim is checked there.

A request naming a server group with a hard policy (affinity,
anti-affinity) joins a batch with the group as its own thread read it
(``GET /server_groups/{uuid}``): the walk is shared, the group's rule is
applied to that member's picks (one view per group in a batch, so two
members of one group see each other), and its claims carry the group, which
placement checks in the same write. Soft policies (their weighers rank per
group) and same_host / different_host hints (lookups of their own) never
enter a batch.
"""

import dataclasses
import json
import logging
import random
import threading
import time

from joule import placement_client
from joule import request_spec as spec_mod
from scheduler import alternates as alternates_mod
from scheduler import request_state
from scheduler import server_groups
from scheduler import weighers as weighers_mod
from scheduler.report import Report
from scheduler.weighers.normalize import normalize

LOG = logging.getLogger(__name__)

# Outcomes of a request in a batch.
PLACED = "placed"  # value: the selections
ERROR = "error"  # value: the SchedulerError to raise
ALONE = "alone"  # value: None; schedule it alone

HARD_POLICIES = (server_groups.AFFINITY, server_groups.ANTI_AFFINITY)

# Walk statistics a member's report takes from its group's walk.
_WALK_FIELDS = (
    "pages_fetched",
    "candidates_seen",
    "hosts_seen",
    "filters",
    "removed_per_filter",
    "hosts_after_filters",
    "placement_excluded",
)


def may_batch(spec):
    """Whether ``spec`` may share a walk at all: no instance hints (its
    server group, if any, is still to be looked at: ``batchable``)."""
    hints = spec.scheduler_hints
    return not hints.same_host and not hints.different_host


def batchable(spec, group=None):
    """Whether ``spec`` may share a walk: no instance hints, and no server
    group unless ``group`` (its loaded view) has a hard policy."""
    if not may_batch(spec):
        return False
    if spec.server_group is None:
        return True
    return group is not None and group.policy in HARD_POLICIES


def merges_amounts(spec):
    """Only the unnumbered group: each of its classes comes from one provider
    of an allocation request, so another amount of it is the same request
    with that number changed."""
    return not spec.groups


def group_key(spec):
    """Requests with equal keys can share one walk."""
    data = spec_mod.dump_request_spec(spec)
    # The server group is applied per member, on the shared walk.
    for name in ("request_id", "instance_uuids", "num_instances", "server_group"):
        data.pop(name, None)
    if merges_amounts(spec):
        data["resources"] = sorted(spec.resources)
    return json.dumps(data, sort_keys=True, default=str)


def retarget(areq, resources):
    """``areq`` with the unnumbered group's amounts set to ``resources``."""
    return {
        **areq,
        "allocations": {
            rp: {
                **entry,
                "resources": {
                    rc: resources.get(rc, amount) for rc, amount in entry["resources"].items()
                },
            }
            for rp, entry in areq["allocations"].items()
        },
    }


def usable_for(host, spec, merge):
    """The first allocation request of ``host`` that fits ``spec`` now, or None."""
    areq = fitting(host, spec, merge)
    if areq is not None and merge:
        return retarget(areq, spec.resources)
    return areq


def fitting(host, spec, merge):
    """The first of ``host``'s allocation requests that fits ``spec`` now, as
    the walk returned it (not yet retargeted to the spec's amounts: a
    decision looks at many hosts and takes one)."""
    if not merge:
        return host.usable_request()
    wanted = spec.resources
    providers = host.providers
    for areq in host.allocation_requests:
        for rp, entry in areq["allocations"].items():
            have = providers.get(rp)
            if have is None:
                continue  # a sharing provider outside the tree: placement decides
            if any(
                (cap_used := have.get(rc)) is not None
                and cap_used[1] + wanted.get(rc, amount) > cap_used[0]
                for rc, amount in entry["resources"].items()
            ):
                break
        else:
            return areq
    return None


class Ranker:
    """The weighers' ranking of a walk's hosts, kept up to date as a batch
    consumes capacity: raw values are computed once per host and again only
    for a host that changed; normalization and totals are redone per
    decision, as ``weighers.weigh_hosts`` does (same values, same order)."""

    def __init__(self, state, weighers, top=16):
        self.state = state
        self.top = top  # how many of the best carry their per-weigher parts
        self.active = [
            (w, m) for w, m in weighers if getattr(w, "applies", None) is None or w.applies(state)
        ]
        self.hosts = []
        self.index = {}
        self.raw = [[] for _ in self.active]
        self.mult = [[] for _ in self.active]

    def add(self, hosts):
        for host in hosts:
            self.index[host.uuid] = len(self.hosts)
            self.hosts.append(host)
            for k, (weigher, multiplier) in enumerate(self.active):
                self.raw[k].append(weigher.raw(host, self.state))
                key = weighers_mod.MULTIPLIER_LABEL_PREFIX + weigher.multiplier_option
                self.mult[k].append(weighers_mod.host_multiplier(host, key, multiplier))

    def update(self, host):
        i = self.index[host.uuid]
        for k, (weigher, _m) in enumerate(self.active):
            self.raw[k][i] = weigher.raw(host, self.state)

    def rank(self, lost):
        """[(weight, parts, host)] best first; ``parts`` only for the first
        few (the report's), the rest None."""
        idx = [i for i, h in enumerate(self.hosts) if h.uuid not in lost]
        totals = [0.0] * len(idx)
        norms = []
        for k, (weigher, _m) in enumerate(self.active):
            raw, mult = self.raw[k], self.mult[k]
            values = normalize([raw[i] for i in idx], minval=getattr(weigher, "minval", None))
            weighted = [mult[i] * v for i, v in zip(idx, values, strict=True)]
            norms.append(weighted)
            totals = [t + w for t, w in zip(totals, weighted, strict=True)]
        order = sorted(range(len(idx)), key=totals.__getitem__, reverse=True)
        names = [w.name for w, _m in self.active]
        out = []
        for n, j in enumerate(order):
            parts = {names[k]: norms[k][j] for k in range(len(names))} if n < self.top else None
            out.append((totals[j], parts, self.hosts[idx[j]]))
        return out

    def available(self, ranked, spec, merge, subset, rng, group=None):
        """What ``worker._pick`` chooses from for ``spec`` (``_available``)."""
        return _available(ranked, spec, merge, subset, group)

    def alternates_order(self, ranked):
        """The hosts a decision keeps, best first, for its alternates."""
        return [h for _w, _p, h in ranked]


@dataclasses.dataclass
class _Member:
    spec: object
    report: object
    rng: object
    picks: list = dataclasses.field(default_factory=list)  # (instance, host, areq, ranked)
    outcome: tuple | None = None
    claimed: bool = False  # its picks are claimed in placement
    group: object = None  # its server group's view (hard policies only)


def schedule_batch(sched, specs, views=None):
    """Place ``specs`` (batchable RequestSpecs) together; return one outcome
    per spec, in order: (PLACED, selections) | (ERROR, exc) | (ALONE, None).
    ``views``: the server group view of each spec (or None), as loaded."""
    members = [_Member(s, Report(s), sched._rng or random.Random(s.request_id)) for s in specs]
    shared = {}
    for m, view in zip(members, views or [None] * len(members), strict=True):
        if view is not None:
            # One view per group in the batch: members see each other's picks.
            m.group = shared.setdefault(view.uuid, view)
    groups = {}
    for m in members:
        groups.setdefault(group_key(m.spec), []).append(m)
    for key, group in groups.items():
        try:
            _schedule_group(sched, group, key)
        except Exception:  # noqa: BLE001 - whatever it was, each member tries alone
            LOG.exception("batch of %d request(s) failed; scheduling them alone", len(group))
            for m in group:
                if m.claimed:
                    # Claimed but not answered: release, then alone.
                    _release(sched, [p[0] for p in m.picks])
                m.claimed = False
                m.outcome = (ALONE, None)
    reports = []
    for m in members:
        if m.outcome is None:
            m.outcome = (ALONE, None)
        if m.outcome[0] == PLACED:
            sched.stats["requests"] += 1
            sched.stats["placed"] += 1
            reports.append((m.spec, m.report.finish("placed")))
        elif m.outcome[0] == ERROR:
            sched.stats["requests"] += 1
            sched.stats["failed"] += 1
            m.outcome[1].report = m.report.finish("error", str(m.outcome[1]))
            reports.append((m.spec, m.outcome[1].report))
    try:
        sched._write_reports(reports)
    except Exception:  # noqa: BLE001 - reports are for operators; the claims stand
        LOG.exception("scheduling reports of a batch not written")
    return [m.outcome for m in members]


def _schedule_group(sched, group, key=None):
    first = group[0].spec
    merge = merges_amounts(first)
    resources = dict(first.resources)
    if merge:
        for m in group[1:]:
            for rc, amount in m.spec.resources.items():
                resources[rc] = min(resources[rc], amount)
    instances = tuple(i for m in group for i in m.spec.instance_uuids)
    cache = sched.host_cache
    if cache is None or not cache.enabled or key is None:
        _walk_and_place(sched, group, key, resources, instances, merge, None, None)
        return
    # The kind's walk, or the right to walk it: a concurrent batch of the
    # same kind waits for this one instead of reading the same pages.
    entry = cache.take(key, resources)
    try:
        entry = _walk_and_place(sched, group, key, resources, instances, merge, cache, entry)
    finally:
        if entry is None:
            cache.put(key, None)
        else:
            cache.put(key, entry[0], keep=entry[1])


def _walk_and_place(sched, group, key, resources, instances, merge, cache, entry):
    """Walk (unless ``entry`` is a kept walk), place and claim ``group``;
    return (entry, whether to keep it) when ``cache`` keeps walks, else None."""
    from scheduler import worker as worker_mod

    first = group[0].spec
    if entry is None:
        if merge and cache is not None:
            resources = cache.walk_amounts(key, resources)
        walk_spec = dataclasses.replace(first, resources=resources, instance_uuids=instances)
        state = request_state.RequestState(walk_spec)
        walk_report = Report(walk_spec)
        try:
            # A walk that is kept reads every page: it is paid once per kind
            # per host_cache_seconds, and every batch placed on it has the
            # whole cluster in view. (A capped window kept for seconds would
            # have each worker fill its own fifth of the cluster meanwhile.)
            walk = worker_mod._Walk(sched, state, walk_report, cap=0 if cache else None)
            walk.fill()
        except worker_mod.SchedulerError:
            for m in group:
                m.outcome = (ALONE, None)
            return None
        # A kept walk holds the whole cluster for many batches: its ranking
        # is updated per decision (scheduler.incremental_rank).
        from scheduler.incremental_rank import IncrementalRanker  # it builds on Ranker

        ranker = (IncrementalRanker if cache else Ranker)(
            state, sched.weighers, sched.conf.filter_scheduler.report_top_hosts
        )
        ranker.add(walk.passed)
        walk_data = {n: walk_report.data[n] for n in _WALK_FIELDS if n in walk_report.data}
        if cache is not None:
            from scheduler import host_cache

            entry = host_cache.Entry(
                walk,
                ranker,
                walk_data,
                resources,
                cache.clock(),
                ttl=cache.life(key, walk.passed),
            )
    else:
        walk, ranker, walk_data = entry.walk, entry.ranker, entry.walk_data
    for m in group:
        m.report.data.update(walk_data)
        m.report.data["batch"] = {"requests": len(group), "instances": len(instances)}
        if entry is not None and entry.batches:
            # Placed on a walk an earlier batch read (scheduler.host_cache).
            m.report.data["batch"]["cached_walk"] = {
                "age_s": round(cache.clock() - entry.born, 3),
                "batches": entry.batches,
            }
    planned = _place_group(sched, group, walk, ranker, merge)
    if entry is None:
        return None
    # Keep the view only when everything planned on it was claimed: a lost
    # race, a refused or an unanswered claim says it is stale (and its
    # assumed usage holds plans that were not made).
    return entry, all(m.claimed for m in planned)


def _place_group(sched, group, walk, ranker, merge):
    """Plan, claim and answer ``group`` on ``walk``; return the planned members."""
    from scheduler import worker as worker_mod

    lost = set()
    planned = []
    for m in group:
        if _plan(sched, m, walk, ranker, lost, merge):
            planned.append(m)
        else:
            m.outcome = (ALONE, None)
    _claim(sched, planned, lost)
    max_attempts = sched.conf.scheduler.max_attempts
    for m in planned:
        if m.outcome is not None:
            continue
        selected = {host.uuid for _i, host, _a, _r in m.picks}
        result = []
        for instance, host, areq, ranked in m.picks:
            alts = alternates_mod.pick(
                ranked,
                host,
                selected | lost,
                max_attempts,
                usable=lambda h, m=m: _usable_alternate(h, m, merge),
            )
            m.report.claimed(instance, host, alts)
            result.append(
                [worker_mod._selection(instance, host, areq, True)]
                + [worker_mod._selection(instance, h, a, False) for h, a in alts]
            )
        m.outcome = (PLACED, result)
    return planned


def _usable_alternate(host, m, merge):
    if m.group is not None and not m.group.allows(host.uuid):
        return None
    return usable_for(host, m.spec, merge)


def _plan(sched, m, walk, ranker, lost, merge):
    """Pick a host for each instance of ``m`` on the walk (assumed usage);
    False (nothing kept) when one does not fit any more."""
    subset = sched.conf.filter_scheduler.host_subset_size
    for n, instance in enumerate(m.spec.instance_uuids):
        while True:
            ranked = ranker.rank(lost)
            available = ranker.available(ranked, m.spec, merge, subset, m.rng, m.group)
            if available or walk.done:
                break
            # A capped walk stopped early and its hosts are used up: read on.
            new = walk.fill(more=True)
            ranker.add(new)
        if not available:
            for _i, host, areq, _r in reversed(m.picks):
                host.release(areq)
                ranker.update(host)
                if m.group is not None:
                    m.group.per_host[host.uuid] -= 1
            m.picks = []
            return False
        if n == 0:
            m.report.top(ranked, sched.conf.filter_scheduler.report_top_hosts)
        _w, areq, host = sched._pick(available, m.rng, subset)
        if merge:
            areq = retarget(areq, m.spec.resources)
        host.consume(areq)
        ranker.update(host)
        if m.group is not None:
            m.group.add(host.uuid)
        m.picks.append((instance, host, areq, ranker.alternates_order(ranked)))
    return True


def _available(ranked, spec, merge, subset, group=None):
    """[(weight, allocation request, host)] usable for ``spec``, best first:
    at least ``subset`` of them (when there are) and every one tied with
    the best, which is all ``_pick`` looks at. ``group``: the spec's server
    group view, whose hard policy rules hosts out. The allocation requests
    are as the walk returned them: the caller retargets the one it picks."""
    out = []
    for weight, _parts, host in ranked:
        if len(out) >= subset and weight < out[0][0]:
            break
        if group is not None and not group.allows(host.uuid):
            continue
        areq = fitting(host, spec, merge)
        if areq is not None:
            out.append((weight, areq, host))
    return out


def _claims_of(m):
    s = m.spec
    return [
        (instance, areq, s.project_id, s.user_id, s.workload_class, s.consumer_type, s.server_group)
        for instance, _host, areq, _r in m.picks
    ]


def _claim(sched, planned, lost):
    """Claim every planned member: one POST for all, then one per member;
    a member whose own POST loses goes alone (its plan is dropped)."""
    from scheduler import worker as worker_mod

    if not planned:
        return
    claims = [c for m in planned for c in _claims_of(m)]
    try:
        sched.client.post_allocations(claims)
        for m in planned:
            m.claimed = True
        return
    except placement_client.Conflict:
        sched.stats["batch_conflicts"] = sched.stats.get("batch_conflicts", 0) + 1
    except (placement_client.PlacementUnreachable, placement_client.AuthenticationFailed):
        # The write may or may not have happened: release, then each alone.
        _release(sched, [c[0] for c in claims])
        for m in planned:
            m.picks = []
            m.outcome = (ALONE, None)
        return
    except placement_client.PlacementError as exc:
        LOG.warning("batch claim refused (%s); claiming per request", exc)
    if len(planned) == 1:
        # Its own POST was the one just refused.
        _lost(sched, planned[0], lost, worker_mod)
        return
    for m in planned:
        for attempt in range(worker_mod.GENERATION_RETRIES + 1):
            try:
                sched.client.post_allocations(_claims_of(m))
                m.claimed = True
                break
            except placement_client.Conflict as exc:
                if exc.consumer_conflict:
                    # Nothing of it was written (all or none).
                    m.outcome = (
                        ERROR,
                        worker_mod.ConsumerInUse(
                            f"an instance of request {m.spec.request_id} already holds "
                            f"allocations (consumer generation conflict); release them "
                            f"before scheduling it again"
                        ),
                    )
                    m.picks = []
                    break
                if (
                    exc.code == worker_mod.CONCURRENT_UPDATE
                    and attempt < worker_mod.GENERATION_RETRIES
                ):
                    time.sleep(m.rng.uniform(0, 0.05 * (attempt + 1)))
                    continue
                _lost(sched, m, lost, worker_mod)
                break
            except (placement_client.PlacementUnreachable, placement_client.AuthenticationFailed):
                _release(sched, [c[0] for c in _claims_of(m)])
                m.picks = []
                m.outcome = (ALONE, None)
                break
            except placement_client.PlacementError:
                m.picks = []
                m.outcome = (ALONE, None)
                break


def _lost(sched, m, lost, worker_mod):
    """``m``'s claim lost a race: its hosts are not offered again in this
    batch, and it is scheduled alone (a fresh walk, single claims)."""
    for _i, host, _areq, _r in m.picks:
        lost.add(host.uuid)
    sched.stats["races_lost"] += 1
    m.picks = []
    m.outcome = (ALONE, None)


def _release(sched, consumers):
    for consumer in consumers:
        try:
            sched.client.delete_allocations(consumer)
        except placement_client.PlacementError as exc:
            LOG.error("could not release the claim of %s: %s", consumer, exc)


class _Item:
    __slots__ = ("spec", "group", "outcome", "done")

    def __init__(self, spec, group):
        self.spec = spec
        self.group = group
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

    def submit_many(self, pairs):
        """Queue several (spec, group) at once (a bulk call's requests) and
        block until each has its outcome; the outcomes, in order. They join
        the same batches as single calls' specs."""
        items = [_Item(spec, group) for spec, group in pairs]
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
