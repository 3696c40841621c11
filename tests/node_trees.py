"""Fake /proc and /sys trees of four kinds of node, for node-agent's tests.

* ``intel``: two Xeon packages with RAPL package zones that can be capped
  (``constraint_0_power_limit_uw`` and its max; min on request), core and
  dram sub-zones, and intel_pstate cpufreq;
* ``amd``: one EPYC package whose RAPL zones (the intel-rapl powercap names
  the kernel gives AMD: ``intel-rapl:0`` named ``package-0``, sub-zone
  ``core``) only count energy, with cpufreq;
* ``cpufreq``: an aarch64 node with cpufreq and no powercap at all;
* ``bare``: a virtual machine with neither.

``write(kind, root)`` writes ``root/proc`` and ``root/sys`` and returns
``(procfs_root, sysfs_root)``. ``FakeNvml`` stands for pynvml.
"""

import os

INTEL_MODEL = "Intel(R) Xeon(R) Gold 6530"
AMD_MODEL = "AMD EPYC 9354P 32-Core Processor"
INTEL_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx "
    "fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma "
    "cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm "
    "bmi1 avx2 bmi2 erms rtm avx512f avx512dq avx512cd avx512bw avx512vl sha_ni vaes "
    "vpclmulqdq avx512_vnni amx_tile amx_bf16 amx_int8 vmx"
)
AMD_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx "
    "fxsr sse sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 "
    "sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand lahf_lm svm sse4a abm bmi1 avx2 "
    "bmi2 sha_ni avx512f avx512dq avx512bw avx512vl vaes gfni"
)
BARE_FLAGS = "fpu sse sse2 ht pni ssse3 sse4_1 sse4_2 avx avx2 hypervisor"
ARM_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid"

# Per package, microwatts.
INTEL_MAX_UW = 270_000_000
INTEL_MIN_UW = 90_000_000
INTEL_MEM_KB = 512 * 1024 * 1024  # 512 GiB
AMD_MEM_KB = 256 * 1024 * 1024
ARM_MEM_KB = 128 * 1024 * 1024
BARE_MEM_KB = 8 * 1024 * 1024
ENERGY_RANGE_UJ = 262_143_328_850


def _put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


def _x86_cpuinfo(model, vendor, sockets, cores, threads, flags):
    blocks = []
    n = 0
    for socket in range(sockets):
        for _thread in range(threads):
            for core in range(cores):
                blocks.append(
                    "\n".join(
                        [
                            f"processor\t: {n}",
                            f"vendor_id\t: {vendor}",
                            f"model name\t: {model}",
                            f"physical id\t: {socket}",
                            f"siblings\t: {cores * threads}",
                            f"core id\t\t: {core}",
                            f"cpu cores\t: {cores}",
                            f"flags\t\t: {flags}",
                        ]
                    )
                )
                n += 1
    return "\n\n".join(blocks) + "\n"


def _arm_cpuinfo(cpus, model=None):
    named = [f"model name\t: {model}"] if model else []
    blocks = [
        "\n".join(
            [
                f"processor\t: {n}",
                *named,
                "BogoMIPS\t: 50.00",
                f"Features\t: {ARM_FEATURES}",
                "CPU implementer\t: 0x41",
                "CPU architecture: 8",
                "CPU part\t: 0xd0c",
            ]
        )
        for n in range(cpus)
    ]
    return "\n\n".join(blocks) + "\n"


def _meminfo(kb):
    return f"MemTotal:       {kb} kB\nMemFree:        {kb // 2} kB\n"


def _cpufreq(sys_root, cpus, low, high):
    for cpu in range(cpus):
        base = os.path.join(sys_root, "devices", "system", "cpu", f"cpu{cpu}", "cpufreq")
        _put(os.path.join(base, "cpuinfo_min_freq"), str(low))
        _put(os.path.join(base, "cpuinfo_max_freq"), str(high))
        _put(os.path.join(base, "scaling_max_freq"), str(high))


def _zone(sys_root, zone, name, energy, limit=None, max_uw=None, min_uw=None):
    base = os.path.join(sys_root, "class", "powercap", zone)
    _put(os.path.join(base, "name"), name)
    _put(os.path.join(base, "energy_uj"), str(energy))
    _put(os.path.join(base, "max_energy_range_uj"), str(ENERGY_RANGE_UJ))
    if limit is not None:
        _put(os.path.join(base, "constraint_0_name"), "long_term")
        _put(os.path.join(base, "constraint_0_power_limit_uw"), str(limit))
        _put(os.path.join(base, "constraint_0_time_window_us"), "999424")
    if max_uw is not None:
        _put(os.path.join(base, "constraint_0_max_power_uw"), str(max_uw))
    if min_uw is not None:
        _put(os.path.join(base, "constraint_0_min_power_uw"), str(min_uw))


def write(kind, root, with_min=False, model=None):
    """Write a tree of ``kind`` under ``root``; return (procfs_root, sysfs_root).

    ``model``: the CPU model name instead of the kind's own (several kinds in
    one hardware family).
    """
    proc, sys_ = os.path.join(str(root), "proc"), os.path.join(str(root), "sys")
    if kind == "intel":
        _put(
            os.path.join(proc, "cpuinfo"),
            _x86_cpuinfo(model or INTEL_MODEL, "GenuineIntel", 2, 4, 2, INTEL_FLAGS),
        )
        _put(os.path.join(proc, "meminfo"), _meminfo(INTEL_MEM_KB))
        for pkg in range(2):
            _zone(
                sys_,
                f"intel-rapl:{pkg}",
                f"package-{pkg}",
                1_000_000 * (pkg + 1),
                limit=INTEL_MAX_UW,
                max_uw=INTEL_MAX_UW,
                min_uw=INTEL_MIN_UW if with_min else None,
            )
            _zone(sys_, f"intel-rapl:{pkg}:0", "core", 500_000)
            _zone(sys_, f"intel-rapl:{pkg}:1", "dram", 200_000, limit=0, max_uw=0)
        _cpufreq(sys_, 16, 800_000, 3_700_000)
    elif kind == "amd":
        _put(
            os.path.join(proc, "cpuinfo"),
            _x86_cpuinfo(model or AMD_MODEL, "AuthenticAMD", 1, 8, 2, AMD_FLAGS),
        )
        _put(os.path.join(proc, "meminfo"), _meminfo(AMD_MEM_KB))
        _zone(sys_, "intel-rapl:0", "package-0", 5_000_000)
        _zone(sys_, "intel-rapl:0:0", "core", 3_000_000)
        _cpufreq(sys_, 16, 1_500_000, 3_800_000)
    elif kind == "cpufreq":
        _put(os.path.join(proc, "cpuinfo"), _arm_cpuinfo(8, model))
        _put(os.path.join(proc, "meminfo"), _meminfo(ARM_MEM_KB))
        _cpufreq(sys_, 8, 1_000_000, 3_000_000)
    elif kind == "bare":
        _put(
            os.path.join(proc, "cpuinfo"),
            _x86_cpuinfo(
                model or "Intel(R) Xeon(R) Processor", "GenuineIntel", 1, 4, 1, BARE_FLAGS
            ),
        )
        _put(os.path.join(proc, "meminfo"), _meminfo(BARE_MEM_KB))
        os.makedirs(os.path.join(sys_, "devices", "system", "cpu", "cpu0"), exist_ok=True)
    else:
        raise ValueError(kind)
    return proc, sys_


def read(path):
    with open(path) as fh:
        return fh.read().strip()


def rapl_limit(sys_root, pkg):
    return int(read(os.path.join(sys_root, "class", "powercap", f"intel-rapl:{pkg}", _LIMIT)))


def add_energy(sys_root, zone, microjoules):
    path = os.path.join(sys_root, "class", "powercap", zone, "energy_uj")
    value = int(read(path)) + microjoules
    _put(path, str(value % ENERGY_RANGE_UJ))


def scaling_max(sys_root, cpu):
    return int(
        read(os.path.join(sys_root, "devices", "system", "cpu", f"cpu{cpu}", "cpufreq", _SMF))
    )


_LIMIT = "constraint_0_power_limit_uw"
_SMF = "scaling_max_freq"


class NvmlError(Exception):
    pass


class FakeNvml:
    """The part of pynvml node-agent uses, over ``gpus``: dicts with name, uuid,
    min_mw, max_mw, limit_mw, default_mw, usage_mw."""

    def __init__(self, gpus, deny=False, broken=False):
        self.gpus = gpus
        self.deny = deny
        self.broken = broken
        self.sets = []

    def nvmlInit(self):
        if self.broken:
            raise NvmlError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, h):
        return self.gpus[h]["name"]

    def nvmlDeviceGetUUID(self, h):
        return self.gpus[h]["uuid"]

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        return self.gpus[h]["min_mw"], self.gpus[h]["max_mw"]

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self.gpus[h]["limit_mw"]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self.gpus[h]["default_mw"]

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        if self.deny:
            raise NvmlError("Insufficient Permissions")
        self.sets.append((h, mw))
        self.gpus[h]["limit_mw"] = mw

    def nvmlDeviceGetPowerUsage(self, h):
        return self.gpus[h]["usage_mw"]


def h100s(count=4):
    return [
        {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": f"GPU-0000000{i}-aaaa-bbbb-cccc-000000000000",
            "min_mw": 200_000,
            "max_mw": 700_000,
            "limit_mw": 700_000,
            "default_mw": 700_000,
            "usage_mw": 350_000 + i * 1000,
        }
        for i in range(count)
    ]
