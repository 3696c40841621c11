"""A scheduler worker thread's scheduler: select_destinations and batches.

``Scheduler`` holds what the pipeline (scheduler.pipeline) runs with: the
configuration, a placement client, the enabled filters and weighers, a
random number generator, the traits known to exist and the host cache of the
process. ``select_destinations`` runs one request through the pipeline
alone; ``select_batch`` runs requests that arrived together through it on a
shared walk (scheduler.batching). Either way every request leaves a
scheduling report in placement.
"""

import logging
import random

from joule import placement_client
from joule import request_spec as spec_mod
from scheduler import batching
from scheduler import claim_feed
from scheduler import filters as filters_mod
from scheduler import lookups
from scheduler import pipeline
from scheduler import request_state
from scheduler import waking
from scheduler import weighers as weighers_mod
from scheduler.errors import ConsumerInUse  # noqa: F401 - part of this module's interface
from scheduler.errors import Expired
from scheduler.errors import NoValidHost
from scheduler.errors import PlacementUnavailable
from scheduler.errors import SchedulerError
from scheduler.errors import WaitingForWake
from scheduler.report import Report

LOG = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, conf, client, rng=None, traits=None, host_cache=None):
        self.conf = conf
        self.client = client
        self.filters = filters_mod.from_conf(conf.filter_scheduler)
        self.weighers = weighers_mod.load(conf.filter_scheduler)
        # None: each request draws from its own generator, seeded by its id.
        self.rng = rng
        # Traits known to exist in placement: the process's, shared by its
        # threads' schedulers (scheduler.lookups.KnownTraits).
        self.traits = traits if traits is not None else lookups.KnownTraits()
        # The walks a batching worker keeps (scheduler.host_cache); None
        # walks for every batch.
        self.host_cache = host_cache
        # Where its claims are told to the other workers
        # (scheduler.claim_feed.ClaimFeed), or None.
        self.claim_feed = None
        self.stats = {"requests": 0, "placed": 0, "failed": 0, "races_lost": 0}

    def rng_for(self, spec):
        return self.rng or random.Random(spec.request_id)

    def load_group(self, spec):
        """The view of ``spec``'s server group, or None (scheduler.lookups)."""
        return lookups.load_group(self.client, spec)

    def select_destinations(self, spec, deadline=None):
        """Place every instance of ``spec``; return [[selected, *alternates], ...].

        ``deadline``: the caller's (epoch seconds) or None; once it has
        passed nothing is started or claimed (Expired, no report written).

        :raise InvalidRequestSpec: the spec is malformed (nothing was claimed).
        :raise NoValidHost: not every instance fits; no claim of it remains.
        :raise SchedulerError: placement failed or was unreachable; no claim of
            the request remains (released before raising).
        """
        if not isinstance(spec, spec_mod.RequestSpec):
            spec = spec_mod.load_request_spec(spec)
        if pipeline.deadline_passed(deadline):
            raise Expired(f"request {spec.request_id}: the caller's deadline passed")
        self.stats["requests"] += 1
        report = Report(spec)
        try:
            try:
                result = self._alone(spec, report, deadline)
            except NoValidHost as exc:
                wake = waking.hosts_to_wake(self, spec, exc.placeable)
                if not wake:
                    raise
                raise WaitingForWake(f"{exc}; {waking.describe(wake)}", wake) from exc
        except SchedulerError as exc:
            exc.report = report.finish(
                "no_valid_host" if isinstance(exc, NoValidHost) else "error", str(exc)
            )
            self.stats["failed"] += 1
            if not isinstance(exc, PlacementUnavailable | Expired):
                self.write_reports([(spec, exc.report)])
            raise
        self.stats["placed"] += 1
        if self.host_cache is not None:
            # Placed on a walk of its own: the kept walks share its hosts.
            self.host_cache.apply_claims(claim_feed.claims_of(result))
        self.write_reports([(spec, report.finish("placed"))])
        return result

    def _alone(self, spec, report, deadline=None):
        # Filters and weighers see the spec plus what was looked up for it.
        state = request_state.RequestState(
            spec, self.load_group(spec), lookups.hint_providers(self.client, spec)
        )
        member = pipeline.Member(state, report, self.rng_for(spec), deadline=deadline)
        pipeline.run(self, [member], pipeline.Source(state, report), alone=True)
        return member.outcome[1]

    def select_batch(self, specs, groups=None):
        """Place several requests together (scheduler.batching); one outcome
        per spec: (PLACED, selections) | (ERROR, exc) | (ALONE, None).
        ``groups``: each spec's server group view (hard policies), or None."""
        return batching.schedule_batch(self, specs, groups)

    def write_reports(self, items):
        """Scheduling reports, [(spec, data)], in one write when there are
        several; they are for operators: losing one never fails a request."""
        if not self.conf.filter_scheduler.write_reports or not items:
            return
        try:
            if len(items) == 1:
                spec, data = items[0]
                self.client.put_report(spec.request_id, spec.project_id, data)
            else:
                self.client.put_reports(
                    [(spec.request_id, spec.project_id, data) for spec, data in items]
                )
        except placement_client.PlacementError as exc:
            LOG.warning("%d scheduling report(s) not written: %s", len(items), exc)
