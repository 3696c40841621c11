"""select_destinations: fetch candidate pages, filter, weigh, claim, alternates.

The stages, in order (each one cheap to test alone with static candidates):

1. validate the request spec (``joule.request_spec``, the wire contract);
2. walk the pages of ``GET /allocation_candidates`` with node data: every
   page, or until ``max_placement_results`` hosts were read and enough of
   them passed the filters (``_Walk``);
3. build one host state per root provider from those blobs only, page by
   page;
4. filters, on each page as it arrives, in the configured order (cheap and
   selective first); the joulie
   filter runs before the weighers so eco hosts are never scored for
   performance work;
5. weighers: raw values, min-max normalized, times multipliers (nova);
6. per instance: re-weigh (earlier instances consumed capacity), shuffle the
   hosts tied at the best weight, pick at random among ``host_subset_size``
   best, claim; a 409 means a race was lost: drop the host, pick again;
7. alternates in the selected host's cell, each with its own allocation
   request;
8. if any instance cannot be placed, release the request's claims in reverse
   order and raise NoValidHost with what each filter removed and why.

Every request leaves a scheduling report in placement.
"""

import logging
import random
import time

from joule import placement_client
from joule import request_spec as spec_mod
from scheduler import alternates as alternates_mod
from scheduler import batching
from scheduler import candidate_query
from scheduler import claim as claim_mod
from scheduler import filters as filters_mod
from scheduler import hosts as hosts_mod
from scheduler import request_state
from scheduler import server_groups
from scheduler import weighers as weighers_mod
from scheduler.report import Report

LOG = logging.getLogger(__name__)

# upstream's code of a provider (or consumer) generation conflict; a capacity
# shortage is a 409 without it ("Unable to allocate inventory").
CONCURRENT_UPDATE = "placement.concurrent_update"
# Placement refused performance work on a node whose root is eco (it became
# eco after the walk read it): a lost race for that host, never retried.
PROFILE_CONFLICT = "placement.allocation.profile_conflict"
GENERATION_RETRIES = 3


class SchedulerError(Exception):
    """Scheduling did not complete; ``report`` is the request's report."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


class NoValidHost(SchedulerError):
    pass


class ConsumerInUse(SchedulerError):
    """The instance already holds allocations: someone else (another
    conductor resuming it, an earlier attempt) claimed it. Nothing was changed."""


class PlacementUnavailable(SchedulerError):
    """Placement could not be reached; the request's claims were released."""


class Scheduler:
    def __init__(self, conf, client, rng=None):
        self.conf = conf
        self.client = client
        self.filters = filters_mod.from_conf(conf.filter_scheduler)
        self.weighers = weighers_mod.load(conf.filter_scheduler)
        self._rng = rng
        self._traits_ready = set()  # traits known to exist in placement
        # The walks a batching worker keeps (scheduler.host_cache); the
        # service sets its process-wide one, None walks for every batch.
        self.host_cache = None
        self.stats = {"requests": 0, "placed": 0, "failed": 0, "races_lost": 0}

    def select_destinations(self, spec):
        """Place every instance of ``spec``; return [[selected, *alternates], ...].

        :raise InvalidRequestSpec: the spec is malformed (nothing was claimed).
        :raise NoValidHost: not every instance fits; no claim of it remains.
        :raise SchedulerError: placement failed or was unreachable; no claim of
            the request remains (released before raising).
        """
        if not isinstance(spec, spec_mod.RequestSpec):
            spec = spec_mod.load_request_spec(spec)
        self.stats["requests"] += 1
        report = Report(spec)
        try:
            result = self._schedule(spec, report)
        except SchedulerError as exc:
            exc.report = report.finish(
                "no_valid_host" if isinstance(exc, NoValidHost) else "error", str(exc)
            )
            self.stats["failed"] += 1
            if not isinstance(exc, PlacementUnavailable):
                self._write_report(spec, exc.report)
            raise
        self.stats["placed"] += 1
        self._write_report(spec, report.finish("placed"))
        return result

    # -- stages --------------------------------------------------------------

    def _load_group(self, spec):
        if spec.server_group is None:
            return None
        try:
            return server_groups.GroupView.load(self.client, spec.server_group)
        except placement_client.NotFound:
            raise SchedulerError(
                f"request {spec.request_id} names server group "
                f"{spec.server_group}, which placement does not know"
            )
        except (
            placement_client.PlacementUnreachable,
            placement_client.AuthenticationFailed,
        ) as exc:
            raise PlacementUnavailable(str(exc)) from exc
        except placement_client.PlacementError as exc:
            raise SchedulerError(f"server group {spec.server_group}: {exc}")

    def _hint_providers(self, spec):
        """The providers of the instances named by same_host / different_host."""
        out = {}
        hints = spec.scheduler_hints
        for name in ("same_host", "different_host"):
            instances = getattr(hints, name)
            if not instances:
                continue
            providers = set()
            for instance in instances:
                try:
                    allocations, _gen = self.client.get_allocations(instance)
                except (
                    placement_client.PlacementUnreachable,
                    placement_client.AuthenticationFailed,
                ) as exc:
                    raise PlacementUnavailable(str(exc)) from exc
                except placement_client.PlacementError as exc:
                    raise SchedulerError(f"{name} hint: allocations of {instance}: {exc}")
                providers.update(allocations)
            out[name] = providers
        return out

    def _schedule(self, spec, report):
        # Filters and weighers see the spec plus what was looked up for it.
        state = request_state.RequestState(spec, self._load_group(spec), self._hint_providers(spec))
        walk = _Walk(self, state, report)
        walk.fill()
        hosts = walk.passed
        if not hosts:
            raise NoValidHost(_explain(spec, walk.seen, walk.records, walk.query, walk.excluded))

        rng = self._rng or random.Random(spec.request_id)
        subset = self.conf.filter_scheduler.host_subset_size
        max_attempts = self.conf.scheduler.max_attempts
        lost = set()  # hosts that lost a race or no longer fit: never retried here
        selected_hosts = set()
        claimed = []  # consumers claimed so far, for unwinding
        picks = []  # (instance, host, allocation request, hosts ranked for it)
        first = True
        try:
            for instance in spec.instance_uuids:
                ranked = self._rank(hosts, state, lost)
                if first:
                    report.top(ranked, self.conf.filter_scheduler.report_top_hosts)
                    first = False
                host, areq = self._claim_one(state, instance, ranked, lost, rng, subset, report)
                while host is None and not walk.done:
                    # A capped walk stopped early and every host it kept is
                    # gone: read on rather than fail a request that may fit.
                    if walk.fill(more=True):
                        ranked = self._rank(hosts, state, lost)
                        host, areq = self._claim_one(
                            state, instance, ranked, lost, rng, subset, report
                        )
                if host is None:
                    raise NoValidHost(
                        self._partial(
                            state, len(claimed), walk.seen, walk.records, report, hosts, lost
                        )
                    )
                claimed.append(instance)
                if state.group is not None:
                    state.group.add(host.uuid)
                selected_hosts.add(host.uuid)
                host.consume(areq)
                picks.append((instance, host, areq, [h for _w, _p, h in ranked]))
        except _Unreachable as exc:
            # The last claim's outcome is unknown: release it too (idempotent).
            self._unwind(claimed + [exc.instance], spec)
            raise
        except BaseException:
            self._unwind(claimed, spec)
            raise
        # Alternates once every instance is claimed (nova's order): they
        # exclude every host selected for this request and fit what is left.
        result = []
        for instance, host, areq, ranked_hosts in picks:
            alts = alternates_mod.pick(ranked_hosts, host, selected_hosts | lost, max_attempts)
            report.claimed(instance, host, alts)
            result.append(
                [_selection(instance, host, areq, True)]
                + [_selection(instance, h, a, False) for h, a in alts]
            )
        return result

    def _rank(self, hosts, spec, lost):
        group = getattr(spec, "group", None)
        live = [h for h in hosts if h.uuid not in lost and (group is None or group.allows(h.uuid))]
        weighed = weighers_mod.weigh_hosts(live, spec, self.weighers)
        # Stable sort: equal weights keep placement's order until shuffled.
        weighed.sort(key=lambda item: item[0], reverse=True)
        return weighed

    def _pick(self, available, rng, subset):
        """Nova's herding defence: shuffle the best-weight ties, then pick at
        random among the ``subset`` best."""
        if self.conf.filter_scheduler.shuffle_best_same_weighed_hosts:
            best = available[0][0]
            ties = 1
            while ties < len(available) and available[ties][0] == best:
                ties += 1
            if ties > 1:
                head = available[:ties]
                rng.shuffle(head)
                available = head + available[ties:]
        return rng.choice(available[:subset])

    def _claim_one(self, spec, instance, ranked, lost, rng, subset, report):
        available = [item for item in ranked if item[2].usable_request() is not None]
        retries = {}
        while available:
            choice = self._pick(available, rng, subset)
            host = choice[2]
            areq = host.usable_request()
            try:
                claim_mod.claim(self.client, instance, areq, spec)
                return host, areq
            except placement_client.Conflict as exc:
                if exc.consumer_conflict:
                    raise ConsumerInUse(
                        f"instance {instance} already holds allocations (consumer "
                        f"generation conflict); release them before scheduling it again"
                    )
                if exc.code == server_groups.POLICY_VIOLATION and spec.group is not None:
                    # Another worker placed a member of the group first:
                    # re-read the group and drop every host it now rules out.
                    report.group_refused(host)
                    lost.add(host.uuid)
                    spec.group = self._load_group(spec)
                    available = [
                        item
                        for item in available
                        if item[2].uuid not in lost and spec.group.allows(item[2].uuid)
                    ]
                    continue
                if exc.code == CONCURRENT_UPDATE and retries.get(host.uuid, 0) < GENERATION_RETRIES:
                    # Placement ran out of its own retries against concurrent
                    # writers of this provider; capacity may well be left. Retry
                    # the same host after a jittered pause, as nova's report
                    # client does for provider generation conflicts.
                    retries[host.uuid] = retries.get(host.uuid, 0) + 1
                    time.sleep(rng.uniform(0, 0.05 * retries[host.uuid]))
                    continue
                if exc.code == PROFILE_CONFLICT:
                    report.profile_refused(host)
                # Lost a race: someone else took the capacity (or the power
                # controller made the host eco). Never retry this host in this
                # request; its next allocation request would race too.
                report.race_lost(host)
                self.stats["races_lost"] += 1
                lost.add(host.uuid)
                available = [item for item in available if item[2].uuid != host.uuid]
            except (
                placement_client.PlacementUnreachable,
                placement_client.AuthenticationFailed,
            ) as exc:
                # The claim may or may not have been written; _unwind releases
                # this instance as well as the earlier ones.
                raise _Unreachable(str(exc), instance) from exc
            except placement_client.PlacementError as exc:
                raise SchedulerError(f"claim for instance {instance} failed: {exc}")
        return None, None

    def _partial(self, spec, placed, seen, records, report, hosts=(), lost=()):
        races = report.data["races_lost"]
        base = _explain(
            spec, seen, records, excluded=candidate_query.explain_excluded(spec, self.filters)
        )
        text = (
            f"{base}; could place {placed} of {spec.num_instances} instance(s): "
            f"the remaining hosts lack capacity or were taken by concurrent claims "
            f"({races} race(s) lost)"
        )
        eco = report.data.get("profile_refusals", 0)
        if eco:
            text += (
                f"; {eco} of them refused by placement because the host is eco now "
                f"({PROFILE_CONFLICT}: performance work is not placed on eco nodes)"
            )
        group = getattr(spec, "group", None)
        if group is not None:
            ruled_out = sum(1 for h in hosts if h.uuid not in lost and not group.allows(h.uuid))
            refused = report.data.get("group_refusals", 0)
            if ruled_out or refused:
                text += (
                    f"; {group.describe()} ruled out {ruled_out} more host(s) "
                    f"for the remaining instances and refused {refused} claim(s)"
                )
        return text

    def _unwind(self, claimed, spec):
        """Release this request's claims, newest first (Unreserve order)."""
        errors = []
        for consumer in reversed(claimed):
            try:
                claim_mod.unclaim(self.client, consumer)
            except placement_client.PlacementError as exc:
                errors.append(f"{consumer}: {exc}")
        if errors:
            LOG.error("could not release claims of %s: %s", spec.request_id, "; ".join(errors))

    def _ensure_traits(self, names, again=False):
        """Create the traits a query forbids unless they exist: placement
        refuses a query naming an unknown trait, even to forbid it (a cluster
        where no node ever was eco has no CUSTOM_POWER_PROFILE_ECO yet)."""
        if again:
            self._traits_ready -= set(names)
        for name in sorted(set(names) - self._traits_ready):
            try:
                self.client.ensure_trait(name)
            except (
                placement_client.PlacementUnreachable,
                placement_client.AuthenticationFailed,
            ) as exc:
                raise PlacementUnavailable(str(exc)) from exc
            except placement_client.PlacementError as exc:
                raise SchedulerError(f"could not create trait {name}: {exc}")
            self._traits_ready.add(name)

    def select_batch(self, specs, groups=None):
        """Place several requests together (scheduler.batching); one outcome
        per spec: (PLACED, selections) | (ERROR, exc) | (ALONE, None).
        ``groups``: each spec's server group view (hard policies), or None."""
        return batching.schedule_batch(self, specs, groups)

    def _write_reports(self, items):
        """Several reports, [(spec, data)], in one write when there are more."""
        if not self.conf.filter_scheduler.write_reports or not items:
            return
        if len(items) == 1:
            self._write_report(*items[0])
            return
        try:
            self.client.put_reports(
                [(spec.request_id, spec.project_id, data) for spec, data in items]
            )
        except placement_client.PlacementError as exc:
            LOG.warning("%d scheduling reports not written: %s", len(items), exc)

    def _write_report(self, spec, data):
        if not self.conf.filter_scheduler.write_reports:
            return
        try:
            self.client.put_report(spec.request_id, spec.project_id, data)
        except placement_client.PlacementError as exc:
            # The report is for operators; losing one must not fail the request.
            LOG.warning("scheduling report of %s not written: %s", spec.request_id, exc)


class _Walk:
    """The candidate pages of one request, turned into filtered host states
    page by page.

    ``[filter_scheduler] max_placement_results`` = 0 reads every page, so
    the weighers rank the whole cluster. N > 0 stops once N candidate hosts
    were read and at least ``max_attempts`` x instances of them passed the
    filters (nova's ``max_placement_results``, without its failure mode: a
    selective filter or lost races make the walk read on, so a cap never
    turns a request that fits into NoValidHost).
    """

    def __init__(self, sched, spec, report, cap=None):
        group = sched.conf.filter_scheduler
        self.sched = sched
        self.spec = spec
        self.report = report
        # ``cap``: instead of max_placement_results (0: every page).
        self.cap = group.max_placement_results if cap is None else cap
        self.zone_label = group.availability_zone_label
        self.default_zone = group.default_availability_zone
        self.down_time = sched.conf.scheduler.service_down_time
        self.floor = sched.conf.scheduler.max_attempts * spec.num_instances
        page_size = group.page_size
        if self.cap:
            page_size = min(page_size, self.cap)
        # Only what the enabled stages use (scheduler/candidate_query.py).
        self.query = candidate_query.query(spec, sched.filters)
        self.forbidden = candidate_query.root_forbidden(spec, sched.filters)
        self.excluded = candidate_query.explain_excluded(spec, sched.filters)
        if self.excluded:
            report.data["placement_excluded"] = self.excluded
        sched._ensure_traits(self.forbidden)
        node_data = bool(
            candidate_query.node_fields(
                spec, sched.filters, sched.weighers, sched.conf.scheduler.max_attempts
            )
        )
        start = (
            candidate_query.start_point(sched._rng, spec.request_id)
            if group.random_walk_start
            else None
        )
        self._open = lambda: sched.client.candidate_pages(
            self.query, page_size, node_data=node_data, start=start
        )
        self.pages = self._open()
        self._reopened = False
        self.builder = hosts_mod.HostStateBuilder()
        self.seen = 0
        self.passed = []
        self.records = []
        self.done = False
        self._target = self.cap

    def fill(self, more=False):
        """Read pages until the cap (or the end); ``more``: the next cap's
        worth. Return the hosts that passed the filters on these pages."""
        if more:
            self._target = self.seen + (self.cap or 0)
        new = []
        while not self.done:
            if (
                self.cap
                and self.seen >= self._target
                and len(self.passed) >= self.floor
                and (new or not more)
            ):
                break
            body = self._next_page()
            if body is None:
                self.done = True
                break
            self.report.page(body)
            hosts = self.builder.add(body)
            for host in hosts:
                host.zone = host.labels.get(self.zone_label) or self.default_zone
                age = host.heartbeat_age
                host.down = age is not None and age > self.down_time
            self.seen += len(hosts)
            kept, records = filters_mod.run_filters(hosts, self.spec, self.sched.filters)
            filters_mod.add_records(self.records, records)
            self.passed.extend(kept)
            new.extend(kept)
        self.report.filtered(self.seen, self.records, len(self.passed))
        return new

    def _next_page(self):
        spec = self.spec
        try:
            return next(self.pages, None)
        except (
            placement_client.PlacementUnreachable,
            placement_client.AuthenticationFailed,
        ) as exc:
            raise PlacementUnavailable(str(exc)) from exc
        except placement_client.PlacementError as exc:
            if (
                exc.status == 400
                and self.seen == 0
                and not self._reopened
                and "No such trait" in (exc.detail or "")
                and self.forbidden
            ):
                # A forbidden trait was deleted since we created it: again, once.
                self._reopened = True
                self.sched._ensure_traits(self.forbidden, again=True)
                self.pages = self._open()
                return self._next_page()
            if exc.status == 400:
                raise SchedulerError(
                    f"placement rejected the request {spec.request_id}: {exc.detail}"
                )
            raise SchedulerError(str(exc))


def _selection(instance, host, areq, claimed):
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


class _Unreachable(PlacementUnavailable):
    def __init__(self, message, instance):
        super().__init__(message)
        self.instance = instance


def _explain(spec, seen, records, query=None, excluded=()):
    """One sentence an operator can act on: who removed how many hosts, and why
    (``excluded``: what placement left out for a filter, see candidate_query)."""
    head = (
        f"No valid host for request {spec.request_id} ({spec.workload_class}, "
        f"{spec.num_instances} instance(s))"
    )
    if excluded:
        head += "; " + "; ".join(excluded)
    if seen == 0:
        query = "&".join(f"{k}={v}" for k, v in (query or spec.candidate_query()))
        return f"{head}: placement returned no candidates for {query}"
    parts = [f"{r['name']} removed {r['removed']} ({r['reason']})" for r in records if r["removed"]]
    left = records[-1]["after"] if records else seen
    detail = "; ".join(parts) if parts else "no filter removed any"
    return f"{head}: placement returned {seen} candidate host(s); {detail}; {left} left"
