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
  conductors of the selected host's cell (one ``build_many`` per cell for
  the builds that concurrent requests hand off together);
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
failed build). Outcomes go to the submitter's topic as they happen (those
finished together in one message); the finished record in placement is the
durable copy.
"""

import collections
import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid as uuid_lib

from conductor import batch as batch_mod
from conductor import conf as conf_mod
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
# Builds of one build_many message run side by side, at most this many.
BUILD_THREADS = 16
_PLACEMENT_ERRORS = (client_mod.PlacementError, client_mod.PlacementUnreachable)


def _outcome(spec, instance, status):
    return spec_mod.BuildResult(instance, spec.request_id, spec.workload_class, status)


class _Lease:
    """Keeps a record's lease alive during a long build: renews it once half
    of it has passed. ``keep()`` is False once the record is somebody else's.

    ``taken_at`` is when the take was *asked for* (monotonic): placement
    starts the lease somewhere between the asking and the answer, and a slow
    answer (a busy database, a bulk call queued behind another) must not
    make the lease look younger than it is, or a build could start after
    placement let another conductor take the record over."""

    def __init__(self, records, instance, generation, taken_at=None):
        self.records = records
        self.instance = instance
        self.generation = generation
        self.taken_at = time.monotonic() if taken_at is None else taken_at

    def keep(self):
        if time.monotonic() - self.taken_at < self.records.lease_seconds / 2:
            return True
        asked = time.monotonic()
        gen = self.records.take(self.instance, self.generation)
        if gen is None:
            return False
        self.generation, self.taken_at = gen, asked
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
        """Renew every lease (one bulk call); return the instances still held."""
        with self._lock:
            if self.generations:
                for instance, new in self.records.take_many(self.generations).items():
                    if new is None:
                        del self.generations[instance]
                    else:
                        self.generations[instance] = new
            return list(self.generations)

    def hand_off(self, instances):
        """Leave the records for the receivers of the hand-off (one bulk
        call); return {instance: generation handed off} of those that were
        still ours."""
        with self._lock:
            mine = {i: self.generations.pop(i) for i in instances if i in self.generations}
        if not mine:
            return {}
        handed = self.records.take_many(mine, hand_off=True)
        return {i: g for i, g in handed.items() if g is not None}

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
        # Messages in hand (RPC handlers and the builds of a bulk message):
        # more than one means a batch is worth waiting a moment for.
        self._active = 0
        self._active_lock = threading.Lock()
        window = conf.conductor.batch_window_ms / 1000.0
        size = conf.conductor.batch_size
        self.records = records_mod.Records(
            client, name, conf.conductor.lease_seconds, window, size, self._in_company
        )
        # Failed-build counts placement last answered for hosts this
        # conductor saw fail (what _tell_schedulers compares with).
        self._failed_builds = {}
        self._failed_builds_lock = threading.Lock()
        self._outcome_reports = batch_mod.Batcher(
            self._send_outcomes, window, size, self._in_company, "build_outcomes"
        )
        # Messages are group-committed too: the builds that concurrent
        # requests hand off to one cell at about the same time share one
        # build_many, and the outcomes finished together for one submitter
        # share one instances_done. Every message costs CPU in the sender,
        # the broker and the receiver.
        self._build_casts = batch_mod.Batchers(
            self._send_builds, window, size, self._in_company, "build_many", metrics.BUS_BATCH
        )
        self._outcome_casts = batch_mod.Batchers(
            self._send_instances_done,
            window,
            size,
            self._in_company,
            "instances_done",
            metrics.BUS_BATCH,
        )
        self.scheduler = rpc.SchedulerAPI(conf, transport)
        # The threads that handle the requests of build_instances_many
        # messages (conductor.conf.request_threads: enough to fill the
        # scheduling calls in flight); an executor starts its threads on
        # first use. A message's requests are queued together, in the order
        # the messages came in (_fanout_lock), so they are recorded in the
        # order the submitter sent them.
        self._fanout = concurrent.futures.ThreadPoolExecutor(
            conf_mod.request_threads(conf), thread_name_prefix="request"
        )
        self._fanout_lock = threading.Lock()
        # Concurrent requests share select_destinations_many calls.
        self._scheduling = None
        if conf.conductor.schedule_batch_size > 1:
            self._scheduling = batch_mod.Batcher(
                self._select_many,
                window,
                conf.conductor.schedule_batch_size,
                self._in_company,
                "select_destinations",
                concurrent=conf.conductor.schedule_calls_in_flight,
            )
        self.conductors = rpc.ConductorAPI(conf, transport)
        self.outcomes = rpc.OutcomeAPI(transport)
        self._sweeper = None
        self._stop = threading.Event()

    def _in_company(self):
        return self._active > 1

    @contextlib.contextmanager
    def working(self):
        """Count a message (or a build) in hand while the block runs."""
        with self._active_lock:
            self._active += 1
        try:
            yield
        finally:
            with self._active_lock:
                self._active -= 1

    # -- super conductor -------------------------------------------------------

    def build_instances(self, request_spec, reply_topic=None):
        problem = spec_mod.reply_topic_problem(reply_topic)
        if problem is not None:
            # Nobody to answer: refused whole, before anything is recorded
            # (a bad topic in a shared flush would fail the other requests').
            metrics.REFUSED.inc()
            LOG.warning("build_instances: message refused: %s", problem)
            return
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

    def build_instances_many(self, request_specs, reply_topic=None):
        """Handle the requests of one message side by side (each exactly as
        ``build_instances``), so that they share the bulk calls to placement
        and the scheduler; return when all are handled (the message holds
        its RPC thread meanwhile: what a conductor takes off the bus is
        bounded by its threads, as with single requests)."""
        problem = spec_mod.reply_topic_problem(reply_topic) or spec_mod.list_problem(
            "request_specs", request_specs, spec_mod.MAX_REQUESTS_PER_MESSAGE
        )
        if problem is not None:
            # The whole message, once: nothing of it is recorded or answered
            # (a sender over the limit is not build-submit, which sends at
            # most --requests-per-message, itself at most the limit).
            metrics.REFUSED.inc()
            LOG.warning("build_instances_many: message refused: %s", problem)
            return

        def one(request_spec):
            with self.working():
                try:
                    self.build_instances(request_spec, reply_topic)
                except _PLACEMENT_ERRORS as exc:
                    # Held records stay pending; the sweep finishes them after the lease.
                    LOG.warning("build_instances: %s", exc)
                except Exception:  # noqa: BLE001 - one request's failure is not the others'
                    # As a lone build_instances message would (its RPC
                    # server logs it): what it recorded is pending, and
                    # the sweep finishes it after the lease. The message
                    # keeps its thread until every request is handled.
                    LOG.exception("build_instances in a build_instances_many message")

        # Queued at once (another message's requests are not interleaved
        # with these): build-submit sends a request again when one it sent
        # later was recorded long before it, and a message's requests
        # scattered behind those of every other message in hand would look
        # lost (and be sent again, each a duplicate to refuse).
        with self._fanout_lock:
            futures = [self._fanout.submit(one, spec) for spec in request_specs]
        for future in futures:
            future.result()

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
                dumped = spec_mod.dump_request_spec(spec)
                if self._scheduling is None:
                    answer = self.scheduler.select_destinations(dumped, on_retry=release)
                else:
                    answer = self._scheduling.submit((dumped, release))
        except (rpc.Unanswered, rpc.SchedulerAnswerError) as exc:
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
            self._fail_many(
                spec, held.instances(), f"scheduling failed: {answer['error']}", reply_topic
            )
            return
        selections = spec_mod.load_selections(answer["selections"]).selections
        # One bulk hand-off; the ones taken over meanwhile are left out
        # (their taker finishes them).
        handed = held.hand_off([hosts[0].instance_uuid for hosts in selections])
        by_cell = {}
        for hosts in selections:
            instance = hosts[0].instance_uuid
            if instance not in handed:
                continue
            by_cell.setdefault(hosts[0].cell, []).append(
                {
                    "instance_uuid": instance,
                    "request_spec": spec_mod.dump_request_spec(spec.for_instances([instance])),
                    "selections": spec_mod.dump_selections(spec.request_id, [hosts]),
                    "generation": handed[instance],
                }
            )
        for cell, builds in by_cell.items():
            if cell is None:
                # A host without a cell has no cell conductors: build here,
                # in this thread, one after the other.
                self.build_many(builds, reply_topic, side_by_side=False)
            else:
                self._cast_builds(cell, builds, reply_topic)

    def _select_many(self, items):
        """Flush of the scheduling batcher: [(request spec, release)] ->
        one answer each (each request's release runs before a retry that
        may concern it: every one before a bulk retry, its own alone when
        the requests are called one by one)."""
        return self.scheduler.select_destinations_many(
            [spec for spec, _release in items], releases=[release for _spec, release in items]
        )

    def _cast_builds(self, cell, builds, reply_topic):
        """Cast handed-off builds to the conductors of ``cell``, in one
        ``build_many`` with the builds other requests hand off to the cell
        at about the same time. Returns once the message is sent; a cast
        that fails raises in every request of it, as a lone cast would (the
        records are handed off, not lost: the sweep takes them over)."""
        self._build_casts.submit_many(cell, [(b, reply_topic) for b in builds])

    def _send_builds(self, cell, items):
        """One message for (build, reply_topic) pairs (``build_many``); a
        cells API without it (an older simulator's direct calls) gets one
        ``build_instance`` per instance."""
        many = getattr(self.conductors, "build_many", None)
        if many is not None:
            builds, reply_topic = _one_message(items)
            many(cell, builds, reply_topic)
        else:
            for b, reply_topic in items:
                self.conductors.build_instance(
                    cell, b["instance_uuid"], b["request_spec"], b["selections"], reply_topic
                )
        return [None] * len(items)

    # -- cell conductor --------------------------------------------------------

    def build_instance(
        self, instance_uuid, request_spec, selections, reply_topic=None, generation=None
    ):
        """Take the record and build. ``generation``: the one the super
        conductor handed the record off at (then taking it is the only
        call); without it (a message of an older super conductor) the record
        is read first."""
        if generation is None:
            record = self.records.get(instance_uuid)
            if record is None or record["status"] != "pending":
                return
            generation = record["generation"]
        asked = time.monotonic()
        taken = self.records.take(instance_uuid, generation)
        if taken is None:
            return  # another conductor holds it, or it is finished
        self._build_taken(instance_uuid, request_spec, selections, reply_topic, taken, asked)

    def build_many(self, builds, reply_topic=None, side_by_side=True):
        """Build the instances of one message: their records taken in one
        bulk call (the ones lost are left to whoever holds them), then built
        side by side (unless not ``side_by_side``) so that their finishes
        share calls too. A build's own ``reply_topic`` (RPC 1.2) overrides
        the message's."""
        known = {b["instance_uuid"]: b["generation"] for b in builds}
        asked = time.monotonic()
        taken = self.records.take_many(known)
        work = [b for b in builds if taken.get(b["instance_uuid"]) is not None]

        def one(b):
            with self.working():
                try:
                    self._build_taken(
                        b["instance_uuid"],
                        b["request_spec"],
                        b["selections"],
                        b.get("reply_topic", reply_topic),
                        taken[b["instance_uuid"]],
                        asked,
                    )
                except _PLACEMENT_ERRORS as exc:
                    # Still held: the sweep finishes it after the lease.
                    LOG.warning("build_many %s: %s", b["instance_uuid"], exc)

        if len(work) <= 1 or not side_by_side:
            for b in work:
                one(b)
            return
        with concurrent.futures.ThreadPoolExecutor(min(len(work), BUILD_THREADS) or 1) as pool:
            list(pool.map(one, work))

    def _build_taken(
        self, instance_uuid, request_spec, selections, reply_topic, generation, taken_at
    ):
        try:
            spec = spec_mod.load_request_spec(request_spec)
            hosts = spec_mod.load_selections(selections).selections[0]
        except spec_mod.InvalidMessage as exc:
            claim_mod.unclaim(self.client, instance_uuid)
            record = self.records.get(instance_uuid)
            self._fail(_Bare(record), instance_uuid, f"bad build message: {exc}", reply_topic)
            return
        self._build(spec, instance_uuid, hosts, reply_topic, generation, taken_at)

    def _build(self, spec, instance, hosts, reply_topic, generation, taken_at=None):
        lease = _Lease(self.records, instance, generation, taken_at)
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
            result.status, result.host_uuid = PLACED, current.host_uuid
            result.host_name = current.host_name
            result.schedulable_class, result.family = current.schedulable_class, current.family
            # The finish carries the build's success (it clears the host's
            # failed builds): no separate report.
            if self.records.finish(
                instance, PLACED, host_uuid=current.host_uuid, build_succeeded=True
            ):
                metrics.BUILDS.labels(PLACED).inc()
                self._succeeded_on(current.host_uuid)
                self._tell_submitter(reply_topic, spec_mod.dump_build_result(result))
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
            self._outcome_reports.submit((host_uuid, succeeded))
        except client_mod.PlacementError as exc:
            LOG.warning("build outcome on %s not reported: %s", host_uuid, exc)

    def _send_outcomes(self, outcomes):
        """Many reports in one POST /nodes/build_outcomes (in order); one
        call each on a placement without it."""
        try:
            counts = self.client.report_build_outcomes(outcomes)
        except client_mod.PlacementError as exc:
            if not exc.route_missing:
                raise
            for host_uuid, succeeded in outcomes:
                self.client.report_build_outcome(host_uuid, succeeded)
            return [None] * len(outcomes)
        self._tell_schedulers(counts or {})
        return [None] * len(outcomes)

    def _succeeded_on(self, host_uuid):
        """A build succeeded on the host (its finish cleared the count in
        placement): lift it in the schedulers' kept walks if this conductor
        saw it failing."""
        if host_uuid in self._failed_builds:
            self._tell_schedulers({host_uuid: 0})

    def _tell_schedulers(self, counts):
        """Cast the hosts whose failed-build count moved from what this
        conductor last saw to every scheduler worker: their kept walks carry
        the counts of when they were read, and the BuildFailureWeigher must
        sink a failing host (and lift a repaired one) at once, not a
        host_cache_seconds later. Every failure moves a count; a success
        only when this conductor saw the host failing (one that another
        conductor saw fail is lifted when the walks are next read)."""
        changed = {}
        with self._failed_builds_lock:
            for host_uuid, count in counts.items():
                if count != self._failed_builds.get(host_uuid, 0):
                    changed[host_uuid] = count
                if count:
                    self._failed_builds[host_uuid] = count
                else:
                    self._failed_builds.pop(host_uuid, None)
        if not changed:
            return
        try:
            self.scheduler.build_outcomes(changed)
        except Exception as exc:  # noqa: BLE001 - the weigher catches up at the next walk
            LOG.warning("scheduler workers not told of build outcomes on %s: %s", changed, exc)

    def _fail(self, spec, instance, reason, reply_topic, result=None):
        if not self.records.finish(instance, FAILED, reason=reason):
            return
        metrics.BUILDS.labels(FAILED).inc()
        out = result or _outcome(spec, instance, FAILED)
        out.status, out.reason, out.host_uuid, out.host_name = FAILED, reason, None, None
        self._tell_submitter(reply_topic, spec_mod.dump_build_result(out))

    def _fail_many(self, spec, instances, reason, reply_topic):
        """``_fail`` for several instances of one request: one bulk finish
        and one message to the submitter."""
        done = self.records.finish_many([(i, FAILED, None, reason) for i in instances])
        outcomes = []
        for instance, finished in zip(instances, done, strict=True):
            if not finished:
                continue  # no longer ours: its holder tells the submitter
            metrics.BUILDS.labels(FAILED).inc()
            out = _outcome(spec, instance, FAILED)
            out.reason = reason
            outcomes.append(spec_mod.dump_build_result(out))
        if reply_topic and outcomes:
            self._outcome_casts.submit_many(reply_topic, outcomes)

    def _tell_submitter(self, reply_topic, outcome):
        """Cast an outcome to its submitter, in one message with the other
        outcomes for that topic finished at about the same time. A cast that
        fails is logged, not raised: the outcome is in the finished build
        request, which the submitter also reads."""
        if reply_topic:
            self._outcome_casts.submit(reply_topic, outcome)

    def _send_instances_done(self, reply_topic, outcomes):
        self.outcomes.instances_done(reply_topic, outcomes)
        return [None] * len(outcomes)

    # -- taking over the work of dead conductors -----------------------------------

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
                self._resume(record, generation, taken_at)
            except _PLACEMENT_ERRORS as exc:
                LOG.warning(
                    "%s: takeover interrupted (%s); retried after the lease",
                    record["instance_uuid"],
                    exc,
                )
        return taken

    def _resume(self, record, generation, taken_at=None):
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
            if self.records.finish(instance, PLACED, host_uuid=running_on, build_succeeded=True):
                metrics.BUILDS.labels(PLACED).inc()
                self._succeeded_on(running_on)
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
            self._build(spec, instance, [claimed], None, generation, taken_at)
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


def _one_message(items):
    """(build, reply_topic) pairs as one build_many message: (builds, the
    message's reply topic). The most common topic is the message's; a build
    going elsewhere carries its own (RPC 1.2), so a message of builds for
    one submitter stays 1.1."""
    # A topic that is not one (never let in: every handler checks its
    # message's) must not fail the other builds of the flush: no answer.
    items = [(b, topic if isinstance(topic, str) else None) for b, topic in items]
    topics = collections.Counter(topic for _b, topic in items)
    default = topics.most_common(1)[0][0]
    builds = [b if topic == default else {**b, "reply_topic": topic} for b, topic in items]
    return builds, default


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
    """Topic ``conductor``. 1.0: ``build_instances`` (one request); 1.1:
    ``build_instances_many`` (several requests of one submitter)."""

    target = oslo_messaging.Target(version="1.1")

    def __init__(self, conductor):
        self.conductor = conductor

    def build_instances(self, ctxt, request_spec, reply_topic=None):
        start = time.perf_counter()
        try:
            with self.conductor.working():
                self.conductor.build_instances(request_spec, reply_topic)
        except _PLACEMENT_ERRORS as exc:
            # Held records stay pending; the sweep finishes them after the lease.
            LOG.warning("build_instances: %s", exc)
        finally:
            metrics.HANDLED.labels("build_instances").observe(time.perf_counter() - start)

    def build_instances_many(self, ctxt, request_specs, reply_topic=None):
        start = time.perf_counter()
        try:
            self.conductor.build_instances_many(request_specs, reply_topic)
        finally:
            metrics.HANDLED.labels("build_instances_many").observe(time.perf_counter() - start)


class CellConductorEndpoint:
    """Topic ``conductor.<cell>``. 1.0: ``build_instance`` (one instance);
    1.1: ``build_many`` (instances going to this cell, each with the
    generation it was handed off at, one reply topic per message); 1.2: a
    build of ``build_many`` may carry its own ``reply_topic`` (builds of
    several submitters in one message). A conductor serves every older
    form, so cell conductors are upgraded before super conductors (whose
    messages are 1.2 only when their builds' reply topics differ)."""

    target = oslo_messaging.Target(version="1.2")

    def __init__(self, conductor):
        self.conductor = conductor

    def build_instance(
        self, ctxt, instance_uuid, request_spec, selections, reply_topic=None, generation=None
    ):
        start = time.perf_counter()
        problem = spec_mod.reply_topic_problem(reply_topic)
        if problem is not None:
            # Handed off, not taken: the sweep takes it over after the lease.
            LOG.warning("build_instance %s: bad message dropped: %s", instance_uuid, problem)
            return
        try:
            with self.conductor.working():
                self.conductor.build_instance(
                    instance_uuid, request_spec, selections, reply_topic, generation
                )
        except _PLACEMENT_ERRORS as exc:
            LOG.warning("build_instance %s: %s", instance_uuid, exc)
        finally:
            metrics.HANDLED.labels("build_instance").observe(time.perf_counter() - start)

    def build_many(self, ctxt, builds, reply_topic=None):
        start = time.perf_counter()
        try:
            problem = spec_mod.reply_topic_problem(reply_topic)
            if problem is not None:
                raise ValueError(problem)
            builds = _checked_builds(builds)
        except ValueError as exc:
            LOG.warning("build_many: bad message dropped: %s", exc)
            return
        try:
            with self.conductor.working():
                self.conductor.build_many(builds, reply_topic)
        except _PLACEMENT_ERRORS as exc:
            # Held records stay pending; the sweep finishes them after the lease.
            LOG.warning("build_many: %s", exc)
        finally:
            metrics.HANDLED.labels("build_many").observe(time.perf_counter() - start)


def _canonical_uuid(value):
    try:
        return isinstance(value, str) and str(uuid_lib.UUID(value)) == value
    except ValueError:
        return False


_BUILD_KEYS = {"instance_uuid", "request_spec", "selections", "generation"}
# A build's own reply topic (1.2; without it, the message's).
_OPTIONAL_BUILD_KEYS = {"reply_topic"}


def _checked_builds(builds):
    """The builds of a build_many message, or ValueError naming what is wrong
    (the request spec and selections inside are checked when built)."""
    if not isinstance(builds, list) or not builds:
        raise ValueError("builds is not a non-empty list")
    problem = spec_mod.list_problem("builds", builds, spec_mod.MAX_BUILDS_PER_MESSAGE)
    if problem is not None:
        raise ValueError(problem)
    seen = set()
    for number, b in enumerate(builds):
        if (
            not isinstance(b, dict)
            or not _BUILD_KEYS <= set(b) <= _BUILD_KEYS | _OPTIONAL_BUILD_KEYS
        ):
            raise ValueError(
                f"builds[{number}] is not an object of {sorted(_BUILD_KEYS)}"
                f" (and optionally {sorted(_OPTIONAL_BUILD_KEYS)})"
            )
        problem = spec_mod.reply_topic_problem(b.get("reply_topic"))
        if problem is not None:
            raise ValueError(f"builds[{number}].{problem}")
        gen = b["generation"]
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            raise ValueError(f"builds[{number}].generation is not a generation")
        if not _canonical_uuid(b["instance_uuid"]):
            raise ValueError(f"builds[{number}].instance_uuid is not a canonical uuid")
        if b["instance_uuid"] in seen:
            raise ValueError(f"builds[{number}]: instance {b['instance_uuid']} twice")
        seen.add(b["instance_uuid"])
    return builds
