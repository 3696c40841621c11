"""oslo.config options of the conductor ([conductor]); it also reads the
scheduler's [filter_scheduler] and [placement] (the REST client; the demo
embeds the scheduler), the bus ([DEFAULT] transport_url, [rpc]) and [metrics]."""

from oslo_config import cfg

from joule import config
from joule import rpc
from scheduler import conf as sconf

conductor_group = cfg.OptGroup("conductor", title="Conductor")

conductor_opts = [
    cfg.StrOpt(
        "compute_driver",
        default="simulated",
        choices=[
            ("simulated", "Builds succeed instantly unless a failure is injected."),
            (
                "agent",
                "Each build is sent to the selected host's node agent (compute.<host> "
                "on the bus), which runs the instance through its own [agent] driver.",
            ),
        ],
        help="The compute driver that builds instances on their hosts.",
    ),
    cfg.FloatOpt(
        "build_timeout",
        default=60.0,
        min=1.0,
        help="agent driver: seconds a build waits for the host's agent to answer; "
        "past them the build counts as failed (the agent is told to delete the "
        "instance, in case it started it late) and the claim moves to the next "
        "alternate.",
    ),
    cfg.FloatOpt(
        "simulated_failure_rate",
        default=0.0,
        min=0.0,
        max=1.0,
        help="simulated driver: probability that any build fails (exercises the move "
        "to alternates).",
    ),
    cfg.ListOpt(
        "simulated_failing_hosts",
        default=[],
        help="simulated driver: host names or uuids on which every build fails.",
    ),
    cfg.IntOpt(
        "simulated_seed",
        default=None,
        help="simulated driver: seed of the failure draws, for reproducible runs.",
    ),
    cfg.StrOpt(
        "simulated_state_dir",
        default=None,
        help="simulated driver: directory where the simulated hypervisors record what "
        "runs where (one file per instance). Every conductor of a deployment must "
        "share it, as they share real hypervisors; a conductor taking over a dead "
        "one's build reads it to learn whether that build completed. Unset: the "
        "state lives in the process (one-process deployments: the demo).",
    ),
    cfg.IntOpt(
        "lease_seconds",
        default=60,
        min=2,
        max=86400,
        help="How long a conductor holds a build request without renewing it (it "
        "renews every third of it while scheduling and while building). A "
        "conductor that dies stops renewing; this long after, another one takes its "
        "build requests over.",
    ),
    cfg.FloatOpt(
        "record_retry_seconds",
        default=60.0,
        min=0.0,
        max=3600.0,
        help="How long a super conductor keeps trying to record a request's build "
        "requests while placement answers that its database is unavailable (503) "
        "or does not answer at all, before it answers the request refused (0: "
        "refused at once). Meanwhile the message stays on the bus unacknowledged: "
        "a conductor stopped or killed leaves it for another. Covers a database "
        "restart or failover.",
    ),
    cfg.FloatOpt(
        "sweep_interval",
        default=5.0,
        min=0.1,
        help="Seconds between two looks for build requests whose lease expired.",
    ),
    cfg.IntOpt(
        "sweep_batch",
        default=50,
        min=1,
        # GET /build_requests answers at most 10,000 records a page.
        max=10000,
        help="Expired build requests taken over per look (at most 10,000, the "
        "largest page of GET /build_requests).",
    ),
    cfg.FloatOpt(
        "wake_wait_seconds",
        default=900.0,
        min=0.0,
        max=86400.0,
        help="How long a request that fits only on sleeping nodes (the power "
        "controller's [power] suspend_enabled) is held, its build requests pending, "
        "while the controller wakes nodes for it: a few boots plus a few controller "
        "ticks. It is placed once they are on, or fails after this long saying which "
        "hosts it waited for. 0: such a request fails at once, as any without a "
        "valid host.",
    ),
    cfg.FloatOpt(
        "wake_retry_interval",
        default=15.0,
        min=1.0,
        max=3600.0,
        help="Seconds between two schedulings of a request held for waking nodes.",
    ),
    cfg.FloatOpt(
        "batch_window_ms",
        default=10.0,
        min=0.0,
        max=1000.0,
        help="Milliseconds a conductor waits for other messages in hand to join a "
        "placement call (build requests created, taken, handed off, finished; build "
        "outcomes), so that they share one bulk request. Only waited when other "
        "messages are in hand; calls queued while one is in flight share the next one "
        "anyway. 0: never wait.",
    ),
    cfg.IntOpt(
        "batch_size",
        default=500,
        min=1,
        max=10000,
        help="Most build requests (or build outcomes) in one bulk placement call.",
    ),
    cfg.IntOpt(
        "schedule_batch_size",
        default=64,
        min=1,
        max=1000,
        help="Most requests a super conductor sends to the scheduler in one "
        "select_destinations_many call (RPC 1.2): the requests its threads hold at "
        "the same moment share one message each way, and join the scheduler "
        "worker's batches together. 1: one select_destinations call per request, "
        "as before. Match [scheduler] batch_size: a bigger call is placed in "
        "several of the worker's batches, and a scheduler whose batch_size is 1 "
        "schedules a bulk call's requests one after the other, so set 1 here too. "
        "[rpc] call_timeout bounds the whole call; on a timeout every request of it "
        "is released and the call retried.",
    ),
    cfg.IntOpt(
        "schedule_calls_in_flight",
        default=2,
        min=1,
        max=64,
        help="select_destinations_many calls one super conductor keeps in flight "
        "at once: the next group of requests gathers while the earlier ones are "
        "being scheduled. A call holding several kinds of request goes out in one "
        "part per scheduler worker that owns one of them, all at once, so more "
        "scheduler workers need no more calls in flight. The super conductor's "
        "request threads follow "
        "it: schedule_batch_size x (schedule_calls_in_flight + 1), the calls in "
        "flight and the next one gathering.",
    ),
]

# Requests of one build_instances_many message as build-submit casts them
# (its --requests-per-message default): what one RPC thread of a super
# conductor brings in.
REQUESTS_PER_MESSAGE = 64


def request_threads(conf):
    """Threads a super conductor handles the requests of build_instances_many
    messages on (each request from its record to its hand-off, the scheduling
    call included): with ``schedule_batch_size`` > 1, enough to fill every
    call in flight and the next one gathering, ``schedule_batch_size`` x
    (``schedule_calls_in_flight`` + 1); else the RPC executor's threads (one
    select_destinations call each, as single messages)."""
    c = conf.conductor
    if c.schedule_batch_size > 1:
        return c.schedule_batch_size * (c.schedule_calls_in_flight + 1)
    return conf.executor_thread_pool_size


def super_executor_threads(conf):
    """``[DEFAULT] executor_thread_pool_size`` of a super conductor when it is
    not set: enough build_instances_many messages of REQUESTS_PER_MESSAGE
    requests in hand to keep its request threads busy, plus one, and at least
    ``rpc.EXECUTOR_THREADS``. Not more: a message in hand waits for request
    threads before its requests are recorded, and build-submit sends a
    request again when a later one was recorded 20 s before it (a deep queue
    of unrecorded requests inside the conductor looks lost)."""
    need = -(-request_threads(conf) // REQUESTS_PER_MESSAGE) + 1
    return max(rpc.EXECUTOR_THREADS, need)


def register_opts(conf):
    sconf.register_opts(conf)
    conf.register_group(cfg.OptGroup(conductor_group.name, title=conductor_group.title))
    conf.register_opts(conductor_opts, group=conductor_group.name)


def list_opts():
    return [(conductor_group, conductor_opts)] + sconf.list_opts()


def make_conf(args=None, overrides=None):
    """A fresh ConfigOpts with the conductor options; overrides {(group, name): value}."""
    return config.make_conf(register_opts, args, overrides=overrides, project="conductor")
