"""Cluster inventories in the YAML format of Joulie's exp02 cluster data.

Two such files ship in ``powerpolicy/data/`` (41 and 5,000 nodes). The format:

::

    nodes:
      - node_name_prefix: kwok-h100-nvl
        replicas: 12
        vendor: nvidia            # GPU vendor, "none" on CPU-only nodes
        product: NVIDIA H100 NVL  # GPU model, "" on CPU-only nodes
        cpu: AMD EPYC 9654 96-Core Processor
        cpu_sockets: 2
        cpu_cores: 192
        memory_gib: 1536
        gpu_count: 8
        gpu_min_cap_watts: 200
        gpu_max_cap_watts: 400

Replica i of an entry is the node ``<node_name_prefix>-<i>``, i from 0. Each
node becomes a hardware record in the shape of ``PUT /nodes/{uuid}/hardware``.
"""

import dataclasses

import yaml

from joule import vocabulary

_INT_FIELDS = ("cpu_sockets", "cpu_cores", "memory_gib")
_CAP_FIELDS = ("gpu_min_cap_watts", "gpu_max_cap_watts", "cpu_min_cap_watts", "cpu_max_cap_watts")


class InventoryError(ValueError):
    """The inventory file cannot be used; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class InventoryNode:
    name: str
    hardware: dict  # the body of PUT /nodes/{uuid}/hardware

    @property
    def family(self):
        hw = self.hardware
        return vocabulary.family_key(hw["gpu_count"], hw["gpu_model"], hw["cpu_model"])


def load(path):
    """The nodes of the inventory at ``path``, in file order."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise InventoryError(f"inventory {path} is not valid YAML: {exc}") from exc
    return parse(data, source=str(path))


def parse(data, source="inventory"):
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise InventoryError(f"{source}: expected a mapping with a 'nodes' list")
    out = []
    seen = set()
    for index, entry in enumerate(data["nodes"]):
        where = f"{source}: nodes[{index}]"
        if not isinstance(entry, dict):
            raise InventoryError(f"{where}: expected a mapping")
        prefix = entry.get("node_name_prefix")
        if not isinstance(prefix, str) or not prefix:
            raise InventoryError(f"{where}: node_name_prefix must be a non-empty string")
        replicas = _int(entry, "replicas", where, default=1)
        hardware = _hardware(entry, where)
        for i in range(replicas):
            name = f"{prefix}-{i}"
            if name in seen:
                raise InventoryError(f"{where}: node name {name} appears twice")
            seen.add(name)
            out.append(InventoryNode(name, hardware))
    return out


def _int(entry, key, where, default=None):
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InventoryError(f"{where}: {key} must be a non-negative integer, got {value!r}")
    return value


def _hardware(entry, where):
    gpu_count = _int(entry, "gpu_count", where, default=0)
    product = entry.get("product") or None
    vendor = entry.get("vendor")
    if vendor in (None, "", "none"):
        vendor = None
    cpu = entry.get("cpu")
    if cpu is not None and not isinstance(cpu, str):
        raise InventoryError(f"{where}: cpu must be a string")
    if gpu_count > 0 and not product:
        raise InventoryError(f"{where}: gpu_count is {gpu_count} but product (GPU model) is empty")
    hw = {
        "cpu_model": cpu,
        "gpu_vendor": vendor,
        "gpu_model": str(product) if product else None,
        "gpu_count": gpu_count,
    }
    for key in _INT_FIELDS:
        hw[key] = _int(entry, key, where) if key in entry else None
    for key in _CAP_FIELDS:
        value = entry.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value < 0
        ):
            raise InventoryError(f"{where}: {key} must be a non-negative number")
        hw[key] = float(value) if value is not None else None
    return hw
