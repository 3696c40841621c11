"""The conductors as services: the super conductor and the cell conductors.

The conversation of ../shared/seeds/003, over the bus:

- super conductor (topic ``conductor``), ``build_instances(request_spec)``:
  checks the spec against the wire contract (a bad one is refused to the
  submitter, nothing recorded), records one pending build request per
  instance, held by this process under a lease (all or none, so a
  redelivered message finds them and is dropped), calls ``scheduler``
  (``select_destinations``, with a timeout and bounded retries; before a
  retry it releases whatever a scheduler that died half way claimed), then
  per instance hands its record off and casts its selection list to the
  conductors of the selected host's cell;
- cell conductor (topic ``conductor.<cell>``), ``build_instance``: takes the
  record (compare-and-set: only one conductor wins it), builds with the
  compute driver, and on a failed build moves the claim to the next
  alternate with the allocation request it carries, in one
  generation-guarded write; when every host failed it releases the claim.
  It renews its lease while it works and finishes the record (guarded by
  ownership) as placed or failed;
- every conductor sweeps: a pending record whose lease ran out belongs to a
  conductor that died. It is taken over (compare-and-set again) and the
  taker asks the hypervisors (``driver.host_of``) and placement what the
  dead one left: running -> placed there; claimed -> build on the claimed
  host; nothing -> schedule it again.

So no instance is built twice (the driver refuses a second build and a
record has one holder) and none runs without its allocation (a build only
starts while holding the claim, and the claim only moves away after a
failed build). Outcomes go to the submitter's topic as they happen; the
finished record in placement is the durable copy.
"""

import contextlib
import logging
import threading
import time

from conductor import driver as driver_mod
from conductor import metrics
from conductor import records as records_mod
from joule import placement_client as client_mod
from joule import request_spec as spec_mod
from joule import rpc
from joule.request_spec import Selection
from joule.rpc import oslo_messaging  # imported there, quietly
from scheduler import claim as claim_mod

LOG = logging.getLogger(__name__)

PLACED = "placed"
FAILED = "failed"
_PLACEMENT_ERRORS = (client_mod.PlacementError, client_mod.PlacementUnreachable)


def _outcome(spec, instance, status):
    return spec_mod.BuildResult(instance, spec.request_id, spec.workload_class, status)


class _Lease:
    """Keeps a record's lease alive during a long build: renews it once half
    of it has passed. ``keep()`` is False once the record is somebody else's."""

    def __init__(self, records, instance, generation):
        self.records = records
        self.instance = instance
        self.generation = generation
        self.taken_at = time.monotonic()

    def keep(self):
        if time.monotonic() - self.taken_at < self.records.lease_seconds / 2:
            return True
        gen = self.records.take(self.instance, self.generation)
        if gen is None:
            return False
        self.generation, self.taken_at = gen, time.monotonic()
        return True


class _Held:
    """The records a super conductor holds while the scheduler works on them.

    ``kept_alive()`` renews their leases in the background, so a slow or
    retried scheduling call never lets them expire under a live conductor;
    ``renew()`` is also the check before touching their claims: a record
    whose renewal fails is somebody else's now and is forgotten.
    """

    def __init__(self, records, generations):
        self.records = records
        self.generations = dict(generations)
        self._lock = threading.Lock()

    def instances(self):
        with self._lock:
            return list(self.generations)

    def renew(self):
        """Renew every lease; return the instances still held."""
        with self._lock:
            for instance, generation in list(self.generations.items()):
                new = self.records.take(instance, generation)
                if new is None:
                    del self.generations[instance]
                else:
                    self.generations[instance] = new
            return list(self.generations)

    def hand_off(self, instance):
        """Leave the record for the receiver of the hand-off; False if not ours."""
        with self._lock:
            generation = self.generations.pop(instance, None)
        if generation is None:
            return False
        return self.records.take(instance, generation, hand_off=True) is not None

    @contextlib.contextmanager
    def kept_alive(self):
        done = threading.Event()
        interval = self.records.lease_seconds / 3

        def loop():
            while not done.wait(interval):
                try:
                    self.renew()
                except _PLACEMENT_ERRORS as exc:
                    LOG.warning("lease renewal failed: %s", exc)

        thread = threading.Thread(target=loop, name="lease-renewal", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()


class Conductor:
    """One conductor process's work, whatever topics it serves."""

    def __init__(self, conf, client, transport, driver, name):
        self.conf = conf
        self.client = client
        self.driver = driver
        self.name = name
        self.records = records_mod.Records(client, name, conf.conductor.lease_seconds)
        self.scheduler = rpc.SchedulerAPI(conf, transport)
        self.conductors = rpc.ConductorAPI(conf, transport)
        self.outcomes = rpc.OutcomeAPI(transport)
        self._sweeper = None
        self._stop = threading.Event()

    # -- super conductor -------------------------------------------------------

    def build_instances(self, request_spec, reply_topic=None):
        request_id = request_spec.get("request_id") if isinstance(request_spec, dict) else None
        try:
            spec = spec_mod.load_request_spec(request_spec)
        except spec_mod.InvalidRequestSpec as exc:
            metrics.REFUSED.inc()
            self.outcomes.request_refused(reply_topic, request_id, str(exc))
            return
        items = [
            {
                "instance_uuid": i,
                "request_id": spec.request_id,
                "workload_class": spec.workload_class,
                "spec": spec_mod.dump_request_spec(spec.for_instances([i])),
            }
            for i in spec.instance_uuids
        ]
        try:
            generations = self.records.create_held(items)
        except records_mod.AlreadyRecorded:
            # A second delivery of a request already being handled (the
            # submitter re-sends what it does not see recorded).
            LOG.info("%s: already recorded, dropping the duplicate", spec.request_id)
            return
        except _PLACEMENT_ERRORS as exc:
            self.outcomes.request_refused(
                reply_topic, spec.request_id, f"build requests not recorded: {exc}"
            )
            return
        self._schedule_and_dispatch(spec, generations, reply_topic)

    def _schedule_and_dispatch(self, spec, generations, reply_topic):
        held = _Held(self.records, generations)

        def release():
            # Only what is still ours: a record whose lease ran out (this
            # process stalled) may be another conductor's build by now.
            for instance in held.renew():
                claim_mod.unclaim(self.client, instance)

        start = time.perf_counter()
        try:
            with held.kept_alive():
                answer = self.scheduler.select_destinations(
                    spec_mod.dump_request_spec(spec), on_retry=release
                )
        except rpc.Unanswered as exc:
            answer = {"status": "error", "error": str(exc)}
        finally:
            metrics.SCHEDULER_CALL.observe(time.perf_counter() - start)
        if answer["status"] != "placed":
            try:
                release()  # whatever a scheduler that died half way left
            except _PLACEMENT_ERRORS as exc:
                # Leave the records held: once the lease runs out a sweeper
                # finds the claims and finishes or releases them.
                LOG.warning("%s: claims not released (%s); left to the sweep", spec.request_id, exc)
                return
            for instance in held.instances():
                self._fail(spec, instance, f"scheduling failed: {answer['error']}", reply_topic)
            return
        selections = spec_mod.load_selections(answer["selections"]).selections
        for hosts in selections:
            instance = hosts[0].instance_uuid
            one = spec_mod.dump_request_spec(spec.for_instances([instance]))
            message = spec_mod.dump_selections(spec.request_id, [hosts])
            if not held.hand_off(instance):
                continue  # taken over meanwhile: the taker finishes it
            if hosts[0].cell is None:
                # A host without a cell has no cell conductors: build here.
                self.build_instance(instance, one, message, reply_topic)
                continue
            self.conductors.build_instance(hosts[0].cell, instance, one, message, reply_topic)

    # -- cell conductor --------------------------------------------------------

    def build_instance(self, instance_uuid, request_spec, selections, reply_topic=None):
        record = self.records.get(instance_uuid)
        if record is None or record["status"] != "pending":
            return
        generation = self.records.take(instance_uuid, record["generation"])
        if generation is None:
            return  # another conductor holds it
        try:
            spec = spec_mod.load_request_spec(request_spec)
            hosts = spec_mod.load_selections(selections).selections[0]
        except spec_mod.InvalidMessage as exc:
            claim_mod.unclaim(self.client, instance_uuid)
            self._fail(_Bare(record), instance_uuid, f"bad build message: {exc}", reply_topic)
            return
        self._build(spec, instance_uuid, hosts, reply_topic, generation)

    def _build(self, spec, instance, hosts, reply_topic, generation):
        lease = _Lease(self.records, instance, generation)
        result = _outcome(spec, instance, FAILED)
        current, holding, queue, reasons = hosts[0], True, list(hosts[1:]), []
        while current is not None:
            if not lease.keep():
                LOG.warning("%s: lease lost to another conductor; leaving it", instance)
                return
            result.attempts += 1
            try:
                self.driver.spawn(instance, current)
            except driver_mod.AlreadyBuilt as exc:
                # Runs already (a build before a takeover completed): that is
                # where it is; never build it again.
                current = _where(current, exc.host_uuid)
            except driver_mod.BuildFailed as exc:
                metrics.BUILD_FAILURES.inc()
                self._report_outcome(current.host_uuid, False)
                reasons.append(f"build on {current.host_name or current.host_uuid} failed: {exc}")
                current, holding = self._next_host(spec, instance, queue, holding, reasons, result)
                continue
            self._report_outcome(current.host_uuid, True)
            result.status, result.host_uuid = PLACED, current.host_uuid
            result.host_name = current.host_name
            result.schedulable_class, result.family = current.schedulable_class, current.family
            if self.records.finish(instance, PLACED, host_uuid=current.host_uuid):
                metrics.BUILDS.labels(PLACED).inc()
                self.outcomes.instance_done(reply_topic, spec_mod.dump_build_result(result))
            return
        if not lease.keep():
            return  # no longer ours: the claim is the taker's to judge
        claim_mod.unclaim(self.client, instance)
        # One reason per host tried: the builds that failed and the
        # alternates whose claim was refused (they count as tried too).
        reason = (
            f"instance {instance} failed on all {len(reasons)} host(s) tried "
            f"({result.attempts} build(s) failed, "
            f"{len(reasons) - result.attempts} claim(s) refused): " + "; ".join(reasons)
        )
        self._fail(spec, instance, reason, reply_topic, result)

    def _next_host(self, spec, instance, queue, holding, reasons, result):
        """Move the claim to the next alternate that can be claimed, or (None, holding)."""
        while queue:
            alt = queue.pop(0)
            try:
                if holding:
                    # One write: the failed host's allocation becomes the alternate's.
                    claim_mod.move(self.client, instance, alt.allocation_request, spec)
                else:
                    claim_mod.claim(self.client, instance, alt.allocation_request, spec)
            except client_mod.Conflict as exc:
                reasons.append(f"claim on {alt.host_name or alt.host_uuid} failed: {exc.detail}")
                if holding:
                    claim_mod.unclaim(self.client, instance)
                    holding = False
                continue
            result.rescheduled += 1
            metrics.RESCHEDULES.inc()
            return alt, True
        return None, holding

    def _report_outcome(self, host_uuid, succeeded):
        """Tell placement how a build on the host went: the scheduler's
        BuildFailureWeigher sinks hosts whose builds keep failing, until one
        succeeds. Losing a report must not fail the build."""
        try:
            self.client.report_build_outcome(host_uuid, succeeded)
        except client_mod.PlacementError as exc:
            LOG.warning("build outcome on %s not reported: %s", host_uuid, exc)

    def _fail(self, spec, instance, reason, reply_topic, result=None):
        if not self.records.finish(instance, FAILED, reason=reason):
            return
        metrics.BUILDS.labels(FAILED).inc()
        out = result or _outcome(spec, instance, FAILED)
        out.status, out.reason, out.host_uuid, out.host_name = FAILED, reason, None, None
        self.outcomes.instance_done(reply_topic, spec_mod.dump_build_result(out))

    # -- taking over the work of dead conductors -----------------------------------

    def sweep_once(self):
        """Take over and finish expired records; return how many were taken."""
        taken = 0
        for record in self.records.expired(self.conf.conductor.sweep_batch):
            generation = self.records.take(record["instance_uuid"], record["generation"])
            if generation is None:
                continue
            taken += 1
            metrics.TAKEOVERS.inc()
            try:
                self._resume(record, generation)
            except _PLACEMENT_ERRORS as exc:
                LOG.warning(
                    "%s: takeover interrupted (%s); retried after the lease",
                    record["instance_uuid"],
                    exc,
                )
        return taken

    def _resume(self, record, generation):
        instance = record["instance_uuid"]
        try:
            spec = spec_mod.load_request_spec(record["spec"]).for_instances([instance])
        except spec_mod.InvalidRequestSpec as exc:
            claim_mod.unclaim(self.client, instance)
            self._fail(_Bare(record), instance, f"stored spec invalid: {exc}", None)
            return
        running_on = self.driver.host_of(instance)
        allocations, _gen = self.client.get_allocations(instance)
        if running_on is not None:
            if running_on not in allocations:
                LOG.error(
                    "%s runs on %s but its allocation is on %s",
                    instance,
                    running_on,
                    sorted(allocations),
                )
            LOG.info("%s: taken over; it runs on %s", instance, running_on)
            if self.records.finish(instance, PLACED, host_uuid=running_on):
                metrics.BUILDS.labels(PLACED).inc()
            return
        if allocations:
            host = _claimed_host(allocations)
            LOG.info("%s: taken over; building on its claimed host %s", instance, host)
            claimed = Selection(
                instance,
                host,
                None,
                None,
                {
                    "allocations": {
                        rp: {"resources": a["resources"]} for rp, a in allocations.items()
                    }
                },
                claimed=True,
            )
            self._build(spec, instance, [claimed], None, generation)
            return
        LOG.info("%s: taken over; nothing claimed, scheduling it again", instance)
        self._schedule_and_dispatch(spec, {instance: generation}, None)

    def start_sweeping(self):
        def loop():
            while not self._stop.wait(self.conf.conductor.sweep_interval):
                try:
                    while self.sweep_once() and not self._stop.is_set():
                        pass
                except _PLACEMENT_ERRORS as exc:
                    LOG.warning("sweep: %s", exc)
                except oslo_messaging.MessagingException as exc:
                    LOG.warning("sweep: bus: %s", exc)

        self._sweeper = threading.Thread(target=loop, name="sweeper", daemon=True)
        self._sweeper.start()

    def stop_sweeping(self):
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=60)


class _Bare:
    """The fields of a spec an outcome needs, from a record whose spec is unusable."""

    def __init__(self, record):
        self.request_id = record["request_id"]
        self.workload_class = record["workload_class"]


def _where(selection, host_uuid):
    if host_uuid == selection.host_uuid or host_uuid is None:
        return selection
    return Selection(selection.instance_uuid, host_uuid, None, None, {}, claimed=True)


def _claimed_host(allocations):
    """The host of a claim: the provider holding VCPU, else the first."""
    for rp, alloc in sorted(allocations.items()):
        if "VCPU" in alloc.get("resources", {}):
            return rp
    return sorted(allocations)[0]


class SuperConductorEndpoint:
    target = oslo_messaging.Target(version="1.0")

    def __init__(self, conductor):
        self.conductor = conductor

    def build_instances(self, ctxt, request_spec, reply_topic=None):
        start = time.perf_counter()
        try:
            self.conductor.build_instances(request_spec, reply_topic)
        except _PLACEMENT_ERRORS as exc:
            # Held records stay pending; the sweep finishes them after the lease.
            LOG.warning("build_instances: %s", exc)
        finally:
            metrics.HANDLED.labels("build_instances").observe(time.perf_counter() - start)


class CellConductorEndpoint:
    target = oslo_messaging.Target(version="1.0")

    def __init__(self, conductor):
        self.conductor = conductor

    def build_instance(self, ctxt, instance_uuid, request_spec, selections, reply_topic=None):
        start = time.perf_counter()
        try:
            self.conductor.build_instance(instance_uuid, request_spec, selections, reply_topic)
        except _PLACEMENT_ERRORS as exc:
            LOG.warning("build_instance %s: %s", instance_uuid, exc)
        finally:
            metrics.HANDLED.labels("build_instance").observe(time.perf_counter() - start)
