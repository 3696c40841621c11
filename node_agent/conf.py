"""oslo.config options of node-agent: ``[agent]`` here, ``[placement]`` (the
REST client) from joule.placement_client.

Inventory options keep nova's names and meaning (nova has them in
``[DEFAULT]``): ``reserved_host_cpus``, ``reserved_host_memory_mb``,
``cpu_allocation_ratio`` / ``ram_allocation_ratio`` (unset: a new provider
gets ``initial_*_allocation_ratio`` and an operator's later change through
the API is kept; set: the agent writes it on every change).
"""

import socket

from oslo_config import cfg

from joule import config
from joule import placement_client
from joule import rpc

agent_group = cfg.OptGroup("agent", title="Node agent")

agent_opts = [
    cfg.StrOpt(
        "host",
        default=socket.gethostname(),
        sample_default="<the host name>",
        help="Name of this node's root resource provider (nova's [DEFAULT] host). "
        "Unique in the cluster; a provider of that name is adopted, else created.",
    ),
    cfg.StrOpt(
        "procfs_root",
        default="/proc",
        help="Where /proc is read from (cpuinfo, meminfo). Tests and containers "
        "point it elsewhere.",
    ),
    cfg.StrOpt(
        "sysfs_root",
        default="/sys",
        help="Where /sys is read from and written to (class/powercap, "
        "devices/system/cpu/cpu*/cpufreq).",
    ),
    cfg.FloatOpt(
        "report_interval",
        default=10.0,
        min=0.1,
        help="Seconds between passes: heartbeat, twin read, caps applied, power "
        "measured (nova's report_interval). Keep it well below the scheduler's "
        "[scheduler] service_down_time (60), or a live node is taken for dead.",
    ),
    cfg.IntOpt(
        "rediscover_interval",
        default=60,
        min=0,
        help="Seconds between re-reads of the hardware and re-registrations "
        "(inventories, traits, node and hardware records); only differences are "
        "written. 0 registers at start-up only.",
    ),
    cfg.IntOpt(
        "reserved_host_cpus",
        default=0,
        min=0,
        help="VCPUs kept for the host itself: the VCPU inventory's reserved (nova's option).",
    ),
    cfg.IntOpt(
        "reserved_host_memory_mb",
        default=512,
        min=0,
        help="MiB of memory kept for the host: the MEMORY_MB inventory's reserved "
        "(nova's option and default).",
    ),
    cfg.FloatOpt(
        "cpu_allocation_ratio",
        min=0.0,
        help="VCPU allocation ratio written on every registration. Unset (the "
        "default): a new provider gets initial_cpu_allocation_ratio and the ratio "
        "stored in placement is kept (nova's semantics).",
    ),
    cfg.FloatOpt(
        "ram_allocation_ratio",
        min=0.0,
        help="MEMORY_MB allocation ratio; unset keeps placement's (see cpu_allocation_ratio).",
    ),
    cfg.FloatOpt(
        "initial_cpu_allocation_ratio",
        default=4.0,
        min=0.0,
        help="VCPU allocation ratio of a newly created inventory (nova's default 4.0).",
    ),
    cfg.FloatOpt(
        "initial_ram_allocation_ratio",
        default=1.0,
        min=0.0,
        help="MEMORY_MB allocation ratio of a newly created inventory (nova's default 1.0).",
    ),
    cfg.StrOpt(
        "cell",
        help="Cell of the node record (the scheduler keeps alternates in a cell, "
        "conductors build per cell). Unset: no cell.",
    ),
    cfg.StrOpt(
        "availability_zone",
        help="Availability zone of the node: written as the availability_zone_label "
        "node label. Unset: no zone label (the scheduler's default zone).",
    ),
    cfg.StrOpt(
        "availability_zone_label",
        default="topology.kubernetes.io/zone",
        help="The node label that carries the zone; the same as the scheduler's "
        "[filter_scheduler] availability_zone_label.",
    ),
    cfg.DictOpt(
        "labels",
        default={},
        help="Node labels the agent sets (key:value,key:value), for the power "
        "controller's node_selector and the scheduler's node selectors. Labels set "
        "by others are kept.",
    ),
    cfg.StrOpt(
        "provider_config",
        help="A provider config file in nova's provider.yaml format (schema 1.0): "
        "custom resource classes (with their reserved amounts) and traits of "
        "this node's root provider ($COMPUTE_NODE, or its name). Unset: none.",
    ),
    cfg.FloatOpt(
        "cpu_nominal_watts",
        min=1.0,
        help="CPU power of the whole node at its highest frequency, for a node "
        "whose CPU cannot be capped through RAPL (no constraint_0_power_limit_uw: "
        "cpufreq only, and AMD). With it the node registers the CPU cap range "
        "[this x lowest/highest frequency, this], and a cap C runs the CPUs at "
        "scaling_max_freq = highest x C / this. Unset: such a node reports CPU caps "
        "as unsupported.",
    ),
    cfg.BoolOpt(
        "gpus",
        default=True,
        help="Discover NVIDIA GPUs through NVML (nvidia-ml-py) and apply GPU caps. "
        "False reports no GPU without loading NVML.",
    ),
    cfg.HostAddressOpt(
        "metrics_host",
        default="127.0.0.1",
        help="Address of the Prometheus metrics endpoint.",
    ),
    cfg.PortOpt(
        "metrics_port",
        default=0,
        help="Port of the Prometheus metrics endpoint (GET /metrics): applied caps, "
        "measured power per domain, apply failures. 0 does not serve metrics.",
    ),
]

# The node's compute service (node_agent.compute): builds over compute.<host>.
compute_opts = [
    cfg.BoolOpt(
        "compute",
        default=False,
        help="Serve this node's compute topic (compute.<host>) on the bus and run "
        "the instances the cell conductors build here through [agent] driver. "
        "False: the agent only registers, heartbeats and applies caps.",
    ),
    cfg.StrOpt(
        "driver",
        default="fake",
        help="Compute driver, by its joule.agent.drivers entry point: fake "
        "(instances that run nothing, with failure injection: the demo and tests) "
        "or exec (the workload's command under a cgroup whose CPU quota and memory "
        "limit are the instance's claim).",
    ),
    cfg.IntOpt(
        "build_threads",
        default=64,
        min=1,
        help="Builds (and other compute calls) this agent handles at once: the "
        "default of [DEFAULT] executor_thread_pool_size when that is not set. A "
        "build holds its thread for [agent] start_grace while the command is "
        "watched, so the node starts at most this many per start_grace seconds; "
        "the rest wait on the bus, and a build still waiting after the cell "
        "conductor's [conductor] build_timeout counts as failed there.",
    ),
    cfg.StrOpt(
        "state_dir",
        default="/var/lib/joule/agent",
        help="Where the agent keeps a record of every instance it runs (and the "
        "exec driver the exit status of each): a restarted agent finds them there.",
    ),
    cfg.StrOpt(
        "instance_log_dir",
        help="exec driver: where each instance's standard output and error go "
        "(<instance uuid>.log). Unset: <state_dir>/logs.",
    ),
    cfg.StrOpt(
        "cgroup_root",
        default="/sys/fs/cgroup",
        help="exec driver: where the cgroup tree is mounted (v2: the unified "
        "hierarchy; v1: the directory holding the cpu and memory hierarchies).",
    ),
    cfg.StrOpt(
        "cgroup_parent",
        default="joule",
        help="exec driver: the group (relative to each hierarchy's root) under "
        "which every instance gets a group of its own, named by its uuid. Agents "
        "sharing one cgroup tree need distinct parents.",
    ),
    cfg.FloatOpt(
        "start_grace",
        default=1.0,
        min=0.0,
        help="exec driver: seconds a started command is watched before its build "
        "is answered; one that exits non-zero within them failed to start (the "
        "build moves to an alternate host).",
    ),
    cfg.FloatOpt(
        "delete_grace",
        default=10.0,
        min=0.0,
        help="Seconds between SIGTERM and SIGKILL when an instance is deleted.",
    ),
    cfg.FloatOpt(
        "instance_poll_interval",
        default=1.0,
        min=0.05,
        help="Seconds between looks at the running instances; an instance that "
        "ended is reported to its cell's conductors at the next look.",
    ),
    cfg.FloatOpt(
        "fake_failure_rate",
        default=0.0,
        min=0.0,
        max=1.0,
        help="fake driver: probability that a build fails (exercises the move to an alternate).",
    ),
    cfg.BoolOpt(
        "fake_fails",
        default=False,
        help="fake driver: every build on this node fails.",
    ),
    cfg.IntOpt(
        "fake_seed",
        help="fake driver: seed of the failure draws, for reproducible runs.",
    ),
]


def register_opts(conf):
    conf.register_group(cfg.OptGroup(agent_group.name, title=agent_group.title))
    conf.register_opts(agent_opts + compute_opts, group=agent_group.name)
    placement_client.register_opts(conf)
    # The bus, for the compute service ([agent] compute).
    rpc.register_opts(conf)


def list_opts():
    """Entry point of oslo-config-generator (``oslo.config.opts``)."""
    return (
        [(agent_group, agent_opts + compute_opts)] + placement_client.list_opts() + rpc.list_opts()
    )


def make_conf(args=None, default_config_files=None, overrides=None, project="node-agent"):
    """A fresh ConfigOpts with the agent options; overrides {(group, name): value}."""
    return config.make_conf(register_opts, args, default_config_files, overrides, project)
