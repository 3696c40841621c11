"""Node power from a hardware record, and what a power cap does to work.

The model, per node (all figures in watts):

- platform: ``PLATFORM_WATTS`` (memory, fans, NICs, disks), always drawn;
- CPUs: ``sockets`` packages, each between an idle draw and its maximum
  (the package TDP); the dynamic range a job draws is its share of the
  node's cores times its utilisation;
- GPUs: ``gpu_count`` devices, each between an idle draw (per model,
  ``GPU_IDLE_WATTS``: the per-family figures of Joulie's simulator) and the
  maximum cap of the inventory (``gpu_max_cap_watts``); a job's GPUs draw
  ``idle + utilisation * (max - idle)`` each.

A cap below what a job would draw holds the draw at the cap and slows the
job: with ``d`` the dynamic power it wants over the dynamic power the cap
leaves, its speed is ``d ** -sensitivity`` (a compute-bound job,
sensitivity 1, runs at the speed of the power it gets; a memory-bound one,
0, is not slowed). GPU caps hold per device, so each GPU job is capped on
its own; CPU caps hold per package, so the CPU jobs of a node share the cap
and are slowed together. The caps are the ones the power controller writes
into the node's twin (eco: a percentage of the maximum; performance: the
maximum; draining: still performance), so the simulator never decides a cap
itself.

What a cap does not do: lower an idle device's draw. A package power limit
(RAPL, AMD's PPT) or a GPU board power limit is a ceiling the device's power
management enforces by lowering clocks and voltage under load; an idle
package or board already draws below any cap the controller writes (the
lowest, 40 % of TDP or the inventory's minimum GPU cap, is above every idle
figure here), so an idle eco node draws what an idle performance node does.
Joulie's simulator models it the same way (its GPU board model floors a
capped draw at the idle power, its CPU model is idle plus a dynamic part the
cap clamps), so its savings, like ours, come from work running against caps;
how much work that is depends on the load (``simulator.workload``: the
cluster is in service at the start, not empty). The platform's draw is in
IT energy (the nodes' wall power); Joulie counts only CPUs and GPUs as IT
power, so the report gives both.

The inventories give GPU cap ranges only; CPU package maxima come from
``CPU_TDP_WATTS`` (vendors' published TDPs), else from the core count, and
the simulator writes them into the hardware records as the CPU cap range so
that the controller caps CPU-only nodes by percentage like GPU nodes.
"""

import dataclasses

PLATFORM_WATTS = 150.0
CPU_IDLE_SHARE = 0.3  # a package at idle draws this share of its TDP
GPU_IDLE_SHARE = 0.12  # an unknown GPU at idle draws this share of its maximum cap

# Idle board power (watts per device) of the GPUs of the shipped inventories:
# the per-family idle draws of Joulie's standalone simulator (its exp02
# report, "Hardware models in simulator"), 13-17 % of the maximum cap. A
# power limit does not lower them: an idle board sits below any cap.
GPU_IDLE_WATTS = {
    "NVIDIA H100 NVL": 60.0,
    "NVIDIA H100 80GB HBM3": 120.0,
    "NVIDIA L40S": 60.0,
    "AMD Instinct MI300X": 100.0,
    "AMD Radeon PRO W7900": 40.0,
}
CPU_MIN_CAP_SHARE = 0.4  # the lowest package cap, as a share of TDP

# Package TDPs (watts per socket) of the CPUs of the shipped inventories.
CPU_TDP_WATTS = {
    "AMD EPYC 9654 96-Core Processor": 360.0,
    "AMD EPYC 9534 64-Core Processor": 280.0,
    "AMD EPYC 9965 192-Core Processor": 500.0,
    "AMD EPYC 9375F 32-Core Processor": 320.0,
    "AMD EPYC 9655 96-Core Processor": 400.0,
    "INTEL(R) XEON(R) GOLD 6530": 270.0,
}


def cpu_tdp(cpu_model, cores_per_socket):
    """Package TDP of ``cpu_model``; unknown models: 50 W plus 2.5 W per core."""
    known = CPU_TDP_WATTS.get((cpu_model or "").strip())
    if known is not None:
        return known
    return 50.0 + 2.5 * max(1, cores_per_socket)


def with_cpu_cap_range(hardware):
    """The hardware record with a CPU cap range when it has none (CPU-only nodes)."""
    if hardware.get("gpu_count") or hardware.get("cpu_max_cap_watts") is not None:
        return hardware
    sockets = hardware.get("cpu_sockets") or 1
    tdp = cpu_tdp(hardware.get("cpu_model"), (hardware.get("cpu_cores") or 1) // sockets)
    return {
        **hardware,
        "cpu_max_cap_watts": tdp,
        "cpu_min_cap_watts": round(tdp * CPU_MIN_CAP_SHARE, 3),
    }


@dataclasses.dataclass(frozen=True)
class NodeModel:
    """The constants of one node's power."""

    cores: int
    sockets: int
    cpu_tdp: float  # per package
    gpu_count: int
    gpu_max: float  # per device; 0 without GPUs
    gpu_idle: float = 0.0  # per device

    @classmethod
    def of(cls, hardware):
        sockets = hardware.get("cpu_sockets") or 1
        cores = hardware.get("cpu_cores") or 1
        tdp = hardware.get("cpu_max_cap_watts") or cpu_tdp(
            hardware.get("cpu_model"), cores // sockets
        )
        gpus = hardware.get("gpu_count") or 0
        gpu_max = float(hardware.get("gpu_max_cap_watts") or (300.0 if gpus else 0.0))
        gpu_idle = GPU_IDLE_WATTS.get((hardware.get("gpu_model") or "").strip())
        if gpu_idle is None:
            gpu_idle = gpu_max * GPU_IDLE_SHARE
        return cls(cores, sockets, float(tdp), gpus, gpu_max, min(gpu_idle, gpu_max))

    @property
    def cpu_idle(self):
        return self.sockets * self.cpu_tdp * CPU_IDLE_SHARE

    @property
    def cpu_dynamic(self):
        """The node's CPU dynamic range, all packages."""
        return self.sockets * self.cpu_tdp * (1 - CPU_IDLE_SHARE)

    @property
    def idle_watts(self):
        return PLATFORM_WATTS + self.cpu_idle + self.gpu_count * self.gpu_idle

    @property
    def max_watts(self):
        return PLATFORM_WATTS + self.sockets * self.cpu_tdp + self.gpu_count * self.gpu_max


@dataclasses.dataclass(frozen=True)
class Load:
    """One running instance as the power model sees it."""

    vcpus: int
    gpus: int
    utilisation: float
    sensitivity: float


def speed_under_cap(wanted_dynamic, allowed_dynamic, sensitivity):
    """Work per second relative to uncapped (1.0 when the cap does not bind)."""
    if wanted_dynamic <= allowed_dynamic or wanted_dynamic <= 0:
        return 1.0
    if allowed_dynamic <= 0:
        allowed_dynamic = 1e-9
    return (wanted_dynamic / allowed_dynamic) ** -sensitivity


def node_state(model, loads, cpu_cap=None, gpu_cap=None):
    """(watts, [speed of each load]) of a node running ``loads`` under its caps.

    :param cpu_cap: watts per package, None for uncapped.
    :param gpu_cap: watts per GPU, None for uncapped.
    """
    watts = PLATFORM_WATTS + model.cpu_idle
    speeds = [1.0] * len(loads)
    # CPU: every load draws its share of the cores; a package cap binds all.
    cpu_wanted = (
        sum(min(1.0, ld.vcpus / model.cores) * ld.utilisation for ld in loads) * model.cpu_dynamic
    )
    cpu_allowed = cpu_wanted
    if cpu_cap is not None and model.gpu_count == 0:
        cpu_allowed = max(
            0.0, model.sockets * (min(cpu_cap, model.cpu_tdp) - model.cpu_tdp * CPU_IDLE_SHARE)
        )
    watts += min(cpu_wanted, cpu_allowed)
    if cpu_wanted > cpu_allowed:
        for i, ld in enumerate(loads):
            if ld.gpus == 0:
                speeds[i] = speed_under_cap(cpu_wanted, cpu_allowed, ld.sensitivity)
    # GPUs: each device on its own; unused ones idle.
    busy = 0
    gpu_idle = model.gpu_idle
    limit = model.gpu_max if gpu_cap is None else min(gpu_cap, model.gpu_max)
    for i, ld in enumerate(loads):
        if not ld.gpus:
            continue
        gpus = min(ld.gpus, model.gpu_count - busy)
        busy += gpus
        wanted = ld.utilisation * (model.gpu_max - gpu_idle)
        allowed = max(0.0, limit - gpu_idle)
        watts += gpus * (gpu_idle + min(wanted, allowed))
        speeds[i] = min(speeds[i], speed_under_cap(wanted, allowed, ld.sensitivity))
    watts += max(0, model.gpu_count - busy) * gpu_idle
    return watts, speeds
