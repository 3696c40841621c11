"""The message bus: oslo.messaging transport, topics and the RPC APIs.

The services talk as nova's do: ``build-submit`` casts
request specs to the super conductors (topic ``conductor``), a super
conductor calls the schedulers (topic ``scheduler``, ``select_destinations``)
and casts the instances' selection lists to their cell's conductors (topic
``conductor.<cell>``, ``build_many``: the builds of every request handed off
at about the same time share one message), and whoever finishes instances
casts their outcomes to the submitter's own topic (``instances_done``, one
message for the outcomes finished together). Any number of processes share a topic; RabbitMQ
hands each message to one of them.

``[DEFAULT] transport_url`` picks the bus (``OS_DEFAULT__TRANSPORT_URL``
overrides it): ``rabbit://user:pass@host:5672/vhost`` in production, and
``fake://`` (oslo.messaging's in-memory transport) for everything in one
process (the demo, and tests that do not test the bus), so there is one code
path. Payloads are plain JSON values; the request spec inside them is checked
against the wire contract by its receiver.
"""

import importlib
import importlib.metadata
import logging
import os
import random
import sys
import threading
import time
import warnings

from oslo_config import cfg

from joule import config
from joule import idle_cache
from joule import metrics_http
from joule import startup

# oslo.messaging pulls in oslo.service and futurist, which import eventlet
# whenever it is installed (oslo.messaging installs it), here and again when
# the rabbit driver connects; eventlet warns on import that it is
# deprecated. The services never use it (their servers run oslo.messaging's
# threading executor, nothing is monkey-patched), so that warning is only
# noise on every start: filtered by its message, for whichever import comes
# first. This code never imports eventlet itself.
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
with warnings.catch_warnings():
    # oslo.messaging's own import-time warnings, likewise noise.
    warnings.simplefilter("ignore")
    import oslo_messaging
    import oslo_messaging.opts

LOG = logging.getLogger(__name__)

SCHEDULER_TOPIC = "scheduler"
CONDUCTOR_TOPIC = "conductor"
# The scheduler workers' claims, fanned out to every worker (scheduler.claim_feed).
CLAIMS_TOPIC = "scheduler_claims"
# A node agent's compute service: compute.<host> (node_agent.compute).
COMPUTE_TOPIC = "compute"
COMPUTE_RPC_VERSION = "1.0"
RPC_VERSION = "1.0"
# The services' default: the local RabbitMQ. The demo (one process) uses
# IN_MEMORY_TRANSPORT_URL.
DEFAULT_TRANSPORT_URL = "rabbit://guest:guest@127.0.0.1:5672/"
IN_MEMORY_TRANSPORT_URL = "fake://"
# [DEFAULT] executor_thread_pool_size of a service that does not derive its
# own (see derive_executor_threads): the messages one process handles at
# once. oslo's 64 makes 64 schedulers race (scheduler workers that do not
# batch), and lets a super conductor hold 64 messages it has not recorded yet.
EXECUTOR_THREADS = 8
# The exchange of our topics (oslo's default is "openstack", nova's "nova").
CONTROL_EXCHANGE = "joule"

rpc_group = cfg.OptGroup("rpc", title="Message bus")

rpc_opts = [
    cfg.IntOpt(
        "call_timeout",
        default=30,
        min=1,
        help="Seconds a caller waits for the answer of an RPC call (the super "
        "conductor's select_destinations) before it counts as unanswered.",
    ),
    cfg.IntOpt(
        "call_retries",
        default=3,
        min=0,
        help="How often an unanswered call is sent again (with backoff) before "
        "the caller gives up: a scheduler worker that died takes its request "
        "with it, another one answers the retry.",
    ),
    cfg.IntOpt(
        "stop_timeout",
        default=45,
        min=1,
        help="Seconds a service given SIGTERM has to finish the messages in "
        "hand (it takes no new one, and those it held but had not started go "
        "back to the queue at once), after which it exits anyway: a message it "
        "did not finish was not acknowledged and goes to another process, and a "
        "conductor's records are taken over by another's sweep after their "
        "lease. Keep it below the unit's TimeoutStopSec (etc/systemd: 60 s "
        "scheduler-worker, 90 s conductor-worker), which SIGKILLs.",
    ),
    cfg.StrOpt(
        "topic_prefix",
        default="",
        help="Prefix of every topic this deployment uses (e.g. 'test42.'): "
        "several deployments can share one virtual host without taking each "
        "other's messages. Empty in production.",
    ),
]

# The services use their own ConfigOpts (tests run several in one process),
# not the global cfg.CONF oslo.messaging registers its options on at import,
# so they register oslo.messaging's options there themselves: the groups
# its public list_opts() names that a service uses (the rabbit driver; the
# kafka driver registers its own when it is loaded) ...
MESSAGING_GROUPS = (None, "oslo_messaging_notifications", "oslo_messaging_rabbit")
# ... and the two its RPC client and server read on every message but
# list_opts() leaves out (oslo.messaging's own ConfFixture registers them
# from these modules for the same reason).
_UNLISTED_MESSAGING_OPTS = (
    ("oslo_messaging._metrics.client", "oslo_messaging_metrics"),
    ("oslo_messaging._tracing.client", "oslo_messaging_tracing"),
)
# [DEFAULT] options of oslo.messaging the samples document, in this order:
# the bus, its exchange, the threads; the RPC client's own timeout and ping
# are left out ([rpc] call_timeout is ours).
SAMPLE_DEFAULT_OPTS = ("transport_url", "control_exchange", "executor_thread_pool_size")
# What the samples say of executor_thread_pool_size (the services change its default).
EXECUTOR_THREADS_HELP = (
    "Messages this process handles at once (its RPC server's threads). "
    "Unset, a scheduler-worker that batches derives it as [scheduler] "
    "batch_size x concurrent_batches (each call waits for its batch on "
    "a thread), and a super conductor as enough build_instances_many "
    "messages of 64 requests for its request threads ([conductor] "
    "schedule_batch_size x (schedule_calls_in_flight + 1)), plus one; "
    f"{EXECUTOR_THREADS} otherwise (oslo's 64 would make 64 scheduler "
    "threads that do not batch race for the same hosts). Setting it "
    "overrides the derivation."
)

# What the samples say of rabbit_qos_prefetch_count (the services change its default).
PREFETCH_HELP = (
    "Messages RabbitMQ hands this process before it acknowledges them. "
    "Unset, a service that serves a topic takes its [DEFAULT] "
    "executor_thread_pool_size (as derived): it holds no more messages than "
    "it has threads to work on them, and acknowledges a message only once "
    "it is started (a call, or any message of a scheduler-worker) or its "
    "work is owned (a conductor's cast: recorded in placement under its "
    "lease, or finished), so what it has not taken stays on the queue for "
    "another process when it is stopped or killed. 0 is oslo's unlimited "
    "(a process would take every queued message at once)."
)


def _messaging_opts():
    """{group: [opts]} of oslo.messaging's public list_opts(), the groups the
    services use (copies: the services change some defaults)."""
    listed = dict(oslo_messaging.opts.list_opts())
    return {group: listed[group] for group in MESSAGING_GROUPS}


def register_opts(conf):
    """Register ``[DEFAULT] transport_url``, the driver options and ``[rpc]``."""
    for group, opts in _messaging_opts().items():
        conf.register_opts(opts, group=group)
    for module, name in _UNLISTED_MESSAGING_OPTS:
        conf.register_opts(getattr(importlib.import_module(module), name), group=name)
    conf.set_default("transport_url", DEFAULT_TRANSPORT_URL)
    conf.set_default("control_exchange", CONTROL_EXCHANGE)
    # Messages one process handles at once (EXECUTOR_THREADS: why not oslo's 64).
    conf.set_default("executor_thread_pool_size", EXECUTOR_THREADS)
    conf.register_group(cfg.OptGroup(rpc_group.name, title=rpc_group.title))
    conf.register_opts(rpc_opts, group=rpc_group.name)


def list_opts():
    """For the sample generators: transport_url plus the rabbit driver and [rpc],
    with the defaults the services really use."""
    opts = _messaging_opts()
    by_name = {opt.dest: opt for opt in opts[None]}
    by_name["transport_url"].default = DEFAULT_TRANSPORT_URL
    by_name["control_exchange"].default = CONTROL_EXCHANGE
    by_name["executor_thread_pool_size"].default = EXECUTOR_THREADS
    by_name["executor_thread_pool_size"].help = EXECUTOR_THREADS_HELP
    for opt in opts["oslo_messaging_rabbit"]:
        if opt.dest == "rabbit_qos_prefetch_count":
            opt.sample_default = "<[DEFAULT] executor_thread_pool_size>"
            opt.help = PREFETCH_HELP
    # The driver's own options first, then the AMQP ones it shares, as the
    # samples have always listed them.
    rabbit = sorted(opts["oslo_messaging_rabbit"], key=lambda opt: opt.dest.startswith("amqp_"))
    return [
        (None, [by_name[name] for name in SAMPLE_DEFAULT_OPTS]),
        ("oslo_messaging_rabbit", rabbit),
        (rpc_group, rpc_opts),
    ]


def _configured(conf, name, group=None):
    """Whether ``[group] name`` was set by the operator (a configuration
    file, the environment, the command line or an override), not left at a
    default."""
    try:
        where = conf.get_location(name, group)
    except (AttributeError, cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return False
    return where is not None and where.location not in (
        cfg.Locations.opt_default,
        cfg.Locations.set_default,
    )


def executor_threads_configured(conf):
    """Whether ``[DEFAULT] executor_thread_pool_size`` was set by the operator."""
    return _configured(conf, "executor_thread_pool_size")


def prefetch_configured(conf):
    """Whether ``[oslo_messaging_rabbit] rabbit_qos_prefetch_count`` was set
    by the operator."""
    return _configured(conf, "rabbit_qos_prefetch_count", "oslo_messaging_rabbit")


def derive_prefetch(conf):
    """Make the executor's threads (``[DEFAULT] executor_thread_pool_size``,
    as derived) the default of ``[oslo_messaging_rabbit]
    rabbit_qos_prefetch_count`` unless the operator set it; return the value
    in force. oslo's 0 is no limit: RabbitMQ would hand one process every
    queued message (joule.rpc_server). Read when the server's connection is
    made (at its start), so set before."""
    group = "oslo_messaging_rabbit"
    if not prefetch_configured(conf):
        conf.set_default("rabbit_qos_prefetch_count", conf.executor_thread_pool_size, group=group)
    return conf[group].rabbit_qos_prefetch_count


def derive_executor_threads(conf, threads):
    """Make ``threads`` the default of ``[DEFAULT] executor_thread_pool_size``
    (what this service's RPC server runs on) unless the operator set it;
    return the value in force. A service whose work is batched derives it from
    its batch options, so raising one of them is not silently capped by the
    threads (scheduler.conf.executor_threads)."""
    if not executor_threads_configured(conf):
        conf.set_default("executor_thread_pool_size", max(1, int(threads)))
    return conf.executor_thread_pool_size


class BusUnreachable(startup.Unavailable):
    """The message bus cannot be reached; the message is one line (exit 3)."""


def transport_of(conf):
    """The RPC transport of ``[DEFAULT] transport_url``.

    :raise BusUnreachable: the URL is invalid.
    """
    try:
        return oslo_messaging.get_rpc_transport(conf)
    except (oslo_messaging.InvalidTransportURL, oslo_messaging.DriverLoadFailure) as exc:
        raise BusUnreachable(f"invalid [DEFAULT] transport_url: {exc}") from exc


def check_reachable(conf, timeout=5.0):
    """Raise BusUnreachable (one line) unless the broker accepts a connection.

    The in-memory transport is always reachable. Done once at start-up, so
    an operator sees "RabbitMQ at host:port refused the connection" instead
    of a process that retries silently forever.
    """
    try:
        url = oslo_messaging.TransportURL.parse(conf, conf.transport_url)
    except oslo_messaging.InvalidTransportURL as exc:
        raise BusUnreachable(f"invalid [DEFAULT] transport_url: {exc}") from exc
    drivers = {ep.name for ep in importlib.metadata.entry_points(group="oslo.messaging.drivers")}
    if url.transport not in drivers:
        raise BusUnreachable(
            f"invalid [DEFAULT] transport_url: no driver "
            f"{url.transport!r} (known: {', '.join(sorted(drivers))})"
        )
    if url.transport != "rabbit":
        return
    import kombu  # the rabbit driver's own client library

    for host in url.hosts or [None]:
        where = f"{host.hostname}:{host.port or 5672}" if host else "localhost:5672"
        vhost = url.virtual_host or "/"
        conn = kombu.Connection(
            hostname=host.hostname if host else "localhost",
            port=(host.port if host else None) or 5672,
            userid=(host.username if host else None) or "guest",
            password=(host.password if host else None) or "guest",
            virtual_host=vhost,
            connect_timeout=timeout,
        )
        try:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            return
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
            last = (
                f"RabbitMQ at {where} (vhost {vhost}) is unreachable: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            )
        finally:
            conn.release()
    raise BusUnreachable(last)


def service_transport(conf, placement):
    """The transport of a service about to serve, after the start-up every
    service on the bus makes: one authenticated read of ``placement`` (its
    client), a connection the broker accepts, and ``[metrics]`` served.

    :raise BusUnreachable:
    :raise joule.placement_client.PlacementUnreachable, AuthenticationFailed:
    :raise joule.config.ConfigError: the metrics port cannot be bound.
    """
    placement.check()
    check_reachable(conf)
    transport = transport_of(conf)
    try:
        metrics_http.serve(conf)
    except OSError as exc:
        raise config.ConfigError(
            f"cannot serve metrics on port {conf.metrics.port}: {exc.strerror}"
        ) from None
    return transport


def run_service(prog, conf, placement, topic_name, build):
    """Start a service on the bus and serve until SIGTERM; return its exit status.

    The start-up checks of ``service_transport`` (what they raise stops it
    before anything is served), then ``build(transport)`` (a
    ``joule.service.Service``), ``joule_service_up`` set, the ready line on
    stderr, ``run_until_signalled``, the transport cleaned up.
    """
    transport = service_transport(conf, placement)
    svc = build(transport)
    metrics_http.SERVICE.labels(prog, topic_name).set(1)
    if not svc.run_until_signalled(ready=f"{prog}: {svc.name} serving topic {topic_name}"):
        # Past [rpc] stop_timeout: the rest of the work in hand is left. It
        # is not lost (joule.service), and threads still working (a
        # scheduler call retried, a build) would keep an ordinary exit
        # waiting for them, past the unit's TimeoutStopSec and its SIGKILL.
        LOG.warning(
            "%s: work still in hand after [rpc] stop_timeout (%s s); exiting: "
            "its messages were not acknowledged and are delivered again, its "
            "records are taken over after their lease",
            svc.name,
            conf.rpc.stop_timeout,
        )
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
    transport.cleanup()
    return 0


def topic(conf, name):
    return f"{conf.rpc.topic_prefix}{name}"


def cell_topic(conf, cell):
    """The topic of one cell's conductors."""
    return topic(conf, f"{CONDUCTOR_TOPIC}.{cell}")


def compute_topic(conf, host):
    """The topic of the node agent of ``host`` (its provider name)."""
    return topic(conf, f"{COMPUTE_TOPIC}.{host}")


def make_server(conf, transport, topic_name, endpoints, server_name, ack_when_done=False):
    """An RPC server on ``topic_name`` (already prefixed), run by
    oslo.messaging's threading executor (its only non-deprecated one) with
    ``[DEFAULT] executor_thread_pool_size`` threads, taking at most as many
    messages off the bus as it has threads (derive_prefetch) and
    acknowledging each as joule.rpc_server says (``ack_when_done``: a cast
    once its endpoint returned)."""
    from joule import rpc_server  # it imports this module's oslo_messaging

    derive_prefetch(conf)
    target = oslo_messaging.Target(topic=topic_name, server=server_name)
    return rpc_server.make(transport, target, endpoints, ack_when_done)


def _client(transport, topic_name, timeout=None):
    return oslo_messaging.get_rpc_client(
        transport, oslo_messaging.Target(topic=topic_name, version=RPC_VERSION), timeout=timeout
    )


class Unanswered(Exception):
    """No server answered a call within the timeout, after every retry."""


def backoff(attempt, base=0.5, cap=10.0):
    """Seconds to wait before retry ``attempt`` (1, 2, ...): exponential, jittered."""
    return min(cap, base * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)


class _Unsupported(Exception):
    """The scheduler that answered does not know the method or version."""


def _checked_call(client, method, **kwargs):
    """``client.call``; a scheduler that does not know the method or the
    version raises _Unsupported."""
    try:
        return client.call({}, method, **kwargs)
    except (oslo_messaging.UnsupportedVersion, oslo_messaging.NoSuchMethod) as exc:
        raise _Unsupported(str(exc)) from exc
    except oslo_messaging.RemoteError as exc:
        if exc.exc_type in ("UnsupportedVersion", "NoSuchMethod"):
            raise _Unsupported(str(exc)) from exc
        raise


class SchedulerAnswerError(Exception):
    """A scheduler answered something that is not an answer."""


# Scheduler RPC 1.3: select_destinations(_many) carry ``deadline``, the
# caller's clock (epoch seconds) at which it stops waiting for the answer,
# less this margin (a quarter of the call timeout when that is shorter): the
# hosts' clocks may differ by up to the margin (NTP keeps them within
# milliseconds) and the answer still has to travel back. Work a scheduler
# has not done by then is dropped, and claims it made too late are released
# before it answers ``expired`` (scheduler.service).
DEADLINE_VERSION = "1.3"
DEADLINE_MARGIN = 2.0
EXPIRED = "expired"
# Claims topic RPC 1.1: scheduler_workers, the workers a super conductor may
# send each kind of request to (conductor.scheduler_routing).
WORKERS_VERSION = "1.1"
# The key an error answer carries when no scheduler answered in time: the
# caller gave the request up while a scheduler may still be working on it.
UNANSWERED = "unanswered"


def deadline_margin(call_timeout):
    """Seconds before the caller's timeout at which its call's deadline falls."""
    return min(DEADLINE_MARGIN, call_timeout / 4)


def expired(answer):
    """Whether a scheduler answered (a call, or any request of a bulk call)
    that the call's deadline had passed: the caller counts it as its own
    timeout (nothing of it stays claimed)."""
    if isinstance(answer, dict):
        return answer.get("status") == EXPIRED
    if isinstance(answer, list):
        return any(isinstance(a, dict) and a.get("status") == EXPIRED for a in answer)
    return False


class SchedulerAPI:
    """Client of topic ``scheduler``."""

    def __init__(self, conf, transport):
        self.conf = conf
        # Set once a scheduler answered that it does not know 1.2.
        self._many_unsupported = False
        # Set once a scheduler answered that it does not know 1.3 (deadlines).
        self._deadline_unsupported = False
        self._client = _client(
            transport, topic(conf, SCHEDULER_TOPIC), timeout=conf.rpc.call_timeout
        )
        self._claims = _client(transport, topic(conf, CLAIMS_TOPIC))

    def select_destinations(self, request_spec, on_retry=None):
        """Call ``select_destinations``; retry (bounded, backoff) when
        unanswered, or answered ``expired`` (each try carries its deadline,
        RPC 1.3: see DEADLINE_MARGIN).

        ``on_retry()`` runs before each retry (the conductor releases what a
        scheduler that died half way may have claimed).
        :return: the scheduler's answer, a dict (see scheduler.service).
        :raise Unanswered: no scheduler answered.
        """
        return self._call(
            self._client,
            "select_destinations",
            request_spec.get("request_id"),
            on_retry,
            request_spec=request_spec,
        )

    def _call(self, client, method, what, on_retry, retry_client=None, on_silent=None, **kwargs):
        """Call ``method`` through ``client`` (its version prepared), each
        try with its own deadline (1.3, unless a scheduler does not know
        it); a timeout, or an answer that the deadline passed, is retried,
        through ``retry_client`` when given (a call sent to one worker is
        retried on the shared topic, where any worker answers), after
        ``on_silent()`` (the worker the first try went to is taken to be
        gone)."""
        retries = self.conf.rpc.call_retries
        timeout = self.conf.rpc.call_timeout
        for attempt in range(retries + 1):
            try:
                answer = self._call_once(client, method, kwargs)
                if not expired(answer):
                    return answer
                LOG.warning("%s: a scheduler answered after the call's deadline", what)
            except oslo_messaging.MessagingTimeout:
                pass
            if attempt == 0 and on_silent is not None:
                on_silent()
            if retry_client is not None:
                client = retry_client
            if attempt == retries:
                break
            LOG.warning(
                "%s: no scheduler answered within %s s; retrying (%d of %d)",
                what,
                timeout,
                attempt + 1,
                retries,
            )
            time.sleep(backoff(attempt + 1))
            if on_retry is not None:
                on_retry()
        raise Unanswered(f"no scheduler answered within {timeout} s ({retries + 1} tries)")

    def _call_once(self, client, method, kwargs):
        """One try: with a deadline (1.3) while the schedulers know it, else
        as the method's own version (the first scheduler that does not know
        1.3 turns deadlines off for this client, as for 1.2)."""
        if not self._deadline_unsupported:
            timeout = self.conf.rpc.call_timeout
            deadline = time.time() + timeout - deadline_margin(timeout)
            try:
                return _checked_call(
                    client.prepare(version=DEADLINE_VERSION), method, deadline=deadline, **kwargs
                )
            except _Unsupported:
                LOG.warning(
                    "a scheduler does not know call deadlines (RPC %s); calling without them",
                    DEADLINE_VERSION,
                )
                self._deadline_unsupported = True
        return _checked_call(client, method, **kwargs)

    def scheduler_workers(self, timeout):
        """The scheduler workers a kind of request may be sent to: the RPC
        server names one worker knows of, itself included, sorted. Asked on
        the claims topic (its RPC 1.1), whose server answers at once however
        many scheduling calls the worker holds; workers that keep no walks
        do not serve it. One try within ``timeout`` seconds.

        :raise Unanswered: no worker answered.
        :raise SchedulerAnswerError: the answer is not a list of names, or
            the worker does not know 1.4 (too old to route to).
        """
        try:
            answer = _checked_call(
                self._claims.prepare(version=WORKERS_VERSION, timeout=timeout), "scheduler_workers"
            )
        except oslo_messaging.MessagingTimeout as exc:
            raise Unanswered(f"no scheduler answered within {timeout} s") from exc
        except _Unsupported as exc:
            raise SchedulerAnswerError(f"scheduler_workers: {exc}") from exc
        if not isinstance(answer, list) or not all(
            isinstance(name, str) and name for name in answer
        ):
            raise SchedulerAnswerError(f"scheduler_workers answered {str(answer)[:200]}")
        return answer

    def select_destinations_many(self, request_specs, releases=None, server=None, on_silent=None):
        """Call ``select_destinations_many`` (1.2) with several request specs;
        the answers, one per spec, in order. ``releases``: one callable per
        spec, what to release before a retry (the claims a scheduler that
        died half way may have made for it). The bulk call is retried like
        ``select_destinations``, every release running before each retry (it
        may have claimed for any of them). ``server``: the worker to send it
        to (conductor.scheduler_routing), None for any; a retry goes to any,
        after ``on_silent()``.

        A scheduler too old to know the method answers it as unsupported:
        then each spec is called on its own (with its own release only), and
        so are later calls of this client. There, a spec no scheduler
        answers gets an ``error`` answer of its own (marked UNANSWERED); the
        others keep theirs. A bulk answer with any ``expired`` in it counts
        as unanswered (released, retried) as a whole.

        :raise Unanswered: no scheduler answered the bulk call.
        """
        releases = list(releases) if releases is not None else [None] * len(request_specs)
        if not self._many_unsupported:

            def release_all():
                for release in releases:
                    if release is not None:
                        release()

            shared = self._client.prepare(version="1.2")
            try:
                answers = self._call(
                    self._client.prepare(version="1.2", server=server) if server else shared,
                    "select_destinations_many",
                    f"{len(request_specs)} requests",
                    release_all,
                    retry_client=shared if server else None,
                    on_silent=on_silent if server else None,
                    request_specs=request_specs,
                )
            except _Unsupported:
                LOG.warning(
                    "a scheduler does not know select_destinations_many (RPC 1.2); "
                    "calling select_destinations once per request"
                )
                self._many_unsupported = True
            else:
                if not isinstance(answers, list) or len(answers) != len(request_specs):
                    raise SchedulerAnswerError(
                        f"select_destinations_many answered {type(answers).__name__} "
                        f"for {len(request_specs)} requests: {str(answers)[:200]}"
                    )
                return answers
        answers = []
        for spec, release in zip(request_specs, releases, strict=True):
            try:
                answers.append(self.select_destinations(spec, release))
            except Unanswered as exc:
                answers.append({"status": "error", "error": str(exc), UNANSWERED: True})
        return answers

    def build_outcomes(self, failed_builds):
        """Tell every scheduler worker (a fanout cast, 1.1) the new count of
        consecutive failed builds of these hosts, {host uuid: count}, so a
        walk it keeps (scheduler.host_cache) is read again with them."""
        self._client.prepare(fanout=True, version="1.1").cast(
            {}, "build_outcomes", failed_builds=failed_builds
        )

    def claims_made(self, sender, claims):
        """Tell every scheduler worker (a fanout cast on their claims topic)
        the claims the worker ``sender`` made, [[host uuid, {provider:
        {class: amount}}]], so the walks they keep show them
        (scheduler.claim_feed)."""
        self._claims.prepare(fanout=True).cast({}, "claims_made", sender=sender, claims=claims)


class ConductorAPI:
    """Client of topic ``conductor`` (super conductors) and of the cell topics."""

    def __init__(self, conf, transport):
        self.conf = conf
        self._transport = transport
        self._super = _client(transport, topic(conf, CONDUCTOR_TOPIC))
        self._cells = {}
        self._lock = threading.Lock()

    def build_instances(self, request_spec, reply_topic):
        """Cast a request spec to the super conductors."""
        self._super.cast({}, "build_instances", request_spec=request_spec, reply_topic=reply_topic)

    def build_instances_many(self, request_specs, reply_topic):
        """Cast several request specs to the super conductors in one message
        (1.1); the conductor that receives it handles them side by side."""
        self._super.prepare(version="1.1").cast(
            {}, "build_instances_many", request_specs=request_specs, reply_topic=reply_topic
        )

    def build_instance(self, cell, instance_uuid, request_spec, selections, reply_topic):
        """Cast one instance's selection list to the conductors of ``cell`` (1.0)."""
        self._cell_client(cell).cast(
            {},
            "build_instance",
            instance_uuid=instance_uuid,
            request_spec=request_spec,
            selections=selections,
            reply_topic=reply_topic,
        )

    def build_many(self, cell, builds, reply_topic):
        """Cast the builds of several instances to the conductors of ``cell``
        in one message (RPC 1.1): [{"instance_uuid", "request_spec",
        "selections", "generation"}, ...], the generation being the one each
        record was handed off (or left) at. A build may carry its own ``reply_topic``
        (RPC 1.2: builds of several submitters share the message), which
        overrides the message's; a build may name the super conductor that
        still holds its record (``holder``, RPC 1.4: cast without a
        hand-off). A message is sent as the oldest version its builds allow,
        so cell conductors not upgraded yet still take what they can."""
        if any("holder" in b for b in builds):
            version = "1.4"
        elif any("reply_topic" in b for b in builds):
            version = "1.2"
        else:
            version = "1.1"
        self._cell_client(cell).prepare(version=version).cast(
            {}, "build_many", builds=builds, reply_topic=reply_topic
        )

    def instances_ended(self, cell, host, host_uuid, instances, timeout):
        """Report ended instances of ``host`` to the conductors of ``cell``
        (RPC 1.3; a node without a cell: the super conductors, 1.2); the
        uuids they dealt with.

        :raise Unanswered: no conductor answered within ``timeout``.
        """
        if cell is None:
            client = self._super.prepare(version="1.2", timeout=timeout)
        else:
            client = self._cell_client(cell).prepare(version="1.3", timeout=timeout)
        try:
            return client.call(
                {}, "instances_ended", host=host, host_uuid=host_uuid, instances=instances
            )
        except oslo_messaging.MessagingTimeout:
            raise Unanswered(
                f"no conductor of {cell or 'the super conductors'} answered "
                f"instances_ended within {timeout:g} s"
            ) from None

    def _cell_client(self, cell):
        with self._lock:
            client = self._cells.get(cell)
            if client is None:
                client = self._cells[cell] = _client(self._transport, cell_topic(self.conf, cell))
            return client


# Clients kept per reply topic (OutcomeAPI): every build-submit run has a
# topic of its own, so a topic unused for this long is forgotten, and the
# least recently used beyond the count (a client is a target on the shared
# transport: one forgotten is made again if its topic returns).
OUTCOME_TOPICS_MAX = 1024
OUTCOME_TOPIC_IDLE_SECONDS = 300.0


class OutcomeAPI:
    """Casts outcomes to a submitter's own topic (``build-submit``); keeps
    the clients of at most ``max_topics`` topics, none idle for longer than
    ``idle_seconds`` (joule.idle_cache)."""

    def __init__(
        self,
        transport,
        max_topics=OUTCOME_TOPICS_MAX,
        idle_seconds=OUTCOME_TOPIC_IDLE_SECONDS,
        clock=time.monotonic,
    ):
        self._transport = transport
        self._clients = idle_cache.IdleCache(
            lambda reply_topic: _client(self._transport, reply_topic),
            max_topics,
            idle_seconds,
            clock=clock,
        )
        self._lock = threading.Lock()

    def _client_for(self, reply_topic):
        with self._lock:
            return self._clients.get(reply_topic)

    def topics(self):
        """How many reply topics have a client now."""
        with self._lock:
            self._clients.prune()
            return len(self._clients)

    def instance_done(self, reply_topic, outcome):
        if reply_topic:
            self._safe_cast(reply_topic, "instance_done", outcome=outcome)

    def instances_done(self, reply_topic, outcomes):
        """Several outcomes in one message (1.1); a lone one goes as
        ``instance_done`` (1.0), which a submitter of any version takes."""
        if not reply_topic or not outcomes:
            return
        if len(outcomes) == 1:
            self.instance_done(reply_topic, outcomes[0])
            return
        self._safe_cast(reply_topic, "instances_done", "1.1", outcomes=list(outcomes))

    def request_refused(self, reply_topic, request_id, error):
        if reply_topic:
            self._safe_cast(reply_topic, "request_refused", request_id=request_id, error=error)

    def _safe_cast(self, reply_topic, method, version=None, **kwargs):
        # An outcome that cannot be sent is not lost: it is in placement's
        # build request, which the submitter also reads.
        try:
            client = self._client_for(reply_topic)
            if version is not None:
                client = client.prepare(version=version)
            client.cast({}, method, **kwargs)
        except oslo_messaging.MessagingException as exc:
            LOG.warning("outcome to %s not sent: %s", reply_topic, exc)


class AgentFailed(Exception):
    """A node agent answered a call with an error of its own."""


# Clients kept per compute host (ComputeAPI): one target each on the shared
# transport, forgotten when idle as the outcome topics are.
COMPUTE_HOSTS_MAX = 4096
COMPUTE_HOST_IDLE_SECONDS = 600.0


class ComputeAPI:
    """Client of the node agents' compute topics (``compute.<host>``): calls,
    each answered by the agent of that host within ``timeout`` seconds.

    :raise Unanswered: (every method) no agent answered in time.
    :raise AgentFailed: (every method) the agent raised handling the call.
    """

    def __init__(self, conf, transport):
        self.conf = conf
        self._transport = transport
        self._lock = threading.Lock()
        self._clients = idle_cache.IdleCache(
            lambda host: oslo_messaging.get_rpc_client(
                transport,
                oslo_messaging.Target(topic=compute_topic(conf, host), version=COMPUTE_RPC_VERSION),
            ),
            COMPUTE_HOSTS_MAX,
            COMPUTE_HOST_IDLE_SECONDS,
        )

    def _call(self, host, timeout, method, **kwargs):
        with self._lock:
            client = self._clients.get(host)
        try:
            return client.prepare(timeout=timeout).call({}, method, **kwargs)
        except oslo_messaging.MessagingTimeout:
            raise Unanswered(
                f"the agent of {host} did not answer {method} within {timeout:g} s"
            ) from None
        except oslo_messaging.RemoteError as exc:
            raise AgentFailed(f"the agent of {host} failed {method}: {exc.exc_type}: {exc.value}")

    def build_instance(
        self, host, instance_uuid, resources, workload, timeout, workload_class=None
    ):
        """Start the instance on ``host``: its record (``state`` running,
        finished, or failed with a ``reason``)."""
        return self._call(
            host,
            timeout,
            "build_instance",
            instance_uuid=instance_uuid,
            resources=resources,
            workload=workload,
            workload_class=workload_class,
        )

    def delete_instance(self, host, instance_uuid, timeout, grace=None):
        """End the instance on ``host``; its record, or None (not there)."""
        return self._call(
            host, timeout, "delete_instance", instance_uuid=instance_uuid, grace=grace
        )

    def show_instance(self, host, instance_uuid, timeout):
        """The instance's record on ``host``, or None (not there)."""
        return self._call(host, timeout, "show_instance", instance_uuid=instance_uuid)

    def list_instances(self, host, timeout):
        return self._call(host, timeout, "list_instances")
