"""Host states built from the candidate pages alone (no second lookup per host).

One ``HostState`` per root provider that placement returned: its node data
(cell, family, power profile, schedulable class, labels, flags), every
allocation request that lands in its tree, and per-provider capacity and usage
from ``provider_summaries`` so that free resources can be weighed and tracked
as this request claims on the host.
"""

import dataclasses

# The classes the resource weighers read.
FREE_RAM = "MEMORY_MB"
FREE_VCPU = "VCPU"
FREE_DISK = "DISK_GB"


@dataclasses.dataclass(slots=True)
class HostState:
    uuid: str
    name: str | None = None
    cell: str | None = None
    family: str | None = None
    # CPU cores per watt of the hardware's maxima (node data); None: unknown.
    cores_per_watt: float | None = None
    profile: str | None = None
    schedulable_class: str | None = None
    # on | suspending | off | waking; None: never managed (on)
    power_state: str | None = None
    labels: dict = dataclasses.field(default_factory=dict)
    unschedulable: bool = False
    reserved: bool = False
    # The availability zone (the worker sets it from the zone label).
    zone: str | None = None
    # Consecutive failed builds the conductors reported (BuildFailureWeigher).
    failed_builds: int = 0
    # Seconds since the node agent's last heartbeat (placement's clock); None:
    # no agent ever reported (a node loaded from a file).
    heartbeat_age: float | None = None
    # Not heard from within [scheduler] service_down_time (the worker sets it).
    down: bool = False
    allocation_requests: list = dataclasses.field(default_factory=list)
    # rp uuid -> rc -> [capacity, used]; only providers of this host's tree
    providers: dict = dataclasses.field(default_factory=dict)

    def free(self, resource_class):
        total = 0
        for resources in self.providers.values():
            cap_used = resources.get(resource_class)
            if cap_used is not None:
                total += cap_used[0] - cap_used[1]
        return total

    def fits(self, allocation_request):
        """Whether the request still fits what this scheduler knows is left."""
        for rp, entry in allocation_request["allocations"].items():
            have = self.providers.get(rp)
            if have is None:
                continue  # a sharing provider outside the tree: placement decides
            for rc, amount in entry["resources"].items():
                cap_used = have.get(rc)
                if cap_used is not None and cap_used[1] + amount > cap_used[0]:
                    return False
        return True

    def consume(self, allocation_request):
        """Account a successful claim so later instances of the request see it."""
        for rp, entry in allocation_request["allocations"].items():
            have = self.providers.get(rp)
            if have is None:
                continue
            for rc, amount in entry["resources"].items():
                if rc in have:
                    have[rc][1] += amount

    def release(self, allocation_request):
        """Undo ``consume`` (a planned claim that was not made)."""
        for rp, entry in allocation_request["allocations"].items():
            have = self.providers.get(rp)
            if have is None:
                continue
            for rc, amount in entry["resources"].items():
                if rc in have:
                    have[rc][1] -= amount

    def usable_request(self):
        """The first allocation request that still fits, or None."""
        for areq in self.allocation_requests:
            if self.fits(areq):
                return areq
        return None


class HostStateBuilder:
    """Host states built page by page as the candidate walk goes.

    ``add(body)`` returns the hosts first seen on that page, so filters run
    on each page as it arrives and the walk can stop early. Provider
    summaries, root ids and node data are kept across pages: an allocation
    request that spans roots (a sharing provider) is attributed as if every
    page had been read at once, and a host's providers are complete whatever
    page listed them.
    """

    def __init__(self):
        self.roots = {}  # rp uuid -> root uuid
        self.summaries = {}  # rp uuid -> summary
        self.tree = {}  # root uuid -> [rp uuid, ...] with a summary
        self.nodes = {}
        self.hosts = {}  # root uuid -> HostState, in placement's order

    def add(self, body):
        roots, summaries, tree, hosts = self.roots, self.summaries, self.tree, self.hosts
        touched = set()
        for rp, summary in (body.get("provider_summaries") or {}).items():
            root = summary.get("root_provider_uuid") or rp
            if rp not in summaries:
                tree.setdefault(root, []).append(rp)
            roots[rp] = root
            summaries[rp] = summary
            touched.add(root)
        nodes = body.get("nodes")
        if nodes:
            self.nodes.update(nodes)
        new = []
        for areq in body.get("allocation_requests") or ():
            allocations = areq["allocations"]
            if len(allocations) == 1:
                rp = next(iter(allocations))
                root = roots.get(rp, rp)
            else:
                root = _root_of(areq, roots, self.nodes)
            host = hosts.get(root)
            if host is None:
                host = _new_host(root, self.nodes.get(root) or {})
                hosts[root] = host
                new.append(host)
                touched.add(root)
            host.allocation_requests.append(areq)
        for root in touched:
            host = hosts.get(root)
            if host is None:
                continue
            providers = host.providers
            for rp in tree.get(root, ()):
                if rp not in providers:
                    providers[rp] = {
                        rc: [v.get("capacity", 0), v.get("used", 0)]
                        for rc, v in (summaries[rp].get("resources") or {}).items()
                    }
        return new


def _root_of(areq, roots, nodes):
    """The root an allocation request is attributed to.

    The root of its providers; when the request spans several roots (a sharing
    provider), the root that has node data, else the root holding compute
    classes, else the first.
    """
    candidates = []
    for rp in areq["allocations"]:
        root = roots.get(rp, rp)
        if root not in candidates:
            candidates.append(root)
    if len(candidates) == 1:
        return candidates[0]
    with_node = [
        r
        for r in candidates
        if (nodes.get(r) or {}).get("name") is not None
        or (nodes.get(r) or {}).get("cell") is not None
    ]
    if with_node:
        return with_node[0]
    for rp, entry in areq["allocations"].items():
        if {FREE_VCPU, FREE_RAM} & set(entry["resources"]):
            return roots.get(rp, rp)
    return candidates[0]


def _new_host(root, node):
    return HostState(
        uuid=root,
        name=node.get("name"),
        cell=node.get("cell"),
        family=node.get("family"),
        cores_per_watt=node.get("cores_per_watt"),
        profile=node.get("profile"),
        schedulable_class=node.get("schedulable_class"),
        power_state=node.get("power_state"),
        labels=node.get("labels") or {},
        unschedulable=bool(node.get("unschedulable")),
        reserved=bool(node.get("reserved")),
        failed_builds=node.get("failed_builds") or 0,
        heartbeat_age=node.get("heartbeat_age"),
    )
