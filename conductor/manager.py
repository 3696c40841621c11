"""The conductor: record, schedule, build, and move claims to alternates.

For each request: every instance is recorded as a pending build request
(so pending performance demand is visible to the power controller and a
restarted conductor resumes it), the scheduler selects and claims a host
plus same-cell alternates, then the compute driver builds there.

On a build failure the claim moves to the next alternate in ONE write guarded
by the consumer generation (the failed host's allocation is replaced by the
alternate's), so the instance never holds nothing while a racing scheduler
takes the alternate. If that move fails (the alternate is full), the failed
host is released and later alternates are claimed afresh. When every host
failed, the request fails with the reasons and none of its allocations remain.
"""

import logging

from conductor import driver as driver_mod
from joule import placement_client
from joule import request_spec as spec_mod
from joule.request_spec import BuildResult
from scheduler import claim as claim_mod
from scheduler import worker as worker_mod

LOG = logging.getLogger(__name__)

PLACED = "placed"
FAILED = "failed"
SKIPPED = "skipped"  # owned by another conductor; its build request is left alone


class Conductor:
    def __init__(self, scheduler, client, driver, record=True):
        self.scheduler = scheduler
        self.client = client
        self.driver = driver
        self.record = record

    def build(self, spec):
        """Build every instance of ``spec``; return one BuildResult per instance.

        :raise joule.request_spec.InvalidRequestSpec: the spec is malformed (nothing recorded).
        :raise PlacementUnavailable: placement went away (or refused our token); build requests that
            were recorded stay pending and are resumed by ``resume_pending``.
        """
        if not isinstance(spec, spec_mod.RequestSpec):
            spec = spec_mod.load_request_spec(spec)
        if self.record:
            for instance in spec.instance_uuids:
                self.client.create_build_request(
                    instance, spec.request_id, spec.workload_class,
                    spec_mod.dump_request_spec(spec.for_instances([instance])))
        return self._schedule_and_build(spec)

    def resume_pending(self):
        """Finish the build requests a previous conductor left pending.

        An instance may already hold a claim from before the restart; nobody
        knows whether its build ran, so the claim is released and the instance
        scheduled afresh (claim, then build), never built twice on a claim.
        """
        results = []
        for item in self.client.list_build_requests(status="pending"):
            try:
                spec = spec_mod.load_request_spec(item["spec"])
            except spec_mod.InvalidRequestSpec as exc:
                self._finish(item["instance_uuid"], FAILED, reason=f"stored spec invalid: {exc}")
                results.append(BuildResult(item["instance_uuid"], item["request_id"],
                                           item["workload_class"], FAILED, reason=str(exc)))
                continue
            spec = spec.for_instances([item["instance_uuid"]])
            claim_mod.unclaim(self.client, item["instance_uuid"])
            results.extend(self._schedule_and_build(spec))
        return results

    # -- internals -------------------------------------------------------------

    def _schedule_and_build(self, spec):
        try:
            selections = self.scheduler.select_destinations(spec)
        except worker_mod.PlacementUnavailable:
            # Nothing is claimed (the scheduler released it); the build
            # requests stay pending for a later resume.
            raise
        except worker_mod.ConsumerInUse as exc:
            # Another conductor holds (and so owns) one of these instances, e.g.
            # two conductors resuming the same pending request: leave the build
            # requests to the owner instead of failing what it may place.
            LOG.warning("%s: %s", spec.request_id, exc)
            return [BuildResult(i, spec.request_id, spec.workload_class, SKIPPED,
                                reason=str(exc)) for i in spec.instance_uuids]
        except worker_mod.SchedulerError as exc:
            results = []
            for instance in spec.instance_uuids:
                self._finish(instance, FAILED, reason=str(exc))
                results.append(BuildResult(instance, spec.request_id, spec.workload_class,
                                           FAILED, reason=str(exc)))
            return results
        return [self._build_one(spec, hosts) for hosts in selections]

    def _build_one(self, spec, hosts):
        instance = hosts[0].instance_uuid
        result = BuildResult(instance, spec.request_id, spec.workload_class, FAILED)
        current = hosts[0]  # claimed by the scheduler
        holding = True  # whether ``current`` is what the instance holds
        reasons = []
        queue = list(hosts[1:])
        while current is not None:
            result.attempts += 1
            try:
                self.driver.spawn(instance, current)
            except driver_mod.BuildFailed as exc:
                reasons.append(f"build on {current.host_name or current.host_uuid} failed: {exc}")
                current, holding = self._next_host(spec, instance, queue, holding, reasons,
                                                   result)
                continue
            result.status = PLACED
            result.host_uuid = current.host_uuid
            result.host_name = current.host_name
            result.schedulable_class = current.schedulable_class
            result.family = current.family
            self._finish(instance, PLACED, host_uuid=current.host_uuid)
            return result
        # Every host failed: release whatever is left (idempotent) and say why.
        claim_mod.unclaim(self.client, instance)
        # One reason per host tried: the builds that failed and the
        # alternates whose claim was refused (they count as tried too).
        result.reason = (f"instance {instance} failed on all {len(reasons)} host(s) tried "
                         f"({result.attempts} build(s) failed, "
                         f"{len(reasons) - result.attempts} claim(s) refused): "
                         + "; ".join(reasons))
        self._finish(instance, FAILED, reason=result.reason)
        return result

    def _next_host(self, spec, instance, queue, holding, reasons, result):
        """Move the claim to the next alternate that can be claimed, or (None, False)."""
        while queue:
            alt = queue.pop(0)
            try:
                if holding:
                    # One write: the failed host's allocation becomes the alternate's.
                    claim_mod.move(self.client, instance, alt.allocation_request, spec)
                else:
                    claim_mod.claim(self.client, instance, alt.allocation_request, spec)
            except placement_client.Conflict as exc:
                reasons.append(f"claim on {alt.host_name or alt.host_uuid} failed: "
                               f"{exc.detail}")
                if holding:
                    # Keep holding a host that failed a build is useless: release it.
                    claim_mod.unclaim(self.client, instance)
                    holding = False
                continue
            result.rescheduled += 1
            return alt, True
        return None, holding

    def _finish(self, instance, status, host_uuid=None, reason=None):
        if not self.record:
            return
        try:
            self.client.finish_build_request(instance, status, host_uuid=host_uuid,
                                             reason=reason)
        except placement_client.PlacementError as exc:
            LOG.warning("build request %s not finished as %s: %s", instance, status, exc)
