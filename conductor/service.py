"""The conductors as services: the super conductor and the cell conductors.

The conversation of the design (a super conductor, a scheduler, cell conductors), over the bus:

- super conductor (topic ``conductor``), ``build_instances(request_spec)``:
  checks the spec against the wire contract (a bad one is refused to the
  submitter, nothing recorded), records one pending build request per
  instance, held by this process under a lease, calls ``scheduler``
  (``select_destinations``), then per instance hands its record off and
  casts its selection list to the conductors of the selected host's cell;
- cell conductor (topic ``conductor.<cell>``), ``build_instance``: takes the
  record (compare-and-set: only one conductor wins it), builds with the
  compute driver, and on a failed build moves the claim to the next
  alternate; when every host failed it releases the claim, and finishes the
  record (guarded by ownership) as placed or failed;
- every conductor sweeps: a pending record whose lease ran out belongs to a
  conductor that died, and is taken over and finished; and a claim found on
  an instance it failed because no scheduler answered in time is released.

So no instance is built twice (the driver refuses a second build and a
record has one holder) and none runs without its allocation (a build only
starts while holding the claim, and the claim only moves away after a
failed build). Outcomes go to the submitter's topic as they happen (those
finished together in one message); the finished record in placement is the
durable copy.

Each part is its own module; this one builds them and wires them, and is
what the RPC endpoints, the console script and the simulator hold:

- conductor.endpoints: the RPC endpoints (timing, messages in hand);
- conductor.intake: where a message enters: checked once and loaded;
- conductor.super_conductor: scheduling a request and dispatching its builds;
- conductor.cell_build: the build with retry on the alternates;
- conductor.outcomes: finishing records, telling submitters and schedulers;
- conductor.sweep: taking over the work of dead conductors, and releasing
  the late claims of given-up requests (conductor.abandoned);
- conductor.leases: the leases kept alive meanwhile;
- conductor.batchers: the batchers, built in one factory.
"""

import functools

from conductor import abandoned as abandoned_mod
from conductor import batchers as batchers_mod
from conductor import cell_build as cell_mod
from conductor import instance_ends as ends_mod
from conductor import intake as intake_mod
from conductor import outcomes as outcomes_mod
from conductor import scheduler_routing as routing_mod
from conductor import super_conductor as super_mod
from conductor import sweep as sweep_mod
from conductor.endpoints import CellConductorEndpoint
from conductor.endpoints import SuperConductorEndpoint
from joule import rpc

# Outcome statuses, where they have always been imported from.
PLACED = outcomes_mod.PLACED
FAILED = outcomes_mod.FAILED

__all__ = [
    "FAILED",
    "PLACED",
    "Bus",
    "CellConductorEndpoint",
    "Conductor",
    "SuperConductorEndpoint",
]


class Bus:
    """The conductor's three bus clients, shared by its parts, which look
    them up at each call: the simulator and tests put direct calls in their
    place after the conductor is built (``Conductor.scheduler = ...``)."""

    def __init__(self, scheduler, conductors, outcomes):
        self.scheduler = scheduler  # rpc.SchedulerAPI: select_destinations, build_outcomes
        self.conductors = conductors  # rpc.ConductorAPI: build_many to a cell
        self.outcomes = outcomes  # rpc.OutcomeAPI: to the submitters


def _on_bus(name):
    return property(
        lambda self: getattr(self.bus, name),
        lambda self, value: setattr(self.bus, name, value),
        doc=f"The bus client ``{name}`` (see ``Bus``).",
    )


class Conductor:
    """One conductor process's work, whatever topics it serves: its parts,
    built and wired. Its methods are the process's entries (what the RPC
    endpoints call, and the simulator directly), each handed on as it is."""

    scheduler = _on_bus("scheduler")
    conductors = _on_bus("conductors")
    outcomes = _on_bus("outcomes")

    def __init__(self, conf, client, transport, driver, name):
        self.conf = conf
        self.client = client
        self.driver = driver
        self.name = name
        self.in_hand = batchers_mod.InHand()
        self.bus = Bus(
            rpc.SchedulerAPI(conf, transport),
            rpc.ConductorAPI(conf, transport),
            rpc.OutcomeAPI(transport),
        )
        # Which scheduler worker each kind of request goes to.
        self.router = routing_mod.Router(
            lambda: self.bus.scheduler, ask_timeout=conf.rpc.call_timeout
        )
        build_reports = outcomes_mod.BuildReports(client, self.bus)
        flushes = {
            "build_reports": build_reports.send,
            "build_casts": functools.partial(super_mod.send_builds, self.bus),
            "outcome_casts": functools.partial(outcomes_mod.send_instances_done, self.bus),
            "scheduling": functools.partial(super_mod.select_many_routed, self.bus, self.router),
        }
        self.batchers = batchers_mod.make(conf, client, name, self.in_hand.company, flushes)
        self.records = self.batchers.records
        self.reporter = outcomes_mod.Reporter(self.records, self.bus, build_reports, self.batchers)
        self.cell_build = cell_mod.CellBuild(
            self.records, client, driver, self.reporter, self.in_hand
        )
        self.super_conductor = super_mod.SuperConductor(
            self.records,
            client,
            self.bus,
            self.reporter,
            self.cell_build,
            self.batchers,
            abandoned_mod.Abandoned(abandoned_mod.watch_seconds(conf)),
            record_retry_seconds=conf.conductor.record_retry_seconds,
            wake_wait_seconds=conf.conductor.wake_wait_seconds,
            wake_retry_interval=conf.conductor.wake_retry_interval,
        )
        self.sweeper = sweep_mod.Sweeper(
            conf, self.records, client, driver, self.reporter, self.cell_build, self.super_conductor
        )
        self.request_intake = intake_mod.RequestIntake(
            conf, self.super_conductor, self.reporter, self.in_hand
        )
        self.build_intake = intake_mod.BuildIntake(self.cell_build)
        self.instance_ends = ends_mod.InstanceEnds(self.records, client)

    def working(self):
        """Count a message (or a build) in hand while the block runs."""
        return self.in_hand.working()

    # -- super conductor: requests in their wire form ---------------------------

    def build_instances(self, request_spec, reply_topic=None):
        self.request_intake.build_instances(request_spec, reply_topic)

    def build_instances_many(self, request_specs, reply_topic=None):
        self.request_intake.build_instances_many(request_specs, reply_topic)

    # -- cell conductor: builds in their wire form --------------------------------

    def build_instance(
        self, instance_uuid, request_spec, selections, reply_topic=None, generation=None
    ):
        self.build_intake.build_instance(
            instance_uuid, request_spec, selections, reply_topic, generation
        )

    def build_many(self, builds, reply_topic=None):
        self.build_intake.build_many(builds, reply_topic)

    # -- every conductor ----------------------------------------------------------

    def instances_ended(self, host, host_uuid, instances):
        """Release the claims of instances a node agent reports ended; the
        uuids dealt with (conductor.instance_ends)."""
        return self.instance_ends.ended(host, host_uuid, instances)

    def sweep_once(self):
        """Take over and finish expired records; return how many were taken."""
        return self.sweeper.sweep_once()

    def release_abandoned(self):
        """Release the late claims of instances given up; return how many."""
        return self.sweeper.release_abandoned()

    def start_sweeping(self):
        self.sweeper.start()

    def stop_sweeping(self):
        self.sweeper.stop()
        self.super_conductor.wake_waits.stop()
