"""Batch scheduling: requests that arrive together share one walk.

A scheduler worker's executor threads hand the calls they receive to a
``Batcher`` (scheduler.batcher); whoever finds a free batch slot takes what
has arrived (up to ``[scheduler] batch_size``) and runs ``schedule_batch``:

1. group the requests by what makes one candidate walk valid for all of
   them: everything but their ids, instances and resource amounts (same
   resource classes, traits, aggregates, workload class, cell, zone, node
   selector, project...). A group walks the candidates once, asking for the
   smallest amount of each class any member needs, so every host that fits
   any member is read (and filtered, once);
2. run the group through the pipeline (scheduler.pipeline) on that walk:
   the members are placed one after the other, instance by instance, each
   seeing what the earlier ones took (assumed usage), a host usable for a
   member only when its own amounts still fit, and claimed together in one
   ``POST /allocations`` (all or none); when that loses, each member in its
   own, and a member that loses again is scheduled alone.

Anything a batch cannot decide for a member (no host left for it in the
walk, an error, placement unreachable) sends that member back to its own
thread to be scheduled alone, exactly as without batching, so each caller
gets the answer (selections, NoValidHost with its per-filter explanation,
ConsumerInUse...) it would have got alone. Placement stays the arbiter:
assumed usage only saves round trips, every claim is checked there.

With ``[scheduler] host_cache_seconds`` a group places on its kind's kept
walk (scheduler.host_cache) instead of walking.

A request naming a server group with a hard policy (affinity,
anti-affinity) joins a batch with the group as its own thread read it: the
walk is shared, the group's rule is applied to that member's picks (one view
per group in a batch, so two members of one group see each other), and its
claims carry the group, which placement checks in the same write. Soft
policies (their weighers rank per group) and same_host / different_host
hints (lookups of their own) never enter a batch.
"""

import dataclasses
import logging

from joule import request_spec as spec_mod
from scheduler import claim_feed
from scheduler import host_cache as host_cache_mod
from scheduler import pipeline
from scheduler import ranking
from scheduler import request_state
from scheduler.errors import SchedulerError
from scheduler.report import Report

LOG = logging.getLogger(__name__)

# Outcomes of a request in a batch (scheduler.pipeline's).
PLACED = pipeline.PLACED
ERROR = pipeline.ERROR
ALONE = pipeline.ALONE

# Walk statistics a member's report takes from its group's walk.
WALK_FIELDS = (
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
    return group is not None and group.policy in pipeline.HARD_POLICIES


def merges_amounts(spec):
    """Only the unnumbered group: each of its classes comes from one provider
    of an allocation request, so another amount of it is the same request
    with that number changed."""
    return not spec.groups


def group_key(spec):
    """Requests with equal keys can share one walk (joule.request_spec.kind_key)."""
    return spec_mod.kind_key(spec_mod.dump_request_spec(spec))


def schedule_batch(sched, specs, views=None):
    """Place ``specs`` (batchable RequestSpecs) together; return one outcome
    per spec, in order: (PLACED, selections) | (ERROR, exc) | (ALONE, None).
    ``views``: the server group view of each spec (or None), as loaded."""
    members = _members(sched, specs, views)
    kinds = {}
    for m in members:
        kinds.setdefault(group_key(m.spec), []).append(m)
    for key, kind in kinds.items():
        try:
            _schedule_kind(sched, kind, key)
        except Exception:  # noqa: BLE001 - whatever it was, each member tries alone
            LOG.exception("batch of %d request(s) failed; scheduling them alone", len(kind))
            for m in kind:
                if m.claimed:
                    # Claimed but not answered: release, then alone.
                    pipeline.release_member(sched, m)
                m.claimed = False
                m.outcome = (ALONE, None)
    _finish(sched, members)
    return [m.outcome for m in members]


def _members(sched, specs, views):
    members = []
    shared = {}
    for spec, view in zip(specs, views or [None] * len(specs), strict=True):
        if view is not None:
            # One view per group in the batch: members see each other's picks.
            view = shared.setdefault(view.uuid, view)
        members.append(
            pipeline.Member(
                request_state.RequestState(spec, view),
                Report(spec),
                sched.rng_for(spec),
                merge=merges_amounts(spec),
            )
        )
    return members


def _finish(sched, members):
    """Count the outcomes and write the reports of those decided here."""
    reports = []
    for m in members:
        if m.outcome is None:
            m.outcome = (ALONE, None)
        kind, value = m.outcome
        if kind == PLACED:
            sched.stats["requests"] += 1
            sched.stats["placed"] += 1
            reports.append((m.spec, m.report.finish("placed")))
        elif kind == ERROR:
            sched.stats["requests"] += 1
            sched.stats["failed"] += 1
            value.report = m.report.finish("error", str(value))
            reports.append((m.spec, value.report))
    try:
        sched.write_reports(reports)
    except Exception:  # noqa: BLE001 - reports are for operators; the claims stand
        LOG.exception("scheduling reports of a batch not written")


def _schedule_kind(sched, kind, key):
    """One walk for the members of one kind: read now, or the kind's kept one."""
    first = kind[0].spec
    resources = dict(first.resources)
    if kind[0].merge:
        for m in kind[1:]:
            for rc, amount in m.spec.resources.items():
                resources[rc] = min(resources[rc], amount)
    cache = sched.host_cache
    if cache is None or not cache.enabled:
        _place(sched, kind, resources, None, None, key)
        return
    # The kind's walk, or the right to walk it: a concurrent batch of the
    # same kind waits for this one instead of reading the same pages.
    entry = cache.take(key, resources)
    if entry is not None:
        token = cache.refresh_due(key, entry)
        if token is not None:
            _refresh(sched, kind[0].spec, entry, key, token)
    kept = None
    try:
        kept = _place(sched, kind, resources, cache, entry, key)
    finally:
        if kept is None:
            cache.put(key, None)
        else:
            cache.put(key, kept[0], keep=kept[1])


def _place(sched, kind, resources, cache, entry, key):
    """Run ``kind`` through the pipeline on a walk (``entry``'s when it is
    a kept one); return (entry, whether to keep it) when ``cache`` keeps
    walks, else None."""
    opened = _source(sched, kind, resources, cache, entry, key)
    if opened is None:
        return None
    source, walk_data, resources = opened
    instances = sum(m.spec.num_instances for m in kind)
    for m in kind:
        _note_batch(m, walk_data, len(kind), instances, cache, entry)
    if cache is not None and entry is None:
        # Its life is judged from what placement said, before our plans.
        entry = host_cache_mod.Entry(
            source.walk,
            source.ranker,
            walk_data,
            resources,
            cache.clock(),
            shared=cache.shows_foreign(key, source.walk.passed),
        )
    if cache is not None:
        # With other workers on the feed, this worker draws its share of
        # equally good hosts first.
        source.ranker.prefers = cache.preference()
    planned = pipeline.run(sched, kind, source)
    if cache is None:
        return None
    # Keep the view only when everything planned on it was claimed: a lost
    # race, a refused or an unanswered claim says it is stale (and its
    # assumed usage holds plans that were not made). With other workers
    # feeding their claims, a lost race says only that one of their
    # messages is still on its way: the raced members are placed again on
    # the same view, without the hosts they lost on.
    keep = all(m.claimed for m in planned)
    raced = [m for m in planned if m.lost_picks is not None]
    if raced and len(raced) == sum(not m.claimed for m in planned) and cache.workers() > 1:
        keep = _again_after_races(sched, source, raced)
    # This walk holds its claims; this worker's walks of other kinds share
    # hosts with it and must show them too.
    cache.apply_claims(
        claim_feed.claims_of_picks([p for m in planned if m.claimed for p in m.picks]), skip=key
    )
    return entry, keep


def _again_after_races(sched, source, raced):
    """Give back the assumed usage of the ``raced`` members' lost picks and
    run them again on the same walk without those hosts; whether the walk
    is still worth keeping (every member planned again was claimed)."""
    lost = set()
    for m in raced:
        lost |= pipeline.take_back_lost(m, source.ranker)
    again = pipeline.run(sched, raced, source, lost=lost)
    sched.stats["replaced_after_race"] = sched.stats.get("replaced_after_race", 0) + sum(
        m.claimed for m in again
    )
    return all(m.claimed for m in again)


def _refresh(sched, spec, old, key, token):
    """Read the kind of ``old`` (a kept walk past REFRESH_AT of its life)
    again beside the batches (the cache's ``background``: a thread of its
    own), while they go on placing on ``old`` (scheduler.host_cache,
    ``refresh_due``)."""
    cache = sched.host_cache

    def read():
        entry = None
        try:
            born = cache.clock()
            resources = dict(old.resources)
            if merges_amounts(spec):
                resources = cache.walk_amounts(key, resources)
            source, walk_data = _walk(sched, spec, resources, cache)
            entry = host_cache_mod.Entry(
                source.walk,
                source.ranker,
                walk_data,
                resources,
                born,
                shared=cache.foreign_in(old, source.walk.passed),
            )
        except Exception as exc:  # noqa: BLE001 - the kept walk serves until it runs out
            LOG.warning("background walk of a kind of request failed: %s", exc)
        finally:
            cache.refreshed(key, token, entry)

    cache.background(read)


def _walk(sched, spec, resources, cache, instances=None):
    """(source, its walk's report fields): ``spec``'s kind walked now for
    ``resources`` (every page when ``cache`` keeps walks).

    :raise SchedulerError: walking failed.
    """
    if instances is None:
        instances = tuple(spec.instance_uuids)
    walk_spec = dataclasses.replace(spec, resources=resources, instance_uuids=instances)
    report = Report(walk_spec)
    # A walk that is kept reads every page: it is paid once per kind per
    # host_cache_seconds, and every batch placed on it has the whole cluster
    # in view. (A capped window kept for seconds would have each worker fill
    # its own fifth of the cluster meanwhile.)
    source = pipeline.Source(
        request_state.RequestState(walk_spec),
        report,
        cap=0 if cache is not None else None,
        alternates_prefix=ranking.ALTERNATES_PREFIX if cache is not None else None,
    )
    source.open(sched)
    return source, {n: report.data[n] for n in WALK_FIELDS if n in report.data}


def _source(sched, kind, resources, cache, entry, key):
    """(source, its walk's report fields, the amounts walked for): the kept
    ``entry``'s walk, or one read now (every page when it is to be kept);
    None when walking failed (each member then goes alone, where the
    failure is answered)."""
    if entry is not None:
        source = pipeline.Source(kept=(entry.walk, entry.ranker))
        return source, entry.walk_data, entry.resources
    if kind[0].merge and cache is not None:
        resources = cache.walk_amounts(key, resources)
    instances = tuple(i for m in kind for i in m.spec.instance_uuids)
    try:
        source, walk_data = _walk(sched, kind[0].spec, resources, cache, instances)
    except SchedulerError:
        for m in kind:
            m.outcome = (ALONE, None)
        return None
    return source, walk_data, resources


def _note_batch(m, walk_data, requests, instances, cache, entry):
    m.report.data.update(walk_data)
    m.report.data["batch"] = {"requests": requests, "instances": instances}
    if entry is not None and entry.batches:
        # Placed on a walk an earlier batch read (scheduler.host_cache).
        m.report.data["batch"]["cached_walk"] = {
            "age_s": round(cache.clock() - entry.born, 3),
            "batches": entry.batches,
        }
