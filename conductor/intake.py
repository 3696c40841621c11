"""Where a message enters the conductor: checked once, loaded into objects.

The RPC endpoints (conductor.endpoints) and the simulator's direct calls
hand the conductor what came off the bus as it came: request specs,
selections and builds in their wire form. Here each message is checked
against its limits and the wire contract (joule.request_spec) and loaded,
once; the rest of the process works on the objects (a RequestSpec, a
``cell_build.Build``) and dumps them again only where they leave it. What
is refused is refused here:

- ``build_instances`` with a reply topic that is not one: nobody to answer,
  dropped and logged before anything is recorded; a spec that does not
  load: refused to the submitter (``request_refused``), nothing recorded;
- ``build_instances_many`` over its limit or with a bad reply topic:
  dropped whole, logged once; its requests otherwise handled side by side
  on the request threads, each as a ``build_instances``, and the message
  done (acknowledged) once each is recorded or refused;
- ``build_instance`` / ``build_many`` with a bad reply topic or a
  malformed list of builds: dropped and logged (the records stay handed
  off, or held by the super conductor that cast them: the sweep takes them
  over after the lease); a build whose spec or
  selections do not load is failed once its record is taken
  (conductor.cell_build).
"""

import concurrent.futures
import logging
import threading
import uuid as uuid_lib

from conductor import cell_build as cell_mod
from conductor import conf as conf_mod
from conductor import metrics
from conductor import records as records_mod
from joule import request_spec as spec_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")


class RequestIntake:
    """The super conductor's messages: requests to schedule and build."""

    def __init__(self, conf, super_conductor, reporter, in_hand):
        self.super_conductor = super_conductor
        self.reporter = reporter
        self.in_hand = in_hand
        # The threads that handle the requests of build_instances_many
        # messages (conductor.conf.request_threads: enough to fill the
        # scheduling calls in flight); an executor starts its threads on
        # first use. A message's requests are queued together, in the order
        # the messages came in (_queueing), so they are recorded in the
        # order the submitter sent them.
        threads = conf_mod.request_threads(conf)
        self.request_threads = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix="request"
        )
        # A request of a build_instances_many message takes one of these
        # from before its record until it is handled: what the process
        # takes in is bounded by what its request threads work on, not by
        # its messages (see build_instances_many).
        self._slots = threading.Semaphore(threads)
        self._queueing = threading.Lock()
        # The requests this process is handling now, by request id: a
        # second delivery of one of them (RabbitMQ hands back a message
        # whose acknowledgement was lost with a connection, possibly to
        # this same process) is dropped here, before its create could be
        # taken for this process's own (a lost answer is read back by
        # owner: conductor.records).
        self._handling = set()
        self._handling_lock = threading.Lock()

    def build_instances(self, request_spec, reply_topic=None, recorded=None):
        """Check, load, record, schedule and dispatch one request.
        ``recorded()``, if given, is called once its build requests are
        recorded (held under this process's lease)."""
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
            self.reporter.request_refused(reply_topic, request_id, str(exc))
            return
        with self._handling_lock:
            again = spec.request_id in self._handling
            self._handling.add(spec.request_id)
        if again:
            LOG.info("%s: in hand already, dropping the duplicate", spec.request_id)
            return
        try:
            self.super_conductor.build_instances(spec, reply_topic, recorded)
        finally:
            with self._handling_lock:
                self._handling.discard(spec.request_id)

    def build_instances_many(self, request_specs, reply_topic=None):
        """Handle the requests of one message side by side (each exactly as
        ``build_instances``), so that they share the bulk calls to placement
        and the scheduler; return once each is recorded (held under this
        process's lease) or refused.

        The message is acknowledged when this returns: from then on its
        requests are placement's records, which this process schedules and
        the sweep of another takes over if it dies (a redelivered message
        finds them recorded). Holding the message until every request was
        dispatched, as this did before, bounded the requests in hand by the
        messages in hand: a submitter sending a request or two per message,
        as a steady load does, left the super conductor a handful to batch,
        and one instance cost every bulk call of its path alone (33.8 ms of
        CPU at 100 offered per second against 8.7 in a burst). What bounds
        the intake now is the request threads: a request takes a slot
        before it is recorded, so a message waits (in hand, not
        acknowledged) while every thread is busy, and the rest wait on the
        queue."""
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
        # Queued at once (another message's requests are not interleaved
        # with these): build-submit sends a request again when one it sent
        # later was recorded long before it, and a message's requests
        # scattered behind those of every other message in hand would look
        # lost (and be sent again, each a duplicate to refuse).
        recorded = []
        with self._queueing:
            for spec in request_specs:
                self._slots.acquire()
                done = threading.Event()
                try:
                    self.request_threads.submit(self._one_of_many, spec, reply_topic, done)
                except BaseException:
                    self._slots.release()
                    raise
                recorded.append(done)
        for done in recorded:
            done.wait()

    def _one_of_many(self, request_spec, reply_topic, recorded):
        try:
            with self.in_hand.working():
                try:
                    self.build_instances(request_spec, reply_topic, recorded.set)
                except records_mod.PLACEMENT_ERRORS as exc:
                    # Held records stay pending; the sweep finishes them after the lease.
                    LOG.warning("build_instances: %s", exc)
                except Exception:  # noqa: BLE001 - one request's failure is not the others'
                    # As a lone build_instances message would (its RPC server
                    # logs it): what it recorded is pending, and the sweep
                    # finishes it after the lease.
                    LOG.exception("build_instances in a build_instances_many message")
        finally:
            recorded.set()  # refused, a duplicate, or failed before its record
            self._slots.release()


class BuildIntake:
    """The cell conductor's messages: instances to build."""

    def __init__(self, cell_build):
        self.cell_build = cell_build

    def build_instance(
        self, instance_uuid, request_spec, selections, reply_topic=None, generation=None
    ):
        problem = spec_mod.reply_topic_problem(reply_topic)
        if problem is not None:
            # Handed off, not taken: the sweep takes it over after the lease.
            LOG.warning("build_instance %s: bad message dropped: %s", instance_uuid, problem)
            return
        self.cell_build.build_one(
            build_of(instance_uuid, request_spec, selections, reply_topic, generation)
        )

    def build_many(self, builds, reply_topic=None):
        """A build's own ``reply_topic`` (RPC 1.2) overrides the message's."""
        try:
            problem = spec_mod.reply_topic_problem(reply_topic)
            if problem is not None:
                raise ValueError(problem)
            builds = checked_builds(builds)
        except ValueError as exc:
            LOG.warning("build_many: bad message dropped: %s", exc)
            return
        self.cell_build.build_many(
            [
                build_of(
                    b["instance_uuid"],
                    b["request_spec"],
                    b["selections"],
                    b.get("reply_topic", reply_topic),
                    b["generation"],
                    b.get("holder"),
                )
                for b in builds
            ]
        )


def build_of(instance_uuid, request_spec, selections, reply_topic, generation, holder=None):
    """The ``Build`` of one build message: its spec and hosts loaded, or the
    problem that kept them from loading."""
    try:
        spec = spec_mod.load_request_spec(request_spec)
        hosts = spec_mod.load_selections(selections).selections
    except spec_mod.InvalidMessage as exc:
        return cell_mod.Build(
            instance_uuid, generation, reply_topic, problem=str(exc), holder=holder
        )
    if not hosts:
        return cell_mod.Build(
            instance_uuid,
            generation,
            reply_topic,
            problem="selections: no host for the instance",
            holder=holder,
        )
    return cell_mod.Build(instance_uuid, generation, reply_topic, spec, hosts[0], holder=holder)


def _canonical_uuid(value):
    try:
        return isinstance(value, str) and str(uuid_lib.UUID(value)) == value
    except ValueError:
        return False


_BUILD_KEYS = {"instance_uuid", "request_spec", "selections", "generation"}
# A build's own reply topic (1.2; without it, the message's), and the super
# conductor that still holds its record (1.4; without it, handed off).
_OPTIONAL_BUILD_KEYS = {"reply_topic", "holder"}
# What placement takes as an owner's name.
_OWNER_MAX = 255


def checked_builds(builds):
    """The builds of a build_many message, or ValueError naming what is wrong
    (the request spec and selections inside are loaded by ``build_of``)."""
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
        holder = b.get("holder")
        if holder is not None and (
            not isinstance(holder, str) or not 0 < len(holder) <= _OWNER_MAX
        ):
            raise ValueError(f"builds[{number}].holder is not a conductor's name")
        gen = b["generation"]
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            raise ValueError(f"builds[{number}].generation is not a generation")
        if not _canonical_uuid(b["instance_uuid"]):
            raise ValueError(f"builds[{number}].instance_uuid is not a canonical uuid")
        if b["instance_uuid"] in seen:
            raise ValueError(f"builds[{number}]: instance {b['instance_uuid']} twice")
        seen.add(b["instance_uuid"])
    return builds
