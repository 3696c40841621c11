"""The sweep: taking over the work of conductors that died.

Every conductor sweeps (``[conductor] sweep_interval``): a pending record
whose lease ran out belongs to a conductor that died (a live one renews
what it holds: conductor.leases). It is taken over (compare-and-set on its
generation, in one bulk call for the batch of ``sweep_batch``) and the
taker asks the hypervisors (``driver.host_of``) and placement what the dead
one left:

- running -> finished as placed there;
- claimed -> built on the claimed host, no alternates (conductor.cell_build);
- nothing -> scheduled again (conductor.super_conductor).

It also releases the claims a scheduler made too late for a request this
conductor gave up (no answer in time; its records failed): the instances
conductor.abandoned watches (``release_abandoned``).

The stored spec enters the process here: it is checked once as it is read
(a record whose spec does not load is released and failed) and goes on as
a RequestSpec.
"""

import logging
import threading
import time

from conductor import driver as driver_mod
from conductor import leases
from conductor import metrics
from conductor import outcomes as outcomes_mod
from conductor import records as records_mod
from joule import request_spec as spec_mod
from joule.request_spec import Selection
from joule.rpc import oslo_messaging  # imported there, quietly
from scheduler import claim as claim_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")


class Sweeper:
    """Finds the records of dead conductors and finishes their work."""

    def __init__(self, conf, records, client, driver, reporter, cell_build, super_conductor):
        self.conf = conf
        self.records = records
        self.client = client
        self.driver = driver
        self.reporter = reporter
        self.cell_build = cell_build
        self.super_conductor = super_conductor
        self._thread = None
        self._stop = threading.Event()

    def sweep_once(self):
        """Take over and finish expired records; return how many were taken."""
        taken = 0
        expired = self.records.expired(self.conf.conductor.sweep_batch)
        if not expired:
            return 0
        asked = time.monotonic()
        won = self.records.take_many({r["instance_uuid"]: r["generation"] for r in expired})
        for record in expired:
            generation = won.get(record["instance_uuid"])
            if generation is None:
                continue
            taken_at = asked
            if time.monotonic() - taken_at >= self.records.lease_seconds / 3:
                # The takeovers before this one took a while: renew before
                # resuming, so none is resumed on a lease that ran out.
                taken_at = time.monotonic()
                generation = self.records.take(record["instance_uuid"], generation)
                if generation is None:
                    continue
            taken += 1
            metrics.TAKEOVERS.inc()
            try:
                self.resume(record, generation, taken_at)
            except records_mod.PLACEMENT_ERRORS as exc:
                LOG.warning(
                    "%s: takeover interrupted (%s); retried after the lease",
                    record["instance_uuid"],
                    exc,
                )
        return taken

    def resume(self, record, generation, taken_at=None):
        """Finish the work of a record taken over at ``generation``."""
        instance = record["instance_uuid"]
        try:
            spec = spec_mod.load_request_spec(record["spec"]).for_instances([instance])
        except spec_mod.InvalidRequestSpec as exc:
            lease = leases.Lease(self.records, instance, generation, taken_at)
            try:
                lease.write(claim_mod.unclaim, self.client, instance)
            except leases.LeaseLost:
                return
            self.reporter.failed(
                outcomes_mod.RecordedRequest(record),
                instance,
                f"stored spec invalid: {exc}",
                None,
                generation=lease.generation,
            )
            return
        allocations, _gen = self.client.get_allocations(instance)
        try:
            running_on = self.driver.host_of(instance, tuple(allocations))
        except driver_mod.HostsUnknown as exc:
            # Built or not, it cannot be told: never build it a second time
            # on a guess. The lease runs out and a later sweep asks again.
            LOG.warning("%s: taken over, but left for a later sweep: %s", instance, exc)
            return
        if running_on is not None:
            if running_on not in allocations:
                LOG.error(
                    "%s runs on %s but its allocation is on %s",
                    instance,
                    running_on,
                    sorted(allocations),
                )
            LOG.info("%s: taken over; it runs on %s", instance, running_on)
            self.reporter.placed(instance, running_on, generation=generation)
            return
        if allocations:
            claimed = _claimed_selection(instance, allocations)
            LOG.info("%s: taken over; building on its claimed host %s", instance, claimed.host_uuid)
            self.cell_build.build(spec, instance, [claimed], None, generation, taken_at)
            return
        LOG.info("%s: taken over; nothing claimed, scheduling it again", instance)
        self.super_conductor.schedule_and_dispatch(spec, {instance: generation}, None)

    def release_abandoned(self):
        """Release the claims found on instances this conductor failed
        because no scheduler answered in time (conductor.abandoned): a
        scheduler claimed after all. Only an instance whose record is failed
        (never built again) and that runs nowhere; one write guarded by the
        consumer generation it read, so a claim made in between is left.
        Returns how many were released."""
        released = 0
        for instance in self.super_conductor.abandoned.due(self.conf.conductor.sweep_batch):
            try:
                released += self._release_late_claim(instance)
            except records_mod.PLACEMENT_ERRORS as exc:
                LOG.warning("%s: late claim not looked at (%s); next sweep", instance, exc)
        return released

    def _release_late_claim(self, instance):
        """1 when a claim on a given-up ``instance`` was released, else 0."""
        abandoned = self.super_conductor.abandoned
        allocations, _gen = self.client.get_allocations(instance)
        if not allocations:
            return 0  # nothing (yet): watched on
        record = self.records.get(instance)
        if record is None or record["status"] != outcomes_mod.FAILED:
            abandoned.forget(instance)  # somebody else's to judge
            return 0
        try:
            running_on = self.driver.host_of(instance, tuple(allocations))
        except driver_mod.HostsUnknown:
            return 0  # watched on: asked again at the next sweep
        if running_on is not None:
            LOG.error("%s: failed, yet it runs on %s; its claim is left", instance, running_on)
            abandoned.forget(instance)
            return 0
        if claim_mod.release_own(self.client, instance) != claim_mod.RELEASED:
            return 0
        metrics.LATE_CLAIMS_RELEASED.inc()
        LOG.warning("%s: released a claim made after its scheduling was given up", instance)
        return 1

    def start(self):
        def loop():
            while not self._stop.wait(self.conf.conductor.sweep_interval):
                try:
                    if len(self.super_conductor.abandoned):
                        self.release_abandoned()
                    while self.sweep_once() and not self._stop.is_set():
                        pass
                except records_mod.PLACEMENT_ERRORS as exc:
                    LOG.warning("sweep: %s", exc)
                except oslo_messaging.MessagingException as exc:
                    LOG.warning("sweep: bus: %s", exc)

        self._thread = threading.Thread(target=loop, name="sweeper", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)


def _claimed_selection(instance, allocations):
    """The instance's claim as the one host to build on (already claimed)."""
    return Selection(
        instance,
        _claimed_host(allocations),
        None,
        None,
        {"allocations": {rp: {"resources": a["resources"]} for rp, a in allocations.items()}},
        claimed=True,
    )


def _claimed_host(allocations):
    """The host of a claim: the provider holding VCPU, else the first."""
    for rp, alloc in sorted(allocations.items()):
        if "VCPU" in alloc.get("resources", {}):
            return rp
    return sorted(allocations)[0]
