"""The super conductor's scheduling and dispatch.

For one request (a RequestSpec, checked where it entered the process:
conductor.intake, or the sweep's stored record): record one pending build
request per instance, held by this process under a lease (all or none, so
a redelivered message finds them and is dropped); call the scheduler
(``select_destinations``, with a timeout and bounded retries, each try
with its deadline: joule.rpc; before a retry it releases whatever a
scheduler that died half way claimed, and the leases are renewed
meanwhile: conductor.leases.Held); then cast each instance's selection
list to the conductors of the selected host's cell (``build_many``, shared
by the builds that concurrent requests dispatch to that cell together),
each build naming this process as its record's holder: the cell conductor
takes the record from it at the generation of the cast, so no hand-off
write comes between. A host without a cell has no cell conductors: its
instances are built here (conductor.cell_build). A request that could not be scheduled is failed in
one bulk finish and one message (conductor.outcomes); when no scheduler
answered in time its instances are watched for a claim made too late
(conductor.abandoned, released by the sweep). A request that fits only
on sleeping nodes (the scheduler answers ``waiting``) is held, its records
pending, and scheduled again while they wake (conductor.wake_waits).

The spec leaves the process only here: dumped into its records (a
placement write), into the scheduling call and into the builds cast to a
cell (messages).
"""

import collections
import itertools
import logging
import time

from conductor import abandoned as abandoned_mod
from conductor import cell_build as cell_mod
from conductor import leases
from conductor import metrics
from conductor import records as records_mod
from conductor import wake_waits
from joule import placement_client as client_mod
from joule import request_spec as spec_mod
from joule import rpc
from joule import vocabulary
from scheduler import claim as claim_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")


class SuperConductor:
    """Schedules requests and dispatches their builds.

    :param bus: the bus clients (``scheduler``, ``conductors``), looked up
        at each call.
    :param batchers: the conductor's batchers (conductor.batchers): its
        ``scheduling`` (None: one call per request) and ``build_casts``.
    """

    def __init__(
        self,
        records,
        client,
        bus,
        reporter,
        cell_build,
        batchers,
        abandoned=None,
        record_retry_seconds=0.0,
        wake_wait_seconds=0.0,
        wake_retry_interval=15.0,
    ):
        self.records = records
        self.client = client
        self.bus = bus
        self.reporter = reporter
        self.cell_build = cell_build
        self._scheduling = batchers.scheduling
        self._build_casts = batchers.build_casts
        # The instances failed because no scheduler answered in time, for
        # the sweep to release a claim a late scheduler made after all.
        self.abandoned = abandoned if abandoned is not None else abandoned_mod.Abandoned()
        self.record_retry_seconds = record_retry_seconds
        # Requests that fit only on sleeping nodes, held while they wake.
        self.wake_waits = wake_waits.WakeWaits(
            records, self.retry_waiting, wake_wait_seconds, wake_retry_interval
        )

    def build_instances(self, spec, reply_topic=None, recorded=None):
        """Record the request's instances held by this conductor, then
        schedule and dispatch them; ``recorded()``, if given, is called in
        between."""
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
            generations = self._record(spec, items)
        except records_mod.AlreadyRecorded:
            # A second delivery of a request already being handled (the
            # submitter re-sends what it does not see recorded).
            LOG.info("%s: already recorded, dropping the duplicate", spec.request_id)
            return
        except records_mod.PLACEMENT_ERRORS as exc:
            self.reporter.request_refused(
                reply_topic, spec.request_id, f"build requests not recorded: {exc}"
            )
            return
        if recorded is not None:
            recorded()
        self.schedule_and_dispatch(spec, generations, reply_topic)

    def _record(self, spec, items):
        """``records.create_held``, tried again while placement is not there
        (its database unavailable: 503; or no answer) for up to
        ``record_retry_seconds``: a database restart must not refuse the
        requests that arrive meanwhile (the create is idempotent: a lost
        answer is read back). Any other refusal is final at once."""
        give_up = time.monotonic() + self.record_retry_seconds
        for attempt in itertools.count():
            try:
                return self.records.create_held(items)
            except records_mod.PLACEMENT_ERRORS as exc:
                pause = min(RECORD_RETRY_BASE * 2**attempt, RECORD_RETRY_MAX)
                if not _not_there(exc) or time.monotonic() + pause > give_up:
                    raise
                LOG.warning(
                    "%s: build requests not recorded yet (%s); trying again in %.0f s",
                    spec.request_id,
                    exc,
                    pause,
                )
                time.sleep(pause)

    def schedule_and_dispatch(self, spec, generations, reply_topic):
        """Schedule the instances of ``generations`` (records this conductor
        holds) and hand them off to be built."""
        self._schedule(spec, leases.Held(self.records, generations), reply_topic)

    def retry_waiting(self, waiting):
        """Schedule again a request held for waking nodes (conductor.wake_waits)."""
        self._schedule(waiting.spec, waiting.held, waiting.reply_topic, waiting)

    def _schedule(self, spec, held, reply_topic, waiting=None):
        def release():
            # Only what is still ours, each release guarded by its record's
            # lease: a record whose lease ran out (this process stalled) may
            # be another conductor's build by now.
            for instance in held.renew():
                held.write(instance, claim_mod.unclaim, self.client, instance)

        answer = self._select(spec, held, release)
        if answer["status"] == WAITING and self._hold(spec, held, reply_topic, answer, waiting):
            return
        if waiting is not None:
            outcome = "placed" if answer["status"] == "placed" else "failed"
            if answer["status"] == WAITING:
                outcome = "timed_out"
                answer = {
                    **answer,
                    "error": f"{answer['error']}; not woken after "
                    f"{self.wake_waits.waited(waiting.since):.0f} s "
                    f"([conductor] wake_wait_seconds = {self.wake_waits.wait_seconds:g})",
                }
            metrics.HELD_FOR_WAKE.labels(outcome).inc()
        if answer["status"] != "placed":
            try:
                release()  # whatever a scheduler that died half way left
            except records_mod.PLACEMENT_ERRORS as exc:
                # Leave the records held: once the lease runs out a sweeper
                # finds the claims and finishes or releases them.
                LOG.warning("%s: claims not released (%s); left to the sweep", spec.request_id, exc)
                return
            instances = held.instances()
            self.reporter.failed_many(
                spec,
                instances,
                f"scheduling failed: {answer['error']}",
                reply_topic,
                held.generations_of(instances),
            )
            if answer.get(rpc.UNANSWERED):
                # A scheduler may still be on it: watched for a late claim.
                self.abandoned.watch(instances)
            return
        selections = spec_mod.load_selections(answer["selections"]).selections
        self._dispatch(spec, held, selections, reply_topic)

    def _hold(self, spec, held, reply_topic, answer, waiting):
        """Hold a request the scheduler said waits for sleeping hosts
        (conductor.wake_waits); False when it may not wait any longer."""
        waits = self.wake_waits
        since = waiting.since if waiting is not None else waits.clock()
        if not waits.may_wait(since):
            return False
        if waiting is None or waiting.reason != answer["error"]:
            # Said where an operator looks (the services log warnings and
            # up): work is waiting for hardware, once per change of what it
            # waits for.
            LOG.warning(
                "%s: held, %s (scheduled again every %g s, for up to %g s)",
                spec.request_id,
                answer["error"].rpartition("; ")[2],
                waits.retry_interval,
                waits.wait_seconds,
            )
        return waits.hold(wake_waits.Waiting(spec, held, reply_topic, since, answer["error"]))

    def _select(self, spec, held, release):
        """The scheduler's answer for ``spec`` (an error answer when none came)."""
        start = time.perf_counter()
        try:
            with held.kept_alive():
                dumped = spec_mod.dump_request_spec(spec)
                if self._scheduling is None:
                    return self.bus.scheduler.select_destinations(dumped, on_retry=release)
                return self._scheduling.submit((dumped, release))
        except rpc.Unanswered as exc:
            return {"status": "error", "error": str(exc), rpc.UNANSWERED: True}
        except rpc.SchedulerAnswerError as exc:
            return {"status": "error", "error": str(exc)}
        finally:
            metrics.SCHEDULER_CALL.observe(time.perf_counter() - start)

    def _dispatch(self, spec, held, selections, reply_topic):
        # Left to their builders without a write: each build names this
        # conductor as the holder, and its builder takes the record from it
        # at the generation held here (a record taken over meanwhile has
        # moved on: that take is lost and its taker finishes it).
        handed = held.leave([hosts[0].instance_uuid for hosts in selections])
        by_cell = {}
        for hosts in selections:
            instance = hosts[0].instance_uuid
            if instance in handed:
                by_cell.setdefault(hosts[0].cell, []).append((instance, hosts))
        for cell, chosen in by_cell.items():
            if cell is None:
                # A host without a cell has no cell conductors: build here,
                # in this thread, one after the other.
                builds = [
                    cell_mod.Build(i, handed[i], reply_topic, spec.for_instances([i]), hosts)
                    for i, hosts in chosen
                ]
                self.cell_build.build_many(builds, side_by_side=False)
                continue
            builds = [
                {
                    "instance_uuid": i,
                    "request_spec": spec_mod.dump_request_spec(spec.for_instances([i])),
                    "selections": spec_mod.dump_selections(spec.request_id, [hosts]),
                    "generation": handed[i],
                    "holder": self.records.owner,
                }
                for i, hosts in chosen
            ]
            self.cast_builds(cell, builds, reply_topic)

    def cast_builds(self, cell, builds, reply_topic):
        """Cast handed-off builds to the conductors of ``cell``, in one
        ``build_many`` with the builds other requests hand off to the cell
        at about the same time. Returns once the message is sent; a cast
        that fails raises in every request of it, as a lone cast would (the
        records are handed off, not lost: the sweep takes them over)."""
        self._build_casts.submit_many(cell, [(b, reply_topic) for b in builds])


# The scheduler's answer for a request that fits only on sleeping nodes.
WAITING = vocabulary.SCHEDULER_WAITING

# The pauses between the tries of recording a request while placement is
# not there: 1, 2, 4, 8, 8 ... seconds.
RECORD_RETRY_BASE = 1.0
RECORD_RETRY_MAX = 8.0


def _not_there(exc):
    """Whether placement could not take the write for now (not there for us,
    or it said so with a 503), rather than refusing it."""
    if isinstance(exc, client_mod.NOT_THERE):
        return True
    return isinstance(exc, client_mod.ServerError) and exc.status == 503


def select_many(bus, items, worker=None, router=None):
    """[(request spec, release)] -> one answer each (each request's release
    runs before a retry that may concern it: every one before a bulk retry,
    its own alone when the requests are called one by one). ``worker``:
    the one to send them to (``router`` suspects it when it does not
    answer), None for any worker on the shared topic."""
    routed = {}
    if worker is not None:
        routed = {"server": worker, "on_silent": lambda: router.suspect(worker)}
    return bus.scheduler.select_destinations_many(
        [spec for spec, _release in items],
        releases=[release for _spec, release in items],
        **routed,
    )


def select_many_routed(bus, router, items):
    """Flush of the scheduling batcher with each kind of request sent to
    the worker that owns it (conductor.scheduler_routing): one call per
    worker among the items, all at once, or one call on the shared topic
    while nothing is routed. The flush stays one batch as the callers see
    it (its answers come back together, so what follows scheduling is
    batched as before); only the bus carries it in parts. One answer per
    item, in order; a part no worker answered is the exception of its own
    items only."""
    groups = router.split([spec for spec, _release in items])
    if list(groups) in ([], [None]):
        return select_many(bus, items)

    def call(worker, positions):
        return select_many(bus, [items[i] for i in positions], worker, router)

    (first, positions), *others = groups.items()
    # The first part in this thread, the others in the router's threads.
    futures = [(where, router.run(call, worker, where)) for worker, where in others]
    done = [(positions, _outcome(call, first, positions))]
    done += [(where, _outcome(future.result)) for where, future in futures]
    results = [None] * len(items)
    for where, answers in done:
        if isinstance(answers, Exception):
            answers = [answers] * len(where)  # raised in each of the part's callers
        for i, answer in zip(where, answers, strict=True):
            results[i] = answer
    return results


def _outcome(fn, *args):
    """``fn(*args)``'s answers, or the exception it raised."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - handed to the part's callers
        return exc


def send_builds(bus, cell, items):
    """Flush of a cell's build casts: one message for (build, reply_topic)
    pairs (``build_many``); a cells API without it (an older simulator's
    direct calls) gets one ``build_instance`` per instance."""
    many = getattr(bus.conductors, "build_many", None)
    if many is not None:
        builds, reply_topic = one_message(items)
        many(cell, builds, reply_topic)
    else:
        for b, reply_topic in items:
            bus.conductors.build_instance(
                cell, b["instance_uuid"], b["request_spec"], b["selections"], reply_topic
            )
    return [None] * len(items)


def one_message(items):
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
