"""What the node is: CPUs, memory, power-capping interfaces and GPUs.

Every path is read under a root (``[agent] procfs_root``, ``sysfs_root``),
so tests point the agent at a tree they wrote. Nothing here writes.

* ``/proc/cpuinfo``: model, vendor, sockets (distinct ``physical id``),
  physical cores (distinct ``physical id``/``core id`` pairs), threads (one
  ``processor`` block each), flags.
* ``/proc/meminfo``: ``MemTotal``.
* ``/sys/class/powercap/intel-rapl:N``: the package domains (a zone name
  ``package-N``; sub-zones ``intel-rapl:N:M`` are core/uncore/dram and are
  not capped). Intel exposes ``constraint_0_power_limit_uw`` (the long-term
  limit, PL1) with ``constraint_0_max_power_uw`` and sometimes
  ``constraint_0_min_power_uw``. AMD (Zen, the same intel_rapl_msr driver)
  exposes the same zones with ``energy_uj`` only and no constraint files: its
  power is measured, and capped through cpufreq.
* ``/sys/devices/system/cpu/cpuN/cpufreq``: ``cpuinfo_min_freq``,
  ``cpuinfo_max_freq``, ``scaling_max_freq`` (kHz).
* GPUs through NVML (``pynvml`` from ``nvidia-ml-py``, optional): a node
  without the library, the driver or GPUs reports none and says why.
"""

import dataclasses
import glob
import logging
import os

try:
    import pynvml
except ImportError:  # optional: nodes without NVIDIA GPUs need not install it
    pynvml = None

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Cpu:
    model: str
    vendor: str
    sockets: int
    cores: int
    threads: int
    flags: frozenset
    arch: str = "x86"  # "x86" (a flags line) or "aarch64" (a Features line)


@dataclasses.dataclass(frozen=True)
class RaplDomain:
    """One package zone of the powercap tree (limits in microwatts)."""

    zone: str  # directory name, e.g. intel-rapl:0
    name: str  # the zone's name file, e.g. package-0
    path: str
    limit_uw: int | None  # constraint_0_power_limit_uw (None: cannot be capped)
    max_uw: int | None
    min_uw: int | None
    has_energy: bool
    max_energy_range_uj: int | None

    @property
    def cappable(self):
        return self.limit_uw is not None


@dataclasses.dataclass(frozen=True)
class CpuFreq:
    """One CPU's frequency range (kHz) and where its cap is written."""

    cpu: int
    path: str
    min_khz: int
    max_khz: int
    scaling_max_khz: int


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    min_limit_w: float | None
    max_limit_w: float | None
    limit_w: float | None


@dataclasses.dataclass(frozen=True)
class Node:
    cpu: Cpu
    memory_mb: int
    rapl: tuple  # RaplDomain of the packages, by zone
    cpufreq: tuple  # CpuFreq, by cpu
    gpus: tuple  # Gpu, by index
    gpu_note: str  # why there are none (empty when there are)

    @property
    def rapl_cappable(self):
        return tuple(d for d in self.rapl if d.cappable)

    @property
    def gpu_vendor(self):
        return "nvidia" if self.gpus else None

    @property
    def gpu_model(self):
        return self.gpus[0].name if self.gpus else None

    def cpu_cap_range(self, nominal_watts=None):
        """(min, max) node CPU cap in watts, or (None, None) when unknown.

        RAPL: the sum over the packages that can be capped (a cap is split
        evenly over them); a minimum only when every package states one.
        cpufreq only: the operator's nominal CPU power at full frequency
        (``[agent] cpu_nominal_watts``), scaled down to the lowest frequency.
        """
        cappable = self.rapl_cappable
        if cappable:
            if any(d.max_uw is None for d in cappable):
                return None, None
            high = sum(d.max_uw for d in cappable) / 1e6
            low = (
                sum(d.min_uw for d in cappable) / 1e6
                if all(d.min_uw is not None for d in cappable)
                else None
            )
            return low, high
        if self.cpufreq and nominal_watts:
            ratio = min(c.min_khz / c.max_khz for c in self.cpufreq if c.max_khz)
            return round(nominal_watts * ratio, 3), float(nominal_watts)
        return None, None

    def gpu_cap_range(self):
        """(min, max) per-GPU cap in watts over all GPUs, or (None, None)."""
        lows = [g.min_limit_w for g in self.gpus]
        highs = [g.max_limit_w for g in self.gpus]
        if not self.gpus or None in lows or None in highs:
            return None, None
        return max(lows), min(highs)


class DiscoveryError(Exception):
    """The node cannot be described (no CPU or memory information)."""


def _read(path):
    with open(path) as fh:
        return fh.read().strip()


def _read_int(path):
    """The integer in ``path``; None when the file is missing or unreadable."""
    try:
        return int(_read(path))
    except (OSError, ValueError):
        return None


def _positive(value):
    """A stated maximum; 0 (what some firmware reports) states none: taken as
    a maximum, uncapping would write a 0 W limit and every cap would be out of
    range."""
    return value if value is not None and value > 0 else None


# -- /proc ---------------------------------------------------------------------


def read_cpu(procfs_root):
    path = os.path.join(procfs_root, "cpuinfo")
    try:
        text = _read(path)
    except OSError as exc:
        raise DiscoveryError(f"cannot read {path}: {exc.strerror or exc}") from None
    blocks = []
    for chunk in text.split("\n\n"):
        fields = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if "processor" in fields:
            blocks.append(fields)
    if not blocks:
        raise DiscoveryError(f"{path} lists no processor")
    first = blocks[0]
    model = first.get("model name") or first.get("Model") or first.get("cpu model")
    if not model and "CPU implementer" in first:
        # aarch64 names no model: implementer and part identify it.
        model = f"ARM {first['CPU implementer']}:{first.get('CPU part', '?')}"
    model = model or "unknown"
    vendor = first.get("vendor_id") or first.get("CPU implementer") or "unknown"
    sockets = {b.get("physical id", "0") for b in blocks}
    cores = {(b.get("physical id", "0"), b.get("core id", b["processor"])) for b in blocks}
    flags = frozenset((first.get("flags") or first.get("Features") or "").split())
    arch = "x86" if "flags" in first else ("aarch64" if "Features" in first else "unknown")
    return Cpu(
        model=" ".join(model.split()),
        vendor=vendor,
        sockets=len(sockets),
        cores=len(cores),
        threads=len(blocks),
        flags=flags,
        arch=arch,
    )


def read_memory_mb(procfs_root):
    path = os.path.join(procfs_root, "meminfo")
    try:
        text = _read(path)
    except OSError as exc:
        raise DiscoveryError(f"cannot read {path}: {exc.strerror or exc}") from None
    for line in text.splitlines():
        key, _sep, value = line.partition(":")
        if key.strip() == "MemTotal":
            amount = value.split()
            if amount and amount[0].isdigit():
                return int(amount[0]) // 1024  # kB -> MiB
    raise DiscoveryError(f"{path} has no MemTotal line")


# -- /sys ----------------------------------------------------------------------


def powercap_dir(sysfs_root):
    return os.path.join(sysfs_root, "class", "powercap")


def read_rapl(sysfs_root):
    """The package zones (``intel-rapl:N``), sorted by zone number."""
    out = []
    for path in glob.glob(os.path.join(powercap_dir(sysfs_root), "intel-rapl:*")):
        zone = os.path.basename(path)
        if zone.count(":") != 1:
            continue  # a sub-zone (core, uncore, dram)
        try:
            name = _read(os.path.join(path, "name"))
        except OSError:
            continue
        if not name.startswith("package"):
            continue  # psys and others are not package power
        out.append(
            RaplDomain(
                zone=zone,
                name=name,
                path=path,
                limit_uw=_read_int(os.path.join(path, "constraint_0_power_limit_uw")),
                max_uw=_positive(_read_int(os.path.join(path, "constraint_0_max_power_uw"))),
                min_uw=_read_int(os.path.join(path, "constraint_0_min_power_uw")),
                has_energy=_read_int(os.path.join(path, "energy_uj")) is not None,
                max_energy_range_uj=_read_int(os.path.join(path, "max_energy_range_uj")),
            )
        )
    return tuple(sorted(out, key=lambda d: int(d.zone.split(":")[1])))


def read_cpufreq(sysfs_root):
    out = []
    pattern = os.path.join(sysfs_root, "devices", "system", "cpu", "cpu[0-9]*", "cpufreq")
    for path in glob.glob(pattern):
        cpu = os.path.basename(os.path.dirname(path))[3:]
        low = _read_int(os.path.join(path, "cpuinfo_min_freq"))
        high = _read_int(os.path.join(path, "cpuinfo_max_freq"))
        current = _read_int(os.path.join(path, "scaling_max_freq"))
        if not cpu.isdigit() or None in (low, high, current) or high <= 0:
            continue
        out.append(CpuFreq(int(cpu), path, low, high, current))
    return tuple(sorted(out, key=lambda c: c.cpu))


# -- GPUs ------------------------------------------------------------------------


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def read_gpus(nvml=None):
    """(GPUs, note): the NVIDIA GPUs NVML sees, or none and why.

    ``nvml`` is the pynvml module (tests pass a fake one).
    """
    nvml = pynvml if nvml is None else nvml
    if nvml is None:
        return (), "no GPU: NVML library not installed (pip install nvidia-ml-py)"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded ...
        return (), f"no GPU: NVML unavailable ({exc})"
    try:
        count = nvml.nvmlDeviceGetCount()
        gpus = []
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            try:
                low, high = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
                low_w, high_w = low / 1000.0, high / 1000.0
            except Exception:
                low_w = high_w = None
            try:
                limit_w = nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0
            except Exception:
                limit_w = None
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    min_limit_w=low_w,
                    max_limit_w=high_w,
                    limit_w=limit_w,
                )
            )
    except Exception as exc:
        return (), f"no GPU: NVML failed ({exc})"
    if not gpus:
        return (), "no GPU: NVML reports no device"
    return tuple(gpus), ""


def discover(procfs_root="/proc", sysfs_root="/sys", nvml=None):
    """The whole node; :raise DiscoveryError: no CPU or memory information."""
    gpus, note = read_gpus(nvml)
    return Node(
        cpu=read_cpu(procfs_root),
        memory_mb=read_memory_mb(procfs_root),
        rapl=read_rapl(sysfs_root),
        cpufreq=read_cpufreq(sysfs_root),
        gpus=gpus,
        gpu_note=note,
    )


def describe(node, nominal_watts=None):
    """Lines a person reads (``--dry-run``)."""
    cpu = node.cpu
    lines = [
        f"CPU: {cpu.model} ({cpu.vendor}): {cpu.sockets} socket(s), {cpu.cores} core(s), "
        f"{cpu.threads} thread(s), {len(cpu.flags)} flags",
        f"memory: {node.memory_mb} MiB",
    ]
    if node.rapl:
        for d in node.rapl:
            if d.cappable:
                rng = (
                    f"limit {d.limit_uw / 1e6:g} W, max "
                    f"{'?' if d.max_uw is None else f'{d.max_uw / 1e6:g}'} W, min "
                    f"{'?' if d.min_uw is None else f'{d.min_uw / 1e6:g}'} W"
                )
            else:
                rng = "no power limit (energy only)"
            lines.append(f"RAPL {d.zone} {d.name}: {rng}")
    else:
        lines.append("no RAPL: no powercap package zone under /sys/class/powercap")
    if node.cpufreq:
        c = node.cpufreq[0]
        lines.append(
            f"cpufreq: {len(node.cpufreq)} CPU(s), {c.min_khz}-{c.max_khz} kHz, "
            f"scaling_max_freq {c.scaling_max_khz} kHz"
        )
    else:
        lines.append("no cpufreq: no cpuN/cpufreq directory")
    low, high = node.cpu_cap_range(nominal_watts)
    if high is None:
        if node.rapl_cappable:
            why = "RAPL limits without constraint_0_max_power_uw"
        elif node.cpufreq:
            why = "cpufreq only and [agent] cpu_nominal_watts unset"
        else:
            why = "no RAPL power limit and no cpufreq"
        lines.append(f"CPU caps: unsupported ({why})")
    else:
        lines.append(f"CPU caps: {'?' if low is None else f'{low:g}'}-{high:g} W per node")
    if node.gpus:
        for g in node.gpus:
            lines.append(
                f"GPU {g.index}: {g.name} {g.uuid}, limit {g.limit_w} W "
                f"(range {g.min_limit_w}-{g.max_limit_w} W)"
            )
    else:
        lines.append(node.gpu_note)
    return lines
