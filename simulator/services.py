"""The scheduler and conductor of a deployment, called directly on the simulated clock.

The services talk over oslo.messaging (``joule.rpc``); a simulated clock
cannot wait for a reply from another thread, so the simulator keeps the
services' own objects and replaces only the three bus clients of the
conductor by direct calls into the same functions the RPC endpoints call:

- ``SchedulerAPI.select_destinations`` -> the scheduler service's own
  ``SchedulerEndpoint.select_destinations`` (its ``Scheduler``, filters,
  weighers and claims);
- ``ConductorAPI.build_many(cell, builds, ...)`` -> ``Conductor.build_many`` of the
  same conductor (the cell conductor's endpoint: the records taken in one
  bulk call, the instances built side by side so that their finishes and
  build outcomes share bulk calls too);
- ``OutcomeAPI`` -> a collector of the outcomes ``build-submit`` would receive.

Everything else (build requests held under leases, claims, moves to
alternates, the driver, finishing the records) is ``conductor.service.Conductor``'s.
"""

from conductor import conf as cconf_mod
from conductor import driver as driver_mod
from conductor import service as conductor_service
from joule import rpc
from scheduler import service as scheduler_service

PLACED = conductor_service.PLACED


class _DirectScheduler:
    """The scheduler service's endpoint, called in this thread."""

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def select_destinations(self, request_spec, on_retry=None):
        return self.endpoint.select_destinations({}, request_spec)

    def select_destinations_many(self, request_specs, releases=None):
        return self.endpoint.select_destinations_many({}, request_specs)

    def build_outcomes(self, failed_builds):
        self.endpoint.build_outcomes({}, failed_builds)


class _DirectCells:
    def __init__(self):
        self.conductor = None

    def build_instance(self, cell, instance_uuid, request_spec, selections, reply_topic):
        self.conductor.build_instance(instance_uuid, request_spec, selections, reply_topic)

    def build_many(self, cell, builds, reply_topic):
        self.conductor.build_many(builds, reply_topic)


class _Outcomes:
    def __init__(self):
        self.done = []
        self.refused = []

    def instance_done(self, reply_topic, outcome):
        self.done.append(outcome)

    def instances_done(self, reply_topic, outcomes):
        self.done.extend(outcomes)

    def request_refused(self, reply_topic, request_id, error):
        self.refused.append((request_id, error))


# The packing weigher's multiplier in the suspend columns: above the
# free-resource weighers' sum (3), below the power weigher (10), as
# scheduler/conf.py advises.
PACKING_MULTIPLIER = 5.0
# The efficiency weigher's, with --packing efficient: below packing, so a
# host already running work still comes first and the efficient family
# decides where a new stack starts.
EFFICIENCY_MULTIPLIER = 2.0


class Deployment:
    """One scheduler and one conductor serving every cell, without a bus."""

    def __init__(
        self, client, seed, max_attempts, max_placement_results, packing=False, efficiency=False
    ):
        packing_overrides = {}
        if packing:
            packing_overrides[("filter_scheduler", "packing_weight_multiplier")] = (
                PACKING_MULTIPLIER
            )
        if efficiency:
            packing_overrides[("filter_scheduler", "efficiency_weight_multiplier")] = (
                EFFICIENCY_MULTIPLIER
            )
        conf = cconf_mod.make_conf(
            overrides={
                **packing_overrides,
                ("scheduler", "max_attempts"): max_attempts,
                ("filter_scheduler", "max_placement_results"): max_placement_results,
                ("filter_scheduler", "page_size"): max(1, min(1000, max_placement_results or 1000)),
                # One write per request that nobody reads here.
                ("filter_scheduler", "write_reports"): False,
                # A walk kept for wall-clock seconds would span hours of
                # simulated time and make the run depend on the machine's speed.
                ("scheduler", "host_cache_seconds"): 0,
                (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
                # The engine holds what could not be placed in its own queue,
                # on the simulated clock (its model of a request held while
                # nodes wake); a wall-clock wait here would never end a build.
                ("conductor", "wake_wait_seconds"): 0,
            }
        )
        # The scheduler draws tie-breaks and where each walk starts from the
        # request id: the same run, the same picks.
        self.endpoint = scheduler_service.SchedulerEndpoint(conf, lambda: client)
        # Builds succeed: the simulator studies power, not build failures.
        driver = driver_mod.SimulatedDriver(seed=seed)
        self.conductor = conductor_service.Conductor(
            conf, client, rpc.transport_of(conf), driver, "placement-sim"
        )
        self.conductor.scheduler = _DirectScheduler(self.endpoint)
        cells = _DirectCells()
        cells.conductor = self.conductor
        self.conductor.conductors = cells
        self.outcomes = _Outcomes()
        self.conductor.outcomes = self.outcomes

    def build(self, request_spec):
        """Build every instance; return the outcomes (BuildResult dicts), one per instance."""
        self.outcomes.done = []
        self.outcomes.refused = []
        self.conductor.build_instances(request_spec, reply_topic="placement-sim")
        if self.outcomes.refused:
            return [{"status": "failed", "reason": error} for _rid, error in self.outcomes.refused]
        return list(self.outcomes.done)
