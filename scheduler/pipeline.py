"""The scheduling pipeline: every request, alone or batched, through one place.

``run`` lists the stages in order; each is its own function or module:

1. walk the candidates (``GET /allocation_candidates`` pages -> host states,
   scheduler.walk), or take a walk kept from an earlier batch
   (scheduler.host_cache);
2. filter them, page by page as they arrive (scheduler.filters);
3. score and normalise: the weighers' raw values, min-max normalized, times
   multipliers (scheduler.ranking);
4. pick a host per instance, nova's herding defence, and consume its
   capacity in the host states at once (assumed usage, scheduler.picking);
5. reserve: claim in placement, retrying what placement gave up on
   (scheduler.claim.reserve); a lost race drops the host; no claim is
   written once the caller's deadline passed (Expired);
6. alternates for each instance, in the selected host's cell and zone,
   each with its own unclaimed allocation request (scheduler.alternates);
7. unreserve on failure: the request's claims released, newest first.

A single request is a batch of one on its own walk (``alone``): a lost race
drops that host and picks again for that instance, claims go one instance
at a time (the finest grain: the race says which host lost), and what does
not fit is NoValidHost with what each filter removed and why. Members of a
batch share a walk and claim together; anything the batch cannot decide for
a member (no host left for it, a lost race, placement unreachable) makes its
outcome ALONE: the caller runs it again through this pipeline, alone, on a
fresh walk, so it gets exactly the answer it would have got alone.
"""

import dataclasses
import logging
import time

from joule import placement_client
from joule import request_spec as spec_mod
from scheduler import alternates as alternates_mod
from scheduler import claim as claim_mod
from scheduler import claim_feed
from scheduler import explain
from scheduler import lookups
from scheduler import picking
from scheduler import ranking
from scheduler import server_groups
from scheduler.errors import ConsumerInUse
from scheduler.errors import Expired
from scheduler.errors import NoValidHost
from scheduler.errors import PlacementUnavailable
from scheduler.errors import SchedulerError
from scheduler.walk import CandidateWalk

LOG = logging.getLogger(__name__)

# Outcomes of a request in a run.
PLACED = "placed"  # value: the selections
ERROR = "error"  # value: the SchedulerError to raise
ALONE = "alone"  # value: None; run it again, alone, on a fresh walk
EXPIRED = "expired"  # value: None; its caller's deadline passed before it ran

HARD_POLICIES = (server_groups.AFFINITY, server_groups.ANTI_AFFINITY)


@dataclasses.dataclass
class Pick:
    instance: str
    host: object  # scheduler.hosts.HostState
    allocation_request: dict
    ranked: list  # the hosts of its decision, best first, for its alternates


@dataclasses.dataclass
class Member:
    """One request in a run."""

    state: object  # scheduler.request_state.RequestState: the spec and its lookups
    report: object  # scheduler.report.Report
    rng: object
    merge: bool = False  # placed with its own amounts on a walk asked for less
    picks: list = dataclasses.field(default_factory=list)
    outcome: tuple | None = None
    claimed: bool = False  # its picks are claimed in placement
    # The picks of a batch claim that lost a race (the member then goes
    # ALONE), kept so that a batch on a kept walk can give back their
    # assumed usage and place the member again (scheduler.batching).
    lost_picks: list | None = None
    # The caller's deadline (epoch seconds, its clock) or None: no claim is
    # written once it has passed (the request is Expired).
    deadline: float | None = None

    @property
    def spec(self):
        return self.state.spec


class Source:
    """Where a run's walk and ranking come from: read afresh for ``state``
    (``cap``: instead of max_placement_results), or ``kept`` ones."""

    def __init__(self, state=None, report=None, cap=None, kept=None, alternates_prefix=None):
        self.state = state
        self.report = report
        self.cap = cap
        self.walk, self.ranker = kept if kept is not None else (None, None)
        # A walk kept for many batches holds the whole cluster: a decision
        # keeps only its best hosts for alternates (None: all of them).
        self.alternates_prefix = alternates_prefix

    def open(self, sched):
        if self.walk is None:
            self.walk = CandidateWalk(sched, self.state, self.report, cap=self.cap)
            self.walk.fill()
            self.ranker = ranking.Ranker(
                self.state, sched.weighers, sched.conf.filter_scheduler.report_top_hosts
            )
            self.ranker.add(self.walk.passed)
            self.ranker.alternates_prefix = self.alternates_prefix
        return self.walk, self.ranker


def run(sched, members, source, alone=False, lost=None):
    """Place ``members`` through the stages, in order; return those planned
    (each with its outcome set). ``alone``: one request on its own walk,
    whose failures raise SchedulerError (NoValidHost, ConsumerInUse...).
    ``lost``: hosts not to offer (they lost a race before this run)."""
    walk, ranker = source.open(sched)  # 1. walk, 2. filter, 3. score and normalise
    # Hosts that lost a race in this run: never offered again here.
    lost = set() if lost is None else set(lost)
    planned = plan(sched, members, walk, ranker, lost, alone)  # 4. pick
    reserve(sched, planned, walk, ranker, lost, alone)  # 5. claim (7. unreserve on failure)
    for m in planned:
        if m.claimed:
            m.outcome = (PLACED, alternates(sched, m, lost))  # 6. alternates
    return planned


# -- 4. pick -----------------------------------------------------------------


def plan(sched, members, walk, ranker, lost, alone):
    """A host for every instance of each member (assumed usage); a member
    one of whose instances does not fit keeps nothing and goes ALONE (or,
    alone, is NoValidHost)."""
    planned = []
    for m in members:
        if alone and not walk.passed:
            raise NoValidHost(
                explain.no_valid_host(m.state, walk.seen, walk.records, walk.query, walk.excluded)
            )
        for n, instance in enumerate(m.spec.instance_uuids):
            pick = pick_one(sched, m, instance, walk, ranker, lost, report_top=n == 0)
            if pick is None:
                if alone:
                    # Said while the server group still holds the picks made.
                    raise NoValidHost(_partial(sched, m, n, walk, lost), placeable=n)
                unplan(m, ranker)
                m.outcome = (ALONE, None)
                break
            m.picks.append(pick)
        else:
            planned.append(m)
    return planned


def pick_one(sched, m, instance, walk, ranker, lost, report_top=False):
    """Stages 3-4 for one instance: rank, choose, consume; None when no host
    of the walk (read on while it has more pages) can take it."""
    conf = sched.conf.filter_scheduler
    group = _hard_group(m)
    allows = group.allows if group is not None else None
    while True:
        view = ranker.rank(_excluded(ranker, lost, group, own=ranker.state is m.state))
        available = view.available(
            lambda h: picking.fitting(h, m.spec, m.merge), conf.host_subset_size, m.rng, allows
        )
        if available or walk.done:
            break
        # A capped walk stopped early and its hosts are used up: read on.
        ranker.add(walk.fill(more=True))
    if not available:
        return None
    if report_top:
        m.report.top(view, conf.report_top_hosts)
    _weight, areq, host = picking.choose(
        available,
        m.rng,
        conf.host_subset_size,
        conf.shuffle_best_same_weighed_hosts,
        ranker.prefers,
    )
    if m.merge:
        areq = picking.retarget(areq, m.spec.resources)
    host.consume(areq)
    if m.state.group is not None:
        # Before the ranking reads the host again: soft policies weigh members.
        m.state.group.add(host.uuid)
    ranker.update(host)
    return Pick(instance, host, areq, view.hosts_prefix(ranker.alternates_prefix))


def unplan(m, ranker, picks=None):
    """Give back the assumed usage of ``picks`` (default: all of ``m``'s)."""
    group = m.state.group
    for pick in reversed(m.picks if picks is None else picks):
        pick.host.release(pick.allocation_request)
        if group is not None:
            group.per_host[pick.host.uuid] -= 1
        ranker.update(pick.host)
    if picks is None:
        m.picks = []


def _hard_group(m):
    group = m.state.group
    return group if group is not None and group.policy in HARD_POLICIES else None


def _excluded(ranker, lost, group, own):
    """What the ranking leaves out: lost hosts, and, when the ranking is the
    request's own (a single request), hosts its hard server group rules out:
    they are not scored at all, as nova's filters remove them. A walk shared
    by a batch is scored once for all its members (the group's rule is
    applied to the picks instead), so a decision does not rebuild it."""
    if group is None or not own:
        return lost
    return lost | {h.uuid for h in ranker.hosts if not group.allows(h.uuid)}


def _partial(sched, m, placed, walk, lost):
    return explain.partial(m.state, placed, walk, m.report, sched.filters, lost)


# -- 5. reserve --------------------------------------------------------------


def reserve(sched, planned, walk, ranker, lost, alone):
    if not planned:
        return
    if alone:
        reserve_each(sched, planned[0], walk, ranker, lost)
    else:
        reserve_together(sched, planned, lost)


def reserve_each(sched, m, walk, ranker, lost):
    """Claim ``m``'s instances one at a time; a lost race drops that host and
    picks again for that instance. Raises (after releasing what it claimed)
    when an instance cannot be claimed anywhere."""
    claimed = []
    try:
        for k in range(len(m.picks)):
            _claim_instance(sched, m, k, walk, ranker, lost, claimed)
            claimed.append(_claim_of(m, m.picks[k]))
    except _Unknown:
        # The last claim's outcome is unknown: release it too, if it is there.
        unknown = _claim_of(m, m.picks[len(claimed)])
        claim_mod.release(sched.client, claimed + [unknown], m.spec.request_id)
        raise
    except BaseException:
        claim_mod.release(sched.client, claimed, m.spec.request_id)
        raise
    m.claimed = True


def _claim_instance(sched, m, k, walk, ranker, lost, claimed):
    while True:
        pick = m.picks[k]
        if deadline_passed(m.deadline):
            raise Expired(f"deadline passed after {len(claimed)} claim(s) of {m.spec.request_id}")
        if pick.host.uuid not in lost:
            one = [_claim_of(m, pick)]
            result = claim_mod.reserve(sched.client, one, m.rng)
            if result.status == claim_mod.CLAIMED:
                _tell_others(sched, [pick])
                return
            _refused(sched, m, k, result, lost)
        unplan(m, ranker, [pick])
        again = pick_one(sched, m, pick.instance, walk, ranker, lost)
        if again is None:
            raise NoValidHost(_partial(sched, m, len(claimed), walk, lost), placeable=len(claimed))
        m.picks[k] = again


def _refused(sched, m, k, result, lost):
    """What a refused claim of ``m``'s instance ``k`` means: raise, or drop
    its host (the caller picks again)."""
    pick = m.picks[k]
    if result.status == claim_mod.CONSUMER_IN_USE:
        raise ConsumerInUse(
            f"instance {pick.instance} already holds allocations (consumer "
            f"generation conflict); release them before scheduling it again"
        )
    if result.status == claim_mod.UNREACHABLE_NOW:
        raise _Unknown(str(result.error), pick.instance) from result.error
    if result.status == claim_mod.REFUSED:
        raise SchedulerError(f"claim for instance {pick.instance} failed: {result.error}")
    lost.add(pick.host.uuid)
    if result.status == claim_mod.GROUP_REFUSED and m.state.group is not None:
        # Another worker placed a member of the group first: read the group
        # again, with this request's unclaimed picks on it (this one's too:
        # the caller gives its usage back).
        m.report.group_refused(pick.host)
        m.state.group = lookups.load_group(sched.client, m.spec)
        for later in m.picks[k:]:
            m.state.group.add(later.host.uuid)
        return
    if result.code == claim_mod.PROFILE_CONFLICT:
        m.report.profile_refused(pick.host)
    # Lost a race: someone else took the capacity (or the power controller
    # made the host eco, or is powering it off: placement's
    # power_state_conflict). Never retry this host in this request.
    m.report.race_lost(pick.host)
    sched.stats["races_lost"] += 1


def reserve_together(sched, planned, lost):
    """Claim every planned member in one write; when that is refused, each
    member in its own; a member whose own write loses goes ALONE."""
    everything = [c for m in planned for c in _claims(m)]
    # Told before the write, not after it: the other workers plan on their
    # views meanwhile, and a claim they hear of only once it is answered
    # (a placement round trip later) is one they may race for. One that
    # then fails is counted by them until their next walk: a host shown
    # fuller than it is, never an over-commit.
    _tell_others(sched, [p for m in planned for p in m.picks])
    result = claim_mod.reserve(sched.client, everything, planned[0].rng, bulk=True)
    if result.status == claim_mod.CLAIMED:
        for m in planned:
            m.claimed = True
        return
    if result.status == claim_mod.UNREACHABLE_NOW:
        # The write may or may not have happened: release, then each alone.
        claim_mod.release(sched.client, everything)
        for m in planned:
            _alone(m)
        return
    if result.status == claim_mod.REFUSED:
        LOG.warning("batch claim refused (%s); claiming per request", result.error)
    else:
        sched.stats["batch_conflicts"] = sched.stats.get("batch_conflicts", 0) + 1
    for m in planned:
        own = (
            result
            if len(planned) == 1
            else claim_mod.reserve(sched.client, _claims(m), m.rng, bulk=True)
        )
        _settle(sched, m, own, lost)


def _settle(sched, m, result, lost):
    """A batch member's own claim: claimed, or what it means."""
    if result.status == claim_mod.CLAIMED:
        m.claimed = True
    elif result.status == claim_mod.CONSUMER_IN_USE:
        # Nothing of it was written (all or none).
        m.picks = []
        m.outcome = (
            ERROR,
            ConsumerInUse(
                f"an instance of request {m.spec.request_id} already holds "
                f"allocations (consumer generation conflict); release them "
                f"before scheduling it again"
            ),
        )
    elif result.status == claim_mod.UNREACHABLE_NOW:
        claim_mod.release(sched.client, _claims(m), m.spec.request_id)
        _alone(m)
    elif result.status == claim_mod.REFUSED:
        _alone(m)
    else:
        # Lost a race: its hosts are not offered again in this run, and it is
        # scheduled alone (a fresh walk, claims one instance at a time).
        for pick in m.picks:
            lost.add(pick.host.uuid)
        sched.stats["races_lost"] += 1
        m.lost_picks = m.picks
        _alone(m)


def _tell_others(sched, picks):
    """Send the claims of ``picks`` to the other scheduler workers
    (scheduler.claim_feed), when this worker has a feed."""
    if sched.claim_feed is not None:
        sched.claim_feed.publish(claim_feed.claims_of_picks(picks))


def take_back_lost(m, ranker):
    """Make a member whose batch claim lost a race (its ``lost_picks``)
    ready to be planned again on the same walk: the assumed usage of those
    picks given back. Return the hosts it lost on."""
    hosts = {pick.host.uuid for pick in m.lost_picks}
    unplan(m, ranker, picks=m.lost_picks)
    m.lost_picks = None
    m.outcome = None
    m.picks = []
    return hosts


def deadline_passed(deadline):
    """Whether a caller's ``deadline`` (epoch seconds, or None) has passed."""
    return deadline is not None and time.time() > deadline


def release_member(sched, m):
    """Release a member's claims (claimed, but its answer is not given)."""
    claim_mod.release(sched.client, _claims(m), m.spec.request_id)


def _alone(m):
    m.picks = []
    m.outcome = (ALONE, None)


def _claims(m):
    return [_claim_of(m, p) for p in m.picks]


def _claim_of(m, pick):
    return claim_mod.Claim(pick.instance, pick.allocation_request, m.spec)


class _Unknown(PlacementUnavailable):
    """Placement did not answer a claim: whether it was written is unknown."""

    def __init__(self, message, instance):
        super().__init__(message)
        self.instance = instance


# -- 6. alternates -----------------------------------------------------------


def alternates(sched, m, lost):
    """[[selected, *alternates], ...] per instance of a claimed member (nova's
    order: once every instance is claimed, excluding every host selected for
    the request and every host that lost a race)."""
    selected = {p.host.uuid for p in m.picks}
    group = _hard_group(m)

    def usable(host):
        if group is not None and not group.allows(host.uuid):
            return None
        return picking.usable_for(host, m.spec, m.merge)

    result = []
    for p in m.picks:
        alts = alternates_mod.pick(
            p.ranked, p.host, selected | lost, sched.conf.scheduler.max_attempts, usable=usable
        )
        m.report.claimed(p.instance, p.host, alts)
        result.append(
            [selection(p.instance, p.host, p.allocation_request, True)]
            + [selection(p.instance, h, a, False) for h, a in alts]
        )
    return result


def selection(instance, host, areq, claimed):
    return spec_mod.Selection(
        instance,
        host.uuid,
        host.name,
        host.cell,
        areq,
        claimed,
        host.schedulable_class,
        host.family,
        placement_client.MICROVERSION,
    )
