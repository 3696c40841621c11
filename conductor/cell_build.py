"""The cell conductor's build: take the record, build, retry on the alternates.

Nova's algorithm, with placement's build requests as the ledger. A build
comes with the host the scheduler claimed and the alternates it picked in
the same cell, each with the allocation request it would claim. The cell
conductor takes the record (compare-and-set at the generation it was handed
off at: only one conductor wins it), builds with the compute driver, and on
a failed build moves the claim to the next alternate in one
generation-guarded write (claim, if the failed host's claim was lost on the
way); an alternate whose claim is refused counts as tried. When every host
failed it releases the claim. Its lease is kept alive while the build
runs and guards every write on the claim and the finish (conductor.leases):
the moment the record is somebody else's, the build is left to them; the
finish records it placed or failed (conductor.outcomes).

A build arrives as a ``Build``: the message's request spec and selections
are checked and loaded where it entered the process (conductor.intake),
and a message that did not load is failed here, once its record is taken.
The super conductor builds here too, in its own thread, for a host without
a cell; the sweep for a taken-over record claimed on a host.
"""

import concurrent.futures
import dataclasses
import logging
import time

from conductor import driver as driver_mod
from conductor import leases
from conductor import metrics
from conductor import outcomes as outcomes_mod
from conductor import records as records_mod
from joule import placement_client as client_mod
from joule.request_spec import Selection
from scheduler import claim as claim_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")

# The threads the builds of every build_many message share, at most this
# many at once (started as needed and kept: a pool per message, as before,
# cost a start and a join of up to 16 threads per message). As many as 16
# messages of 16 builds each, the most the earlier pools ran at once with
# the RPC executor's default 8 threads, twice over.
BUILD_THREADS = 256


@dataclasses.dataclass
class Build:
    """One instance to build, as loaded from its message.

    ``spec`` (a RequestSpec for this instance) and ``hosts`` (its selected
    Selection, then the alternates) are None when the message did not load;
    ``problem`` then says why. ``generation``: the one the record was handed
    off (or left, see ``holder``) at, or None (a message of an older super
    conductor: the record is read first)."""

    instance_uuid: str
    generation: int | None
    reply_topic: str | None
    spec: object = None
    hosts: list | None = None
    problem: str | None = None
    # The super conductor that still holds the record (it cast the build
    # without a hand-off: RPC 1.4); None when it was handed off.
    holder: str | None = None


class CellBuild:
    """Builds the instances handed to this conductor."""

    def __init__(self, records, client, driver, reporter, in_hand):
        self.records = records
        self.client = client
        self.driver = driver
        self.reporter = reporter
        self.in_hand = in_hand
        self._pool = concurrent.futures.ThreadPoolExecutor(
            BUILD_THREADS, thread_name_prefix="build"
        )

    def build_one(self, build):
        """Take the record and build (``build_instance``)."""
        generation = build.generation
        if generation is None:
            record = self.records.get(build.instance_uuid)
            if record is None or record["status"] != "pending":
                return
            generation = record["generation"]
        asked = time.monotonic()
        taken = self.records.take(build.instance_uuid, generation)
        if taken is None:
            return  # another conductor holds it, or it is finished
        self._build_taken(build, taken, asked)

    def build_many(self, builds, side_by_side=True):
        """Build the instances of one message: their records taken in one
        bulk call (the ones lost are left to whoever holds them), then built
        side by side (unless not ``side_by_side``) so that their finishes
        share calls too."""
        asked = time.monotonic()
        generations = {b.instance_uuid: b.generation for b in builds}
        # A build this process cast to itself (one process serving as both
        # the super and the cell conductor, as the simulator's does) is
        # still held by us: taking it at its generation is a renewal.
        holders = {
            b.instance_uuid: b.holder
            for b in builds
            if b.holder is not None and b.holder != self.records.owner
        }
        taken = self.records.take_many(generations, holders=holders)
        work = [b for b in builds if taken.get(b.instance_uuid) is not None]

        def one(b):
            with self.in_hand.working():
                try:
                    self._build_taken(b, taken[b.instance_uuid], asked)
                except records_mod.PLACEMENT_ERRORS as exc:
                    # Still held: the sweep finishes it after the lease.
                    LOG.warning("build_many %s: %s", b.instance_uuid, exc)

        if len(work) <= 1 or not side_by_side:
            for b in work:
                one(b)
            return
        futures = [self._pool.submit(one, b) for b in work]
        concurrent.futures.wait(futures)  # every build done before the message is
        for future in futures:
            future.result()

    def _build_taken(self, build, generation, taken_at):
        if build.problem is None:
            b = build
            self.build(b.spec, b.instance_uuid, b.hosts, b.reply_topic, generation, taken_at)
            return
        # Ours now, and unusable: nothing can be built from it.
        lease = leases.Lease(self.records, build.instance_uuid, generation, taken_at)
        try:
            lease.write(claim_mod.unclaim, self.client, build.instance_uuid)
        except leases.LeaseLost:
            return
        record = self.records.get(build.instance_uuid)
        self.reporter.failed(
            outcomes_mod.RecordedRequest(record),
            build.instance_uuid,
            f"bad build message: {build.problem}",
            build.reply_topic,
            generation=lease.generation,
        )

    def build(self, spec, instance, hosts, reply_topic, generation, taken_at=None):
        """Build ``instance`` on ``hosts[0]``, then on each alternate whose
        claim moves, until one build succeeds; finish the record. The lease
        is kept alive meanwhile and guards every write on the claim and the
        finish: the moment the record is somebody else's, the build is left
        to them."""
        lease = leases.Lease(self.records, instance, generation, taken_at)
        result = outcomes_mod.build_result(spec, instance, outcomes_mod.FAILED)
        try:
            with lease.kept_alive():
                reason = self._attempts(lease, spec, instance, hosts, result)
        except leases.LeaseLost:
            LOG.warning("%s: lease lost to another conductor; leaving it", instance)
            return
        # The heartbeat has stopped: the finish carries the last generation.
        if reason is None:
            self.reporter.placed(
                instance, result.host_uuid, result, reply_topic, generation=lease.generation
            )
        else:
            self.reporter.failed(
                spec, instance, reason, reply_topic, result, generation=lease.generation
            )

    def _attempts(self, lease, spec, instance, hosts, result):
        """The builds, host after host: None once one succeeded (``result``
        says where), else why every host failed (the claim released).

        :raise LeaseLost: the record stopped being ours on the way.
        """
        current, holding, queue, reasons = hosts[0], True, list(hosts[1:]), []
        while current is not None:
            lease.check()
            result.attempts += 1
            try:
                self.driver.spawn(instance, current, spec)
            except driver_mod.AlreadyBuilt as exc:
                # Runs already (a build before a takeover completed): that is
                # where it is; never build it again.
                current = _where(current, exc.host_uuid)
            except driver_mod.BuildFailed as exc:
                metrics.BUILD_FAILURES.inc()
                self.reporter.report_build(current.host_uuid, False)
                reasons.append(f"build on {current.host_name or current.host_uuid} failed: {exc}")
                current, holding = self._next_host(lease, spec, instance, queue, holding, reasons)
                if current is not None:
                    result.rescheduled += 1
                    metrics.RESCHEDULES.inc()
                continue
            result.status, result.host_uuid = outcomes_mod.PLACED, current.host_uuid
            result.host_name = current.host_name
            result.schedulable_class, result.family = current.schedulable_class, current.family
            return None
        lease.write(claim_mod.unclaim, self.client, instance)
        # One reason per host tried: the builds that failed and the
        # alternates whose claim was refused (they count as tried too).
        return (
            f"instance {instance} failed on all {len(reasons)} host(s) tried "
            f"({result.attempts} build(s) failed, "
            f"{len(reasons) - result.attempts} claim(s) refused): " + "; ".join(reasons)
        )

    def _next_host(self, lease, spec, instance, queue, holding, reasons):
        """Move the claim to the next alternate that can be claimed (every
        write guarded by the lease), or (None, holding)."""
        while queue:
            alt = queue.pop(0)
            try:
                if holding:
                    # One write: the failed host's allocation becomes the alternate's.
                    lease.write(claim_mod.move, self.client, instance, alt.allocation_request, spec)
                else:
                    lease.write(
                        claim_mod.claim, self.client, instance, alt.allocation_request, spec
                    )
            except client_mod.Conflict as exc:
                reasons.append(f"claim on {alt.host_name or alt.host_uuid} failed: {exc.detail}")
                if holding:
                    lease.write(claim_mod.unclaim, self.client, instance)
                    holding = False
                continue
            return alt, True
        return None, holding


def _where(selection, host_uuid):
    """The selection where the instance actually runs."""
    if host_uuid == selection.host_uuid or host_uuid is None:
        return selection
    return Selection(selection.instance_uuid, host_uuid, None, None, {}, claimed=True)
