"""Stages 1 and 2: the candidate pages of a request, as filtered host states.

``CandidateWalk`` reads ``GET /allocation_candidates`` (with node data when a
stage reads a node field, scheduler.candidate_query), builds one host state
per root provider from those pages alone (scheduler.hosts), and runs the
filters on each page as it arrives (scheduler.filters), so a capped walk can
stop early.

``[filter_scheduler] max_placement_results`` = 0 reads every page, so the
weighers rank the whole cluster. N > 0 stops once N candidate hosts were
read and at least ``max_attempts`` x instances of them passed the filters
(nova's ``max_placement_results``, without its failure mode: a selective
filter or lost races make the walk read on, so a cap never turns a request
that fits into NoValidHost).
"""

from joule import placement_client
from scheduler import candidate_query
from scheduler import filters as filters_mod
from scheduler import hosts as hosts_mod
from scheduler.errors import UNREACHABLE
from scheduler.errors import PlacementUnavailable
from scheduler.errors import SchedulerError


class CandidateWalk:
    """The candidate pages of one request (``state``: its RequestState),
    turned into filtered host states page by page. ``sched`` gives the
    conf, client, filters, weighers, rng and known traits; ``cap`` replaces
    max_placement_results (0: every page)."""

    def __init__(self, sched, state, report, cap=None):
        group = sched.conf.filter_scheduler
        self.sched = sched
        self.state = state
        self.report = report
        self.cap = group.max_placement_results if cap is None else cap
        self.zone_label = group.availability_zone_label
        self.default_zone = group.default_availability_zone
        self.down_time = sched.conf.scheduler.service_down_time
        self.floor = sched.conf.scheduler.max_attempts * state.num_instances
        # Only what the enabled stages use (scheduler/candidate_query.py).
        self.query = candidate_query.query(state, sched.filters)
        self.forbidden = candidate_query.root_forbidden(state, sched.filters)
        self.excluded = candidate_query.explain_excluded(state, sched.filters)
        if self.excluded:
            report.data["placement_excluded"] = self.excluded
        # The sleeping-node traits every request forbids (ComputeFilter)
        # are created when placement says one is missing (below), so a
        # plain request's first call is still its candidates.
        sched.traits.ensure(
            sched.client, self.forbidden - candidate_query.routine_forbidden(sched.filters)
        )
        self._open = self._opener(sched, group)
        self.pages = self._open()
        self._reopened = False
        self.builder = hosts_mod.HostStateBuilder()
        self.seen = 0
        self.passed = []
        self.records = []
        self.done = False
        self._target = self.cap

    def _opener(self, sched, group):
        state = self.state
        page_size = min(group.page_size, self.cap) if self.cap else group.page_size
        node_data = bool(
            candidate_query.node_fields(
                state, sched.filters, sched.weighers, sched.conf.scheduler.max_attempts
            )
        )
        start = (
            candidate_query.start_point(sched.rng, state.request_id)
            if group.random_walk_start
            else None
        )
        return lambda: sched.client.candidate_pages(
            self.query, page_size, node_data=node_data, start=start
        )

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
            new.extend(self._take(body))
        self.report.filtered(self.seen, self.records, len(self.passed))
        return new

    def _take(self, body):
        """One page: its new hosts, their zone and liveness, filtered."""
        self.report.page(body)
        hosts = self.builder.add(body)
        for host in hosts:
            host.zone = host.labels.get(self.zone_label) or self.default_zone
            age = host.heartbeat_age
            host.down = age is not None and age > self.down_time
        self.seen += len(hosts)
        kept, records = filters_mod.run_filters(hosts, self.state, self.sched.filters)
        filters_mod.add_records(self.records, records)
        self.passed.extend(kept)
        return kept

    def _next_page(self):
        try:
            return next(self.pages, None)
        except UNREACHABLE as exc:
            raise PlacementUnavailable(str(exc)) from exc
        except placement_client.PlacementError as exc:
            if self._trait_vanished(exc):
                # A forbidden trait was deleted since we created it: again, once.
                self._reopened = True
                self.sched.traits.ensure(self.sched.client, self.forbidden, again=True)
                self.pages = self._open()
                return self._next_page()
            if exc.status == 400:
                raise SchedulerError(
                    f"placement rejected the request {self.state.request_id}: {exc.detail}"
                ) from exc
            raise SchedulerError(str(exc)) from exc

    def _trait_vanished(self, exc):
        return (
            exc.status == 400
            and self.seen == 0
            and not self._reopened
            and "No such trait" in (exc.detail or "")
            and bool(self.forbidden)
        )
