"""Host weighers: raw values per host, normalized together, times a multiplier.

A weigher has a ``name``, the config option of its multiplier
(``multiplier_option`` in ``[filter_scheduler]``), ``raw(host, spec)`` and
``node_fields(spec)``: the node-data fields it reads for that spec.
``weigh_hosts`` normalizes each weigher's raw values over the hosts with
``normalize.normalize`` and sums ``multiplier * normalized`` per host, as nova
does; the per-weigher parts are kept for the scheduling report. A weigher with
``applies(spec)`` is skipped for requests it has nothing to say about.

Weighers are found through the ``joule.scheduler.weighers`` entry points
(setup.cfg lists ours); ``[filter_scheduler] weight_classes`` names the ones
used. A weigher from another package whose multiplier option is not one of
ours uses its class attribute ``default_multiplier`` (1.0 without one).
"""

import logging
import math

from stevedore import extension

from joule import vocabulary
from scheduler.hosts import FREE_DISK
from scheduler.hosts import FREE_RAM
from scheduler.hosts import FREE_VCPU
from scheduler.weighers.normalize import normalize

LOG = logging.getLogger(__name__)

# The entry point namespace of host weighers (nova's is nova.scheduler.weights).
NAMESPACE = "joule.scheduler.weighers"

# ``[filter_scheduler] weight_classes`` value meaning every installed one.
ALL_INSTALLED = "all"

# Ours, in the order "all" runs them (their entry points are in setup.cfg);
# other installed weighers follow, by name.
OURS = (
    "RAMWeigher",
    "CPUWeigher",
    "DiskWeigher",
    "PowerWeigher",
    "PackingWeigher",
    "EfficiencyWeigher",
    "BuildFailureWeigher",
    "ServerGroupSoftAffinityWeigher",
    "ServerGroupSoftAntiAffinityWeigher",
)


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


class PackingWeigher:
    """Work goes to the hosts already running the most, so that the rest
    stay empty and the power controller can suspend them
    ([power] suspend_enabled): the host's used share of its VCPU or RAM,
    whichever is larger. Its multiplier is 0 (off) by default; with
    suspend on, set it above the free-resource weighers' sum (which
    spread) and below the power weigher's, so the profile still decides
    first and packing breaks its ties (docs/configure.md)."""

    name = "PackingWeigher"
    multiplier_option = "packing_weight_multiplier"
    # Normalized from the emptiest candidate: a page of busy hosts still
    # ranks the busiest first.
    minval = None

    def node_fields(self, spec):
        return set()  # provider summaries only

    def raw(self, host, spec):
        share = 0.0
        for resource_class in (FREE_VCPU, FREE_RAM):
            capacity = used = 0
            for resources in host.providers.values():
                cap_used = resources.get(resource_class)
                if cap_used is not None:
                    capacity += cap_used[0]
                    used += cap_used[1]
            if capacity > 0:
                share = max(share, used / capacity)
        return share


class EfficiencyWeigher:
    """Standard work goes to the hardware that does the most work per watt:
    the host's CPU cores per watt of its packages' and boards' maxima
    (``cores_per_watt`` in node data, from the hardware record). With the
    packing weigher it chooses which empty node a new stack starts on, so
    that work gathers on the efficient family and the others empty out and
    sleep. A host whose record does not give it ranks last. Performance
    work gets no preference (it runs where its slots are). Its multiplier
    is 0 (off) by default; docs/configure.md, "Suspending idle nodes"."""

    name = "EfficiencyWeigher"
    multiplier_option = "efficiency_weight_multiplier"
    # Normalized from the least efficient candidate: a page of one family
    # gets no preference at all.
    minval = None

    def node_fields(self, spec):
        return set() if spec.is_performance else {"cores_per_watt"}

    def raw(self, host, spec):
        if spec.is_performance or host.cores_per_watt is None:
            return 0.0
        return host.cores_per_watt


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


class UnknownWeigher(ValueError):
    pass


def installed():
    """{entry point name: weigher class} of every installed weigher, ours
    first in OURS order, then the others by name; one that fails to import
    is logged and left out."""

    def failed(_manager, entrypoint, exc):
        LOG.warning(
            "weigher entry point %s (%s) failed to load: %s", entrypoint.name, entrypoint.value, exc
        )

    mgr = extension.ExtensionManager(
        NAMESPACE, invoke_on_load=False, on_load_failure_callback=failed
    )
    return {ext.name: ext.plugin for ext in sorted(mgr, key=_order)}


def _order(ext):
    return (OURS.index(ext.name) if ext.name in OURS else len(OURS), ext.name)


def load(group):
    """(weigher, multiplier) pairs of ``[filter_scheduler] weight_classes``;
    a 0 multiplier drops the weigher (it could not change the ranking). A
    name that is not installed fails at start-up."""
    found = installed()
    names = list(found) if ALL_INSTALLED in group.weight_classes else group.weight_classes
    out = []
    for name in names:
        cls = found.get(name)
        if cls is None:
            raise UnknownWeigher(
                f"weigher {name!r} in [filter_scheduler] weight_classes is not installed; "
                f"installed: {', '.join(found)}"
            )
        option = cls.multiplier_option
        if option in group:
            multiplier = getattr(group, option)
        else:
            multiplier = getattr(cls, "default_multiplier", 1.0)
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
        normalized = normalize(
            [weigher.raw(h, spec) for h in hosts], minval=getattr(weigher, "minval", None)
        )
        key = MULTIPLIER_LABEL_PREFIX + weigher.multiplier_option
        for i, value in enumerate(normalized):
            weighted = host_multiplier(hosts[i], key, multiplier) * value
            totals[i] += weighted
            parts[i][weigher.name] = weighted
    return [(totals[i], parts[i], hosts[i]) for i in range(len(hosts))]
