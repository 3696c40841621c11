"""Registration: the node's root provider, inventories, traits, node and
hardware records, with the rules of nova's update_provider_tree.

1. The root provider named ``[agent] host``: adopted when it exists (a node
   first loaded with ``placement-manage inventory load`` keeps its uuid and
   allocations), else created.
2. Inventories: VCPU (logical CPUs), MEMORY_MB (MemTotal), PGPU (NVML's
   GPUs) and the provider config's custom classes are the provider's whole
   inventory, as a virt driver's is. ``reserved_host_*`` are the reserved
   amounts; an allocation ratio that is not configured keeps what placement
   holds (a new inventory gets ``initial_*_allocation_ratio``). Written only
   when something differs, with the provider generation read just before.
   An inventory placement refuses because allocations exceed it
   (``placement.inventory.inuse``) is logged once, in one line, and the old
   inventory stays; the agent carries on.
3. Traits: the agent owns the CPU traits (``traits.MANAGED``) and adds the
   provider config's; every other trait of the provider is kept.
4. Node record: cell, labels (the configured ones, the zone label,
   ``joulie.io/managed`` and ``family`` as ``inventory load`` writes them;
   labels set by others are kept); ``reserved`` and ``unschedulable`` are the
   operator's and are never changed.
5. Hardware record: the shape ``inventory load`` writes, cap ranges from
   RAPL (or cpufreq with ``cpu_nominal_watts``) and NVML.

A pass where nothing changed makes only reads. A generation conflict (an
operator or the power controller wrote in between) re-reads and retries,
up to ``RETRIES`` times; the next pass tries again after that.
"""

import dataclasses
import logging

from joule import placement_client
from joule import vocabulary
from node_agent import traits as traits_mod

LOG = logging.getLogger(__name__)

RETRIES = 3
MANAGED_LABEL = "joulie.io/managed"
FAMILY_LABEL = "family"
_INVENTORY_DEFAULTS = {"reserved": 0, "min_unit": 1, "step_size": 1, "allocation_ratio": 1.0}
_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


@dataclasses.dataclass
class Plan:
    """What the node should look like in placement."""

    name: str
    inventories: dict  # resource class -> fields (allocation_ratio None: keep placement's)
    traits: list  # traits the agent sets
    managed_traits: frozenset  # traits the agent removes when it does not set them
    cell: str | None
    labels: dict
    hardware: dict
    custom_classes: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Result:
    uuid: str
    writes: list  # what was written, e.g. "inventories", "traits"
    refused: list  # one line per write placement refused


def hardware_record(node, opts):
    cpu_low, cpu_high = node.cpu_cap_range(opts.cpu_nominal_watts)
    gpu_low, gpu_high = node.gpu_cap_range()
    return {
        "cpu_model": node.cpu.model,
        "cpu_sockets": node.cpu.sockets,
        "cpu_cores": node.cpu.cores,
        "memory_gib": max(1, round(node.memory_mb / 1024)),
        "gpu_vendor": node.gpu_vendor,
        "gpu_model": node.gpu_model,
        "gpu_count": len(node.gpus),
        "gpu_min_cap_watts": gpu_low,
        "gpu_max_cap_watts": gpu_high,
        "cpu_min_cap_watts": cpu_low,
        "cpu_max_cap_watts": cpu_high,
    }


def _inventory(total, reserved, ratio):
    return {
        "total": total,
        "reserved": min(reserved, total),
        "min_unit": 1,
        "max_unit": total,
        "step_size": 1,
        "allocation_ratio": ratio,
    }


def plan(node, opts, custom_inventories=None, custom_traits=()):
    """The Plan of a ``discovery.Node`` under ``[agent]`` options ``opts``."""
    inventories = {
        "VCPU": _inventory(node.cpu.threads, opts.reserved_host_cpus, opts.cpu_allocation_ratio),
        "MEMORY_MB": _inventory(
            node.memory_mb, opts.reserved_host_memory_mb, opts.ram_allocation_ratio
        ),
    }
    if node.gpus:
        inventories["PGPU"] = _inventory(len(node.gpus), 0, 1.0)
    custom = dict(custom_inventories or {})
    for rc, fields in custom.items():
        inv = {**_INVENTORY_DEFAULTS, "max_unit": fields["total"], **fields}
        inventories[rc] = inv
    hardware = hardware_record(node, opts)
    labels = dict(opts.labels or {})
    if opts.availability_zone:
        labels[opts.availability_zone_label] = opts.availability_zone
    labels[MANAGED_LABEL] = "true"
    labels[FAMILY_LABEL] = vocabulary.family_key(
        hardware["gpu_count"], hardware["gpu_model"], hardware["cpu_model"]
    )
    cpu_traits = traits_mod.cpu_traits(node.cpu)
    return Plan(
        name=opts.host,
        inventories=inventories,
        traits=sorted(set(cpu_traits) | set(custom_traits)),
        managed_traits=traits_mod.MANAGED,
        cell=opts.cell,
        labels=labels,
        hardware=hardware,
        custom_classes=sorted(custom),
    )


def _initial_ratio(rc, opts):
    if rc == "VCPU":
        return opts.initial_cpu_allocation_ratio
    if rc == "MEMORY_MB":
        return opts.initial_ram_allocation_ratio
    return 1.0


def wanted_inventories(plan_, have, opts):
    """The full inventory body, with nova's allocation-ratio rule applied."""
    out = {}
    for rc, inv in plan_.inventories.items():
        inv = dict(inv)
        if inv["allocation_ratio"] is None:
            inv["allocation_ratio"] = (
                have[rc]["allocation_ratio"] if rc in have else _initial_ratio(rc, opts)
            )
        out[rc] = inv
    return out


def _same_inventories(want, have):
    if set(want) != set(have):
        return False
    for rc, inv in want.items():
        for field in _FIELDS:
            a, b = inv[field], have[rc].get(field)
            if isinstance(a, float) or isinstance(b, float):
                if b is None or abs(float(a) - float(b)) > 1e-9:
                    return False
            elif a != b:
                return False
    return True


def _same_hardware(want, have):
    if have is None:
        return False
    for key, value in want.items():
        other = have.get(key)
        if isinstance(value, float) and isinstance(other, (int, float)):
            if abs(value - other) > 1e-6:
                return False
        elif value != other:
            return False
    return True


def wanted_traits(plan_, have):
    return sorted((set(have) - plan_.managed_traits) | set(plan_.traits))


def wanted_node(plan_, node):
    """(cell, labels) the node record should have, given the stored one (or None)."""
    stored = node or {}
    labels = {**(stored.get("labels") or {}), **plan_.labels}
    cell = plan_.cell if plan_.cell is not None else stored.get("cell")
    return cell, labels


class Registrar:
    """Registers one node; remembers refusals so each is logged once."""

    def __init__(self, client, opts):
        self.client = client
        self.opts = opts
        self.uuid = None
        self._refusals = set()

    def _provider(self, name, writes):
        if self.uuid is not None:
            return self.uuid
        found = self.client.find_provider(name)
        if found is None:
            try:
                found = self.client.create_provider(name)
                writes.append("provider")
                LOG.info("created resource provider %s (%s)", name, found["uuid"])
            except placement_client.Conflict:
                found = self.client.find_provider(name)  # created concurrently
                if found is None:
                    raise
        elif found.get("parent_provider_uuid"):
            raise placement_client.PlacementError(
                "GET",
                "/resource_providers",
                200,
                None,
                f"provider {name} is a nested provider; [agent] host must name a root",
            )
        self.uuid = found["uuid"]
        return self.uuid

    def _refused(self, what, exc, refused):
        line = f"{what} of {self.opts.host} not updated: {exc.detail or exc} [{exc.code}]"
        refused.append(line)
        if line not in self._refusals:
            self._refusals.add(line)
            LOG.error("%s; the previous %s stay until this changes", line, what)

    def _sync_inventories(self, uuid, plan_, writes, refused):
        for _attempt in range(RETRIES):
            generation, have = self.client.get_inventories(uuid)
            want = wanted_inventories(plan_, have, self.opts)
            if _same_inventories(want, have):
                return
            for rc in set(want) - set(have):
                if rc.startswith("CUSTOM_"):
                    self.client.ensure_resource_class(rc)
            try:
                self.client.put_inventories(uuid, generation, want)
                writes.append("inventories")
                return
            except placement_client.Conflict as exc:
                if exc.code == "placement.inventory.inuse":
                    self._refused("inventories", exc, refused)
                    return
                if exc.code != "placement.concurrent_update":
                    raise
            except placement_client.BadRequest as exc:
                self._refused("inventories", exc, refused)
                return
        LOG.warning("inventories of %s: generation kept moving; next pass", self.opts.host)

    def _sync_traits(self, uuid, plan_, writes):
        for _attempt in range(RETRIES):
            generation, have = self.client.get_traits(uuid)
            want = wanted_traits(plan_, have)
            if want == sorted(have):
                return
            for name in set(want) - set(have):
                if name.startswith("CUSTOM_"):
                    self.client.ensure_trait(name)
            try:
                self.client.put_traits(uuid, generation, want)
                writes.append("traits")
                return
            except placement_client.Conflict as exc:
                if exc.code != "placement.concurrent_update":
                    raise
        LOG.warning("traits of %s: generation kept moving; next pass", self.opts.host)

    def _sync_node(self, uuid, plan_, writes):
        for _attempt in range(RETRIES):
            node = self.client.get_node(uuid)
            stored = node if node and node.get("generation") is not None else None
            cell, labels = wanted_node(plan_, stored)
            if stored is None or stored.get("cell") != cell or stored.get("labels") != labels:
                try:
                    self.client.put_node(
                        uuid,
                        cell=cell,
                        labels=labels,
                        reserved=bool(stored and stored.get("reserved")),
                        unschedulable=bool(stored and stored.get("unschedulable")),
                        generation=stored["generation"] if stored else None,
                    )
                    writes.append("node")
                except placement_client.Conflict as exc:
                    if exc.code != "placement.concurrent_update":
                        raise
                    continue
            if not _same_hardware(plan_.hardware, (node or {}).get("hardware")):
                self.client.put_hardware(uuid, plan_.hardware)
                writes.append("hardware")
            return
        LOG.warning("node record of %s: generation kept moving; next pass", self.opts.host)

    def register(self, plan_):
        """Make placement match ``plan_``; returns a Result.

        :raise PlacementError: placement failed (unreachable, refused us);
            the next pass tries again.
        """
        writes, refused = [], []
        uuid = self._provider(plan_.name, writes)
        self._sync_inventories(uuid, plan_, writes, refused)
        self._sync_traits(uuid, plan_, writes)
        self._sync_node(uuid, plan_, writes)
        if writes:
            LOG.info("registered %s (%s): wrote %s", plan_.name, uuid, ", ".join(writes))
        return Result(uuid, writes, refused)
