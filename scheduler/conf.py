"""oslo.config options of the scheduler worker (and the conductor, which embeds it):
``[filter_scheduler]`` here, ``[placement]`` (the REST client) from joule.placement_client.

Names follow nova's ``[filter_scheduler]`` where nova has the option, so an
operator who knows nova reads them without a glossary.
"""

from oslo_config import cfg

from joule import config
from joule import metrics_http
from joule import placement_client
from joule import rpc
from scheduler import filters
from scheduler import weighers

filter_group = cfg.OptGroup("filter_scheduler", title="Filter scheduler")

# The group of the client options before [placement] (deprecated names).
LEGACY_CLIENT_GROUP = "placement_client"

scheduler_group = cfg.OptGroup("scheduler", title="Scheduler")

# Ours, in the default chain order (entry points of filters.NAMESPACE).
ALL_FILTERS = list(filters.DEFAULT_CHAIN)

filter_opts = [
    cfg.MultiStrOpt(
        "available_filters",
        default=[filters.ALL_AVAILABLE],
        help="Filters the scheduler may use: names of entry points of the "
        "'" + filters.NAMESPACE + "' namespace (nova's option; nova takes class "
        "paths). 'all' (the default) makes every installed filter available, ours and "
        "those of other installed packages. Repeat the option for several names.",
    ),
    cfg.ListOpt(
        "enabled_filters",
        default=list(ALL_FILTERS),
        help="Filters run, in this order, on every candidate host that placement "
        "returned. Cheap, highly selective filters first. Ours: "
        + ", ".join(ALL_FILTERS)
        + ". A filter of another package is named by its "
        "entry point in '" + filters.NAMESPACE + "'. A name that is not installed or "
        "not in available_filters fails at start-up.",
    ),
    cfg.ListOpt(
        "weight_classes",
        default=[weighers.ALL_INSTALLED],
        help="Weighers used to rank hosts: names of entry points of the '"
        + weighers.NAMESPACE
        + "' namespace (nova's option; nova takes class paths). "
        "'all' (the default) uses every installed weigher. Ours: "
        + ", ".join(weighers.OURS)
        + ". A name that is not installed fails at start-up.",
    ),
    cfg.FloatOpt(
        "ram_weight_multiplier",
        default=1.0,
        help="Multiplier of the free-RAM weigher (MEMORY_MB left). Positive spreads "
        "work over hosts with most free RAM, negative stacks it onto the fullest.",
    ),
    cfg.FloatOpt(
        "cpu_weight_multiplier",
        default=1.0,
        help="Multiplier of the free-VCPU weigher. Positive spreads, negative stacks.",
    ),
    cfg.FloatOpt(
        "disk_weight_multiplier",
        default=1.0,
        help="Multiplier of the free-DISK_GB weigher. Positive spreads, negative stacks.",
    ),
    cfg.FloatOpt(
        "power_weight_multiplier",
        default=10.0,
        help="Multiplier of the power weigher, which prefers eco hosts for standard work "
        "so that performance hosts stay free for performance work. It is larger than "
        "the resource weighers by default so that the power profile decides first and "
        "free resources break ties; 0 disables it.",
    ),
    cfg.FloatOpt(
        "packing_weight_multiplier",
        default=0.0,
        help="Multiplier of the packing weigher, which puts work on the hosts already "
        "running the most (their used share of VCPU or RAM), so that the others stay "
        "empty and the power controller can suspend them ([power] suspend_enabled). "
        "0 (the default) disables it; with suspend on, a value above the free-resource "
        "weighers' sum and below power_weight_multiplier (such as 5) packs standard "
        "work while the power profile still decides first.",
    ),
    cfg.FloatOpt(
        "efficiency_weight_multiplier",
        default=0.0,
        help="Multiplier of the efficiency weigher, which puts standard work on the "
        "hardware doing the most work per watt (CPU cores per watt of its CPU and GPU "
        "maxima, from the hardware record; hosts without one rank last). 0 (the "
        "default) disables it; with suspend and packing on, a value below "
        "packing_weight_multiplier (such as 2) starts new stacks on the efficient "
        "family, so that the others empty out and sleep.",
    ),
    cfg.FloatOpt(
        "build_failure_weight_multiplier",
        default=1000000.0,
        min=0.0,
        help="Multiplier of the build-failure weigher (nova's option and default): "
        "hosts with consecutive failed builds (reported by the conductors, cleared by "
        "a successful build) sink below every host without. 0 disables it.",
    ),
    cfg.FloatOpt(
        "soft_affinity_weight_multiplier",
        default=1.0,
        min=0.0,
        help="Multiplier of the soft-affinity weigher (nova's option): for a request "
        "whose server group has the soft-affinity policy, hosts running more of the "
        "group's members weigh more. Other requests are not affected.",
    ),
    cfg.FloatOpt(
        "soft_anti_affinity_weight_multiplier",
        default=1.0,
        min=0.0,
        help="Multiplier of the soft-anti-affinity weigher (nova's option): for a "
        "request whose server group has the soft-anti-affinity policy, hosts running "
        "fewer of the group's members weigh more. Other requests are not affected.",
    ),
    cfg.StrOpt(
        "availability_zone_label",
        default="topology.kubernetes.io/zone",
        help="The node label that names a host's availability zone (Kubernetes' "
        "well-known zone label by default). A request naming availability_zone only "
        "goes to hosts of that zone, and alternates stay in the selected host's zone.",
    ),
    cfg.StrOpt(
        "default_availability_zone",
        default="nova",
        help="The zone of a host without the zone label (nova's "
        "default_availability_zone, which nova keeps in [DEFAULT]).",
    ),
    cfg.IntOpt(
        "host_subset_size",
        default=1,
        min=1,
        help="The selected host is picked at random among this many best-weighed hosts. "
        "1 always picks the best; larger values make concurrent scheduler workers "
        "collide less often on the same host at the price of a slightly worse fit.",
    ),
    cfg.BoolOpt(
        "shuffle_best_same_weighed_hosts",
        default=True,
        help="Shuffle the hosts tied at the best weight before picking, so that "
        "concurrent workers given the same candidates do not all race for the first "
        "one (herding).",
    ),
    cfg.IntOpt(
        "page_size",
        default=1000,
        min=1,
        max=1000,
        help="Root providers per page of GET /allocation_candidates (placement's "
        "maximum is 1000). Larger pages mean fewer round trips, smaller ones less "
        "memory per response on the server. With max_placement_results > 0 a page "
        "holds at most that many roots.",
    ),
    cfg.IntOpt(
        "max_placement_results",
        default=1000,
        min=0,
        help="Stop reading candidate pages once this many candidate hosts were read "
        "and at least max_attempts per instance of them passed the filters (nova's "
        "option of the same name). 0 reads every page, so the weighers rank the whole "
        "cluster: the best placement, at a cost that grows with the cluster (about "
        "one page per 1000 hosts per request). A cap makes a request cost about the "
        "same at any cluster size, but the weighers only rank the hosts read: with "
        "random_walk_start those from a random point of the cluster on, so requests "
        "spread over every host over time. When too few hosts pass the filters, or "
        "every claim on them loses its race, the walk reads on (around the whole "
        "cluster if need be), so a cap never fails a request that fits.",
    ),
    cfg.BoolOpt(
        "random_walk_start",
        default=True,
        help="Start each walk of the candidate pages at a random point of placement's "
        "root-provider order (page_start), wrapping around past the end, so that "
        "concurrent workers read different hosts first and a capped walk "
        "(max_placement_results) does not fill the cluster from its oldest hosts. "
        "False walks from the first root provider every time.",
    ),
    cfg.IntOpt(
        "report_top_hosts",
        default=5,
        min=0,
        help="How many of the best-weighed hosts (with their weights) each scheduling "
        "report keeps.",
    ),
    cfg.BoolOpt(
        "write_reports",
        default=True,
        help="Write a scheduling report per request to placement "
        "(PUT /scheduling_reports/{request_id}). One extra write per request.",
    ),
]

scheduler_opts = [
    cfg.IntOpt(
        "service_down_time",
        default=60,
        min=1,
        help="Seconds after a node agent's last heartbeat when its host is taken "
        "for down: ComputeFilter removes it, and NoValidHost says so (nova's option "
        "and default). Keep it several times [agent] report_interval. Only nodes that "
        "ever sent a heartbeat are judged: a node loaded from an inventory file, "
        "with no agent, is never down. The age is measured by placement's database "
        "clock.",
    ),
    cfg.IntOpt(
        "max_attempts",
        default=3,
        min=1,
        deprecated_group=filter_group.name,
        help="Hosts tried per instance: the selected one plus up to max_attempts - 1 "
        "alternates in its cell, which the conductor uses when a build fails. Larger "
        "values survive more build failures at the cost of longer selections. "
        "Nova's group; [filter_scheduler] max_attempts is its deprecated old place.",
    ),
    cfg.IntOpt(
        "batch_size",
        default=64,
        min=1,
        max=1000,
        help="select_destinations calls a scheduler-worker handles together: "
        "concurrent calls (one per executor thread, [DEFAULT] "
        "executor_thread_pool_size) that ask for the same kind of host share one "
        "walk of the candidate pages, are placed one after the other on what the "
        "walk read (each sees what the earlier ones took), and are claimed in one "
        "POST /allocations; each call still gets its own answer. 1 schedules every "
        "call on its own, as before batching. A call holds an executor thread "
        "while it waits for its batch, so unless [DEFAULT] executor_thread_pool_size "
        "is set, a batching worker runs batch_size x concurrent_batches threads "
        "(enough one-request select_destinations calls to fill every batch it works "
        "on; select_destinations_many calls bring several requests each), and a "
        "worker with batch_size 1 keeps 8 (each thread is an independent walk that "
        "races the others for the same hosts). Setting executor_thread_pool_size "
        "below that caps the batches of one-request calls.",
    ),
    cfg.IntOpt(
        "batch_window_ms",
        default=2,
        min=0,
        max=1000,
        help="Milliseconds a call waits for others to join its batch when batches "
        "are already being worked on (calls that arrive while a batch is in hand "
        "wait for it anyway and join the next one). A call that arrives when the "
        "worker is idle starts at once: batching costs a lone call nothing.",
    ),
    cfg.IntOpt(
        "concurrent_batches",
        default=2,
        min=1,
        max=64,
        help="Batches one scheduler-worker works on at once. More overlaps one "
        "batch's placement round trips with another's work; each batch reads its "
        "own candidate pages. The worker's executor threads follow it (batch_size "
        "x concurrent_batches, unless [DEFAULT] executor_thread_pool_size is set).",
    ),
    cfg.FloatOpt(
        "host_cache_seconds",
        default=10.0,
        min=0.0,
        max=3600.0,
        help="Seconds a scheduler-worker keeps a batch's candidate walk, with the "
        "capacity its own claims took subtracted, for the next batches of the same "
        "kind of request (scheduler/host_cache.py): they place without reading "
        "placement. Placement still checks every claim, so a stale view costs a lost "
        "race (the request is then scheduled alone on a fresh walk), never an "
        "over-commit; a walk that lost a race is dropped at once. What other workers "
        "claim reaches the walk at once over the bus (scheduler/claim_feed.py), so a "
        "walk is kept this long times the workers heard from in the last minute: "
        "together they read each kind as often as one worker does. What was freed, "
        "and a node's new power profile, are seen within that time. A walk past nine "
        "tenths of its time is read again in the background by the batch that "
        "takes it, and serves up to half as long again while that walk is read, so "
        "under a steady stream no batch waits for a walk of its kind. 0 walks for "
        "every batch (a simulated clock needs that: the wall clock says nothing "
        "about its time). Only batching workers (batch_size > 1) keep "
        "walks.",
    ),
]


def executor_threads(conf):
    """The ``[DEFAULT] executor_thread_pool_size`` a scheduler-worker derives
    when it is not set: ``batch_size`` x ``concurrent_batches`` when it
    batches (each call holds a thread while it waits for its batch, so that
    many one-request calls fill every batch in hand, and the threads beyond
    the batches in hand only wait: they do not race), else
    ``rpc.EXECUTOR_THREADS`` (every thread walks and claims on its own)."""
    group = conf.scheduler
    if group.batch_size > 1:
        return group.batch_size * group.concurrent_batches
    return rpc.EXECUTOR_THREADS


def register_opts(conf):
    # Fresh OptGroup objects per ConfigOpts: oslo.config keeps overrides in
    # the group object, so sharing the module-level ones would leak one
    # ConfigOpts' overrides into every other (tests, several workers).
    conf.register_group(cfg.OptGroup(filter_group.name, title=filter_group.title))
    conf.register_opts(filter_opts, group=filter_group.name)
    conf.register_group(cfg.OptGroup(scheduler_group.name, title=scheduler_group.title))
    conf.register_opts(scheduler_opts, group=scheduler_group.name)
    # [placement]: the REST client; the old [placement_client] names are read
    # for one release.
    placement_client.register_opts(conf, LEGACY_CLIENT_GROUP)
    rpc.register_opts(conf)
    metrics_http.register_opts(conf)


def list_opts():
    """Entry point of oslo-config-generator (``oslo.config.opts``)."""
    return (
        [(filter_group, filter_opts), (scheduler_group, scheduler_opts)]
        + placement_client.list_opts(LEGACY_CLIENT_GROUP)
        + rpc.list_opts()
        + metrics_http.list_opts()
    )


def make_conf(args=None, default_config_files=None, overrides=None, project="scheduler"):
    """A fresh ConfigOpts with the scheduler options; overrides {(group, name): value}."""
    return config.make_conf(register_opts, args, default_config_files, overrides, project)


def placement_client_of(conf):
    """The placement client of a scheduler or conductor configuration."""
    return placement_client.PlacementClient.from_conf(conf, LEGACY_CLIENT_GROUP)
