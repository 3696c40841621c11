"""oslo.config options of the power controller, group ``[power]``.

Option names are Joulie's environment variables (NODE_SELECTOR -> ``node_selector``,
STATIC_HP_FRAC -> ``static_hp_frac`` ...). Every option can also come from the
environment as ``OS_POWER__<OPTION>`` (oslo.config's environment source),
e.g. ``OS_POWER__STATIC_HP_FRAC=0.2``; the environment wins over files.
"""

from oslo_config import cfg

from joule import config
from joule import placement_client
from powerpolicy import policies

power_group = cfg.OptGroup("power", title="Power policy controller")

power_opts = [
    cfg.StrOpt(
        "policy",
        default=policies.STATIC_PARTITION,
        choices=[
            (
                policies.STATIC_PARTITION,
                "A fixed fraction (static_hp_frac) of every hardware family in performance.",
            ),
            (
                policies.QUEUE_AWARE_V1,
                "Performance slots follow the demand of running and pending performance consumers.",
            ),
            (
                policies.RULE_SWAP_V1,
                "Debug only: the first two nodes by name take turns in eco every "
                "reconcile_interval.",
            ),
        ],
        help="Which policy decides how many nodes stay in the performance profile.",
    ),
    cfg.StrOpt(
        "node_selector",
        default="",
        help="Which nodes the controller manages: a Kubernetes label selector over node "
        "labels, requirements joined by commas: 'key' (present), '!key' (absent), "
        "'key=value' or 'key==value', 'key!=value', 'key in (a,b)', 'key notin (a,b)'. "
        "Empty selects every node. A selector that does not parse, or uses another form "
        "(such as 'key>1'), stops the controller at start-up (exit 2). Reserved and "
        "unschedulable nodes are never managed.",
    ),
    cfg.FloatOpt(
        "static_hp_frac",
        default=0.5,
        min=0.0,
        max=1.0,
        help="static_partition: fraction of the eligible nodes kept in performance "
        "(round half away from zero; at least one node per hardware family).",
    ),
    cfg.FloatOpt(
        "queue_hp_base_frac",
        default=0.6,
        min=0.0,
        max=1.0,
        help="queue_aware_v1: fraction of the eligible nodes kept in performance whatever "
        "the demand.",
    ),
    cfg.IntOpt(
        "queue_hp_min",
        default=1,
        min=0,
        help="queue_aware_v1: lower bound of the performance slot count (the one node per "
        "family floor still applies above it).",
    ),
    cfg.IntOpt(
        "queue_hp_max",
        default=1000000,
        min=0,
        help="queue_aware_v1: upper bound of the performance slot count; 0 means the number "
        "of eligible nodes. The one node per family floor wins over it.",
    ),
    cfg.IntOpt(
        "queue_perf_per_hp_node",
        default=10,
        min=1,
        help="queue_aware_v1: how many performance consumers (running or pending) one "
        "performance node absorbs; demand P needs ceil(P / this) nodes.",
    ),
    cfg.IntOpt(
        "service_down_time",
        default=60,
        min=1,
        help="Seconds after a node agent's last heartbeat when its node is taken for "
        "down (the scheduler's [scheduler] service_down_time; nova's name): a down node "
        "is not managed (its twin is left as it is) and is reported each tick. Nodes "
        "no agent ever reported (loaded from a file) are never down.",
    ),
    cfg.IntOpt(
        "reconcile_interval",
        default=60,
        min=1,
        help="Seconds between two reconcile ticks of the service (also rule_swap_v1's "
        "phase length).",
    ),
    cfg.FloatOpt(
        "cpu_performance_cap_pct_of_max",
        default=100.0,
        min=1.0,
        max=100.0,
        help="CPU cap of a performance CPU node, in percent of its maximum cap.",
    ),
    cfg.FloatOpt(
        "cpu_eco_cap_pct_of_max",
        default=60.0,
        min=1.0,
        max=100.0,
        help="CPU cap of an eco CPU node, in percent of its maximum cap (never below its "
        "minimum cap).",
    ),
    cfg.FloatOpt(
        "gpu_performance_cap_pct_of_max",
        default=100.0,
        min=1.0,
        max=100.0,
        help="Per-GPU cap of a performance GPU node, in percent of the GPU's maximum cap.",
    ),
    cfg.FloatOpt(
        "gpu_eco_cap_pct_of_max",
        default=60.0,
        min=1.0,
        max=100.0,
        help="Per-GPU cap of an eco GPU node, in percent of the GPU's maximum cap (never "
        "below its minimum cap).",
    ),
    cfg.FloatOpt(
        "performance_cap_watts",
        default=5000.0,
        min=0.0,
        help="CPU cap of a performance CPU node whose cap range is unknown.",
    ),
    cfg.FloatOpt(
        "eco_cap_watts",
        default=120.0,
        min=0.0,
        help="CPU cap of an eco CPU node whose cap range is unknown.",
    ),
    cfg.BoolOpt(
        "suspend_enabled",
        default=False,
        help="Suspend nodes idle for suspend_after seconds (power them off through "
        "power_driver) and wake them when held work needs them. Off by default: the "
        "controller then never writes a power state and behaves as before.",
    ),
    cfg.IntOpt(
        "suspend_after",
        default=1800,
        min=0,
        help="Seconds a node must hold no allocation (and its agent run no instance) "
        "before it is suspended (Slurm's SuspendTime).",
    ),
    cfg.IntOpt(
        "min_spare_nodes",
        default=1,
        min=0,
        help="Idle nodes kept on per hardware family and profile, for work that "
        "arrives before a wake could finish. At least one performance node per family "
        "is always kept on, whatever this says.",
    ),
    cfg.FloatOpt(
        "suspend_rate",
        default=60.0,
        min=0.0,
        help="Most nodes suspended per minute (Slurm's SuspendRate); 0: no bound.",
    ),
    cfg.FloatOpt(
        "resume_rate",
        default=300.0,
        min=0.0,
        help="Most nodes woken per minute (Slurm's ResumeRate); 0: no bound.",
    ),
    cfg.StrOpt(
        "power_driver",
        default="command",
        help="How nodes are powered off and on: an entry point of the "
        "'joule.power.drivers' namespace: 'command' (the operator's programs, "
        "[power] suspend_program, resume_program and state_program), 'redfish' "
        "(each node's BMC over Redfish, [power] bmc_file) or 'ipmi' (each node's BMC "
        "over IPMI, [power] bmc_file).",
    ),
    cfg.StrOpt(
        "bmc_file",
        default="",
        help="redfish and ipmi drivers: a JSON object keyed by node name, each "
        '{"address": "https://bmc", "system": "/redfish/v1/Systems/1", "username": ..., '
        '"password": ..., "verify": true} ("system" left out: the BMC\'s only system); '
        'for ipmi {"address": "10.0.0.11", "port": 623, "username": ..., "password": ...}. '
        "Credentials are never logged; keep the file readable by the controller only.",
    ),
    cfg.StrOpt(
        "redfish_off_action",
        default="GracefulShutdown",
        choices=[
            ("GracefulShutdown", "The operating system shuts down, then the node powers off."),
            ("ForceOff", "The node powers off at once."),
        ],
        help="redfish driver: the ComputerSystem.Reset type that powers a node off.",
    ),
    cfg.StrOpt(
        "ipmi_off_action",
        default="shutdown",
        choices=[
            ("shutdown", "The operating system is asked to shut down (soft off)."),
            ("off", "Power is cut at once."),
        ],
        help="ipmi driver: the chassis control that powers a node off.",
    ),
    cfg.StrOpt(
        "suspend_program",
        default="",
        help="command driver: run with the node's name as its argument to power it off "
        "(Slurm's SuspendProgram); exit 0 when asked.",
    ),
    cfg.StrOpt(
        "resume_program",
        default="",
        help="command driver: run with the node's name as its argument to power it on "
        "(Slurm's ResumeProgram); exit 0 when asked.",
    ),
    cfg.StrOpt(
        "state_program",
        default="",
        help="command driver: run with the node's name as its argument, prints 'on' or "
        "'off' (what the node's BMC reads).",
    ),
    cfg.IntOpt(
        "power_command_timeout",
        default=30,
        min=1,
        help="Seconds a power driver call may take before it counts as failed: the "
        "command driver's programs, a redfish request, an ipmi call.",
    ),
    cfg.HostAddressOpt(
        "metrics_host",
        default="127.0.0.1",
        help="Address the Prometheus /metrics endpoint of the service listens on.",
    ),
    cfg.PortOpt(
        "metrics_port",
        default=9108,
        help="Port of the Prometheus /metrics endpoint of the service; 0 disables it.",
    ),
]


def register_opts(conf):
    # A fresh OptGroup per ConfigOpts: register_group() copies the group only
    # shallowly, so a shared module-level group would share its option table
    # (and every set_override) between otherwise independent ConfigOpts.
    group = cfg.OptGroup(power_group.name, title=power_group.title)
    conf.register_group(group)
    conf.register_opts(power_opts, group=group)
    # [placement]: the REST client; [power] placement_endpoint, placement_token
    # and request_timeout are read for one release.
    placement_client.register_opts(conf, power_group.name)


def list_opts():
    """Entry point of oslo-config-generator (``oslo.config.opts``)."""
    return [(power_group, power_opts)] + placement_client.list_opts(power_group.name)


def make_conf(args=None, default_config_files=None, overrides=None):
    """A fresh ConfigOpts with [power] and [placement] registered (never the global one).

    ``overrides`` maps an option name of [power] (or a ``(group, name)``
    pair) to a value; it wins over files and the environment.
    """
    overrides = {
        (key if isinstance(key, tuple) else (power_group.name, key)): value
        for key, value in (overrides or {}).items()
    }
    return config.make_conf(
        register_opts, args, default_config_files, overrides, "power-controller"
    )
