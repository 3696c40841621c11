"""Host weighers: raw values per host, normalized together, times a multiplier.

A weigher has a ``name``, the config option of its multiplier
(``multiplier_option`` in ``[filter_scheduler]``), ``raw(host, spec)`` and
``node_fields(spec)``: the node-data fields it reads for that spec.
``weigh_hosts`` normalizes each weigher's raw values over the hosts with
``normalize.normalize`` and sums ``multiplier * normalized`` per host, as nova
does; the per-weigher parts are kept for the scheduling report. A weigher with
``applies(spec)`` is skipped for requests it has nothing to say about.
"""

import math

from joule import vocabulary
from scheduler.hosts import FREE_DISK
from scheduler.hosts import FREE_RAM
from scheduler.hosts import FREE_VCPU
from scheduler.weighers.normalize import normalize


class FreeResourceWeigher:
    resource_class = None
    # nova's RAM, CPU and disk weighers: normalized against 0, not the
    # emptiest host, so nearly-full hosts are not pulled apart.
    minval = 0

    def node_fields(self, spec):
        return set()  # provider summaries only

    def raw(self, host, spec):
        return host.free(self.resource_class)


class RAMWeigher(FreeResourceWeigher):
    name = "RAMWeigher"
    multiplier_option = "ram_weight_multiplier"
    resource_class = FREE_RAM


class CPUWeigher(FreeResourceWeigher):
    name = "CPUWeigher"
    multiplier_option = "cpu_weight_multiplier"
    resource_class = FREE_VCPU


class DiskWeigher(FreeResourceWeigher):
    name = "DiskWeigher"
    multiplier_option = "disk_weight_multiplier"
    resource_class = FREE_DISK


class PowerWeigher:
    """Standard work prefers eco (and draining) hosts, so that performance hosts
    stay free for performance work. Performance work only sees performance
    hosts after the JoulieFilter, so it gets no preference here."""

    name = "PowerWeigher"
    multiplier_option = "power_weight_multiplier"

    def node_fields(self, spec):
        return set() if spec.is_performance else {"schedulable_class"}

    def raw(self, host, spec):
        if spec.is_performance:
            return 0.0
        if host.schedulable_class in vocabulary.BLOCKED_FOR_PERFORMANCE:
            return 1.0
        if host.schedulable_class is None:
            return 0.5  # unmanaged: neither saves nor costs a performance slot
        return 0.0


class BuildFailureWeigher:
    """Nova's: a host whose recent builds failed sinks, by its count of
    consecutive failed builds (reported by the conductors, cleared by a
    success). The large default multiplier puts such hosts behind every
    healthy one."""

    name = "BuildFailureWeigher"
    multiplier_option = "build_failure_weight_multiplier"

    def node_fields(self, spec):
        return {"failed_builds"}

    def raw(self, host, spec):
        return -host.failed_builds


class ServerGroupSoftAffinityWeigher:
    """Nova's: for a soft-affinity group, hosts running more of its members
    weigh more."""

    name = "ServerGroupSoftAffinityWeigher"
    multiplier_option = "soft_affinity_weight_multiplier"
    policy = "soft-affinity"
    sign = 1.0

    def applies(self, spec):
        group = getattr(spec, "group", None)
        return group is not None and group.policy == self.policy

    def node_fields(self, spec):
        return set()  # the host's uuid only

    def raw(self, host, spec):
        return self.sign * spec.group.members_on(host.uuid)


class ServerGroupSoftAntiAffinityWeigher(ServerGroupSoftAffinityWeigher):
    """Nova's: for a soft-anti-affinity group, hosts running fewer of its
    members weigh more."""

    name = "ServerGroupSoftAntiAffinityWeigher"
    multiplier_option = "soft_anti_affinity_weight_multiplier"
    policy = "soft-anti-affinity"
    sign = -1.0


ALL = (RAMWeigher, CPUWeigher, DiskWeigher, PowerWeigher, BuildFailureWeigher,
       ServerGroupSoftAffinityWeigher, ServerGroupSoftAntiAffinityWeigher)


def load(group):
    """(weigher, multiplier) pairs from the [filter_scheduler] group; a 0
    multiplier drops the weigher (it could not change the ranking)."""
    out = []
    for cls in ALL:
        multiplier = getattr(group, cls.multiplier_option)
        if multiplier:
            out.append((cls(), float(multiplier)))
    return out


# A node label ``scheduler.joule.io/<multiplier option>`` overrides that
# weigher's multiplier on the node, as nova's aggregate metadata of the same
# option names does per aggregate (we have no aggregate metadata).
MULTIPLIER_LABEL_PREFIX = "scheduler.joule.io/"


def host_multiplier(host, key, default):
    """The node label's multiplier for ``key``, else ``default``; a value that
    is not a finite number is ignored (the node record is an operator's)."""
    text = host.labels.get(key) if host.labels else None
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        return default
    return value if math.isfinite(value) else default


def weigh_hosts(hosts, spec, weighers):
    """Return [(total weight, {weigher: weighted part}, host)] in input order."""
    totals = [0.0] * len(hosts)
    parts = [{} for _ in hosts]
    for weigher, multiplier in weighers:
        applies = getattr(weigher, "applies", None)
        if applies is not None and not applies(spec):
            continue  # e.g. a server group weigher for a request without a group
        # hot: runs per host per request.
        normalized = normalize([weigher.raw(h, spec) for h in hosts],
                               minval=getattr(weigher, "minval", None))
        key = MULTIPLIER_LABEL_PREFIX + weigher.multiplier_option
        for i, value in enumerate(normalized):
            weighted = host_multiplier(hosts[i], key, multiplier) * value
            totals[i] += weighted
            parts[i][weigher.name] = weighted
    return [(totals[i], parts[i], hosts[i]) for i in range(len(hosts))]
