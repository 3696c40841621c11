"""The domain words the services share, defined once.

Placement stores them (allocations, build requests, node twins), the
scheduler filters and weighs on them, the power controller writes them. A
word that changes here changes for all three; a word spelt in a service
instead of taken from here is a bug waiting for the first rename.
"""

# -- workload classes: what a consumer (allocation, build request) asks for ----

PERFORMANCE = "performance"
STANDARD = "standard"
WORKLOAD_CLASSES = (PERFORMANCE, STANDARD)
# A consumer that names no class (every plain placement client) is standard
# work: it may run on any node, eco included.
DEFAULT_WORKLOAD_CLASS = STANDARD

# -- power profiles: what the power controller sets on a node ----------------

ECO = "eco"
PROFILES = (PERFORMANCE, ECO)

# -- schedulable classes: what the scheduler reads off a node's twin -----------

# A node moving from performance to eco while performance work still runs on
# it: its profile is already eco (no new performance work), its caps stay at
# performance until the last performance consumer is gone.
DRAINING = "draining"
SCHEDULABLE_CLASSES = (PERFORMANCE, ECO, DRAINING)
# Classes on which new performance work must not land.
BLOCKED_FOR_PERFORMANCE = frozenset({ECO, DRAINING})

# -- profile traits: the profile as a placement trait of the node's root -------

# Twin writes keep this trait in step with the twin's profile, so a plain
# placement client can filter on the profile with required=CUSTOM_... .
PROFILE_TRAITS = {
    PERFORMANCE: "CUSTOM_POWER_PROFILE_PERFORMANCE",
    ECO: "CUSTOM_POWER_PROFILE_ECO",
}


# -- power states: whether a node is up, beside its profile --------------------

# The power controller suspends idle nodes and wakes them for work
# ([power] suspend_enabled): ``suspending`` (asked to power off, not yet
# off), ``off``, ``waking`` (asked to power on, not yet back). Only an ``on``
# node takes work; a twin that never had a power state is on.
POWER_ON = "on"
POWER_SUSPENDING = "suspending"
POWER_OFF = "off"
POWER_WAKING = "waking"
POWER_STATES = (POWER_ON, POWER_SUSPENDING, POWER_OFF, POWER_WAKING)
NOT_ON = frozenset({POWER_SUSPENDING, POWER_OFF, POWER_WAKING})
# The power state as a trait of the node's root, kept in step with the twin
# as the profile trait is: a plain client leaves sleeping nodes out with
# required=!CUSTOM_POWER_STATE_OFF (or asks for CUSTOM_POWER_STATE_ON).
POWER_STATE_TRAITS = {state: f"CUSTOM_POWER_STATE_{state.upper()}" for state in POWER_STATES}

# -- hardware family: the unit of fairness of the performance split ------------

# The family of a node nothing is known of (no GPUs, no CPU model): its own
# family, so it gets its own performance slot instead of a share of a
# ``cpu:`` family with an empty model that says nothing to an operator.
UNKNOWN_FAMILY = "unknown"


def family_key(gpu_count, gpu_model, cpu_model):
    """``gpu:<GPU model>`` when the node has GPUs, else ``cpu:<CPU model>``,
    else (no CPU model either) ``unknown``.

    The raw model strings are used as they are (no normalisation), as the
    Joulie's power policy does, so two spellings of one model are two families.
    """
    if gpu_count and gpu_count > 0:
        return f"gpu:{gpu_model or ''}"
    if cpu_model and cpu_model.strip():
        return f"cpu:{cpu_model}"
    return UNKNOWN_FAMILY


def cores_per_watt(cpu_cores, cpu_sockets, cpu_max_cap_watts, gpu_count, gpu_max_cap_watts):
    """The work per watt of a node's hardware record: its CPU cores over the
    most its CPU packages (``cpu_sockets`` times the per-package maximum) and
    GPU boards may draw. Newer, denser parts do more work per watt (an EPYC
    9965 node 0.38 cores per watt, an EPYC 9654 node 0.27), and a GPU node
    running CPU work keeps its boards idling, so it ranks low for that work.
    None when the record does not give the cores or the CPU maximum.
    """
    if not cpu_cores or not cpu_max_cap_watts or cpu_max_cap_watts <= 0:
        return None
    watts = (cpu_sockets or 1) * cpu_max_cap_watts
    if gpu_count and gpu_max_cap_watts:
        watts += gpu_count * gpu_max_cap_watts
    return cpu_cores / watts


# The scheduler's answer status for a request that fits only on nodes that
# are asleep: the super conductor holds it while they wake.
SCHEDULER_WAITING = "waiting"


# -- build request leases on the wire -------------------------------------------

# The header of an allocation write guarded by a build request's lease:
# "<generation> <owner>" (the conductors send it, placement checks it).
LEASE_HEADER = "Joule-Build-Lease"

# How a placed instance ended, as its node agent reports it and placement
# records it (build_requests.instance_state); null while it runs.
INSTANCE_ENDS = ("finished", "errored", "deleted", "lost")
