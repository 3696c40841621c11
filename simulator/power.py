"""Node power from a hardware record, and what a power cap does to work.

The model, per node (all figures in watts):

- host: the node without its GPUs (CPU packages, memory, fans, NICs,
  disks, power-supply losses) follows a measured wall-power curve of a
  two-socket server of its CPU model against CPU load, 0-100 % in steps of
  10 % (``HOST_CURVES``: SPECpower_ssj2008 results, the figures Joulie's
  simulator uses, ``simulator/catalog/hardware.yaml`` of joulie-k8s/Joulie);
  a CPU model without a measured curve takes the curve Joulie names as its
  proxy (``HOST_PROXIES``), scaled by package TDP and socket count. The CPU
  load is each job's share of the node's cores times its utilisation.
- GPUs: ``gpu_count`` devices, each between an idle draw (per model,
  ``GPU_IDLE_WATTS``: the per-family figures of Joulie's simulator) and the
  maximum cap of the inventory (``gpu_max_cap_watts``); a job's GPUs draw
  ``idle + utilisation * (max - idle)`` each.

IT power is the sum of the two, as in Joulie's simulator (its node power is
its CPU curve plus its GPU boards). A measured curve is the server's wall
power, so there is no separate platform draw: until this model followed
Joulie's curves it added a guessed 150 W platform to packages idling at 30 %
of TDP (366 W for an idle EPYC 9654 server where SPECpower measures 128 W),
see docs/decisions.md, "The simulator's host power is measured".

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

A CPU cap is a package power limit (RAPL, AMD's PPT): it holds the packages'
draw, not the server's. The curve's rise above its idle point is counted as
package power and the measured idle as the rest of the server, so the
sockets' caps together bound that rise (an idle package in its deepest
C-state draws little, so this lets the cap bind a little later than it
does, never earlier: it does not overstate what a cap saves).

What a cap does not do: lower an idle device's draw. A package power limit
or a GPU board power limit is a ceiling the device's power management
enforces by lowering clocks and voltage under load; an idle package or
board already draws below any cap the controller writes, so an idle eco
node draws what an idle performance node does. Joulie's agent enforces a
CPU cap the same way (RAPL first; its DVFS fallback throttles only while the
measured package power is above the cap), and its simulator's GPU board
model floors a capped draw at the idle power. (Joulie's standalone
simulator instead runs every eco node at a fixed 60 % CPU frequency, which
lowers the host's draw at any load; that is not what its agent does, so we
do not copy it: docs/decisions.md.)

The inventories give GPU cap ranges only; CPU package maxima come from
``CPU_TDP_WATTS`` (vendors' published TDPs), else from the core count, and
the simulator writes them into the hardware records as the CPU cap range so
that the controller caps CPU-only nodes by percentage like GPU nodes.
"""

import dataclasses

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

# Wall power (watts) of a two-socket server of the CPU model at 0, 10, ...,
# 100 % load: SPECpower_ssj2008 results, as Joulie's hardware catalog
# records them. A server, not a package: memory, fans, disks and power
# supply losses are in it.
HOST_CURVES = {
    "AMD EPYC 9654 96-Core Processor": (128, 257, 300, 340, 378, 410, 442, 498, 577, 697, 817),
    "AMD EPYC 9655 96-Core Processor": (138, 297, 367, 438, 515, 593, 661, 710, 771, 812, 861),
    "AMD EPYC 9965 192-Core Processor": (157, 265, 314, 362, 412, 461, 503, 544, 587, 661, 800),
}
# Models without a measured curve take the one Joulie's catalog names as
# their proxy (the same generation and platform), scaled by TDP. Joulie's
# proxy for the Xeon Gold 6530 is a generic Xeon of its generation with no
# curve in the catalog; the EPYC 9654's stands in for it, as for any CPU
# model we do not know.
HOST_PROXIES = {
    "AMD EPYC 9534 64-Core Processor": "AMD EPYC 9654 96-Core Processor",
    "AMD EPYC 9375F 32-Core Processor": "AMD EPYC 9655 96-Core Processor",
}
DEFAULT_HOST_CURVE = "AMD EPYC 9654 96-Core Processor"


def cpu_tdp(cpu_model, cores_per_socket):
    """Package TDP of ``cpu_model``; unknown models: 50 W plus 2.5 W per core."""
    known = CPU_TDP_WATTS.get((cpu_model or "").strip())
    if known is not None:
        return known
    return 50.0 + 2.5 * max(1, cores_per_socket)


def host_curve(cpu_model, sockets, tdp):
    """The host's wall power at 0, 10, ..., 100 % CPU load (11 watts figures)."""
    model = (cpu_model or "").strip()
    if model in HOST_CURVES:
        source = model
    else:
        source = HOST_PROXIES.get(model, DEFAULT_HOST_CURVE)
    # A measured curve is of two sockets at its model's TDP; another model
    # or socket count draws in proportion to its total TDP.
    scale = (sockets * tdp) / (2 * CPU_TDP_WATTS[source])
    return tuple(w * scale for w in HOST_CURVES[source])


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
    host: tuple = (0.0,) * 11  # wall power of the host at 0, 10, ..., 100 % CPU load

    @classmethod
    def of(cls, hardware):
        sockets = hardware.get("cpu_sockets") or 1
        cores = hardware.get("cpu_cores") or 1
        model = hardware.get("cpu_model")
        tdp = float(hardware.get("cpu_max_cap_watts") or cpu_tdp(model, cores // sockets))
        gpus = hardware.get("gpu_count") or 0
        gpu_max = float(hardware.get("gpu_max_cap_watts") or (300.0 if gpus else 0.0))
        gpu_idle = GPU_IDLE_WATTS.get((hardware.get("gpu_model") or "").strip())
        if gpu_idle is None:
            gpu_idle = gpu_max * GPU_IDLE_SHARE
        return cls(
            cores,
            sockets,
            tdp,
            gpus,
            gpu_max,
            min(gpu_idle, gpu_max),
            host_curve(model, sockets, tdp),
        )

    def host_watts(self, load):
        """The host's wall power at CPU ``load`` (0-1), linear between the curve's points."""
        x = min(1.0, max(0.0, load)) * 10
        i = min(9, int(x))
        return self.host[i] + (x - i) * (self.host[i + 1] - self.host[i])

    @property
    def idle_watts(self):
        return self.host[0] + self.gpu_count * self.gpu_idle

    @property
    def max_watts(self):
        return self.host[-1] + self.gpu_count * self.gpu_max


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
    speeds = [1.0] * len(loads)
    # CPU: every load draws its share of the cores; the packages' caps bind
    # all of them together, on the curve's rise above idle (module doc).
    load = sum(min(1.0, ld.vcpus / model.cores) * ld.utilisation for ld in loads)
    watts = model.host_watts(load)
    if cpu_cap is not None and model.gpu_count == 0:
        cpu_wanted = watts - model.host[0]
        cpu_allowed = model.sockets * min(cpu_cap, model.cpu_tdp)
        if cpu_wanted > cpu_allowed:
            watts = model.host[0] + cpu_allowed
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
