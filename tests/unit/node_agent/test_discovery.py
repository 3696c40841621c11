"""Discovery and CPU traits on the four fake trees (tests/node_trees.py)."""

import os_traits
import pytest

from node_agent import discovery
from node_agent import traits
from tests import node_trees


@pytest.fixture
def tree(tmp_path):
    def make(kind, **kw):
        return node_trees.write(kind, tmp_path, **kw)

    return make


def test_intel_two_packages(tree):
    proc, sys_ = tree("intel", with_min=True)
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    cpu = node.cpu
    assert (cpu.model, cpu.vendor) == (node_trees.INTEL_MODEL, "GenuineIntel")
    assert (cpu.sockets, cpu.cores, cpu.threads) == (2, 8, 16)
    assert node.memory_mb == 512 * 1024
    # Package zones only; core and dram sub-zones are not package power.
    assert [(d.zone, d.name) for d in node.rapl] == [
        ("intel-rapl:0", "package-0"),
        ("intel-rapl:1", "package-1"),
    ]
    assert all(d.cappable and d.has_energy for d in node.rapl)
    assert node.cpu_cap_range() == (180.0, 540.0)
    assert len(node.cpufreq) == 16 and node.cpufreq[0].max_khz == 3_700_000
    assert node.gpus == () and "no device" in node.gpu_note


def test_intel_without_a_minimum_has_an_open_lower_bound(tree):
    proc, sys_ = tree("intel")
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    assert node.cpu_cap_range() == (None, 540.0)


def test_amd_rapl_counts_energy_but_cannot_be_capped(tree):
    proc, sys_ = tree("amd")
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    assert node.cpu.vendor == "AuthenticAMD"
    assert (node.cpu.sockets, node.cpu.cores, node.cpu.threads) == (1, 8, 16)
    (pkg,) = node.rapl
    assert (pkg.name, pkg.has_energy, pkg.cappable) == ("package-0", True, False)
    assert node.rapl_cappable == ()
    # The cap range then comes from cpufreq and the operator's nominal power.
    assert node.cpu_cap_range() == (None, None)
    low, high = node.cpu_cap_range(nominal_watts=280)
    assert high == 280.0 and low == pytest.approx(280 * 1_500_000 / 3_800_000, abs=1e-3)


def test_cpufreq_only_aarch64(tree):
    proc, sys_ = tree("cpufreq")
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    assert node.cpu.arch == "aarch64" and node.cpu.model == "ARM 0x41:0xd0c"
    assert node.cpu.threads == 8 and node.rapl == ()
    assert [c.cpu for c in node.cpufreq] == list(range(8))
    assert node.cpu_cap_range(nominal_watts=150) == (50.0, 150.0)


def test_bare_node_has_nothing_to_cap(tree):
    proc, sys_ = tree("bare")
    node = discovery.discover(proc, sys_, nvml=None)
    assert node.rapl == () and node.cpufreq == ()
    assert node.cpu_cap_range(nominal_watts=100) == (None, None)
    lines = discovery.describe(node)
    assert "no RAPL: no powercap package zone under /sys/class/powercap" in lines
    assert "CPU caps: unsupported (no RAPL power limit and no cpufreq)" in lines


def test_gpus_through_nvml(tree):
    proc, sys_ = tree("intel")
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml(node_trees.h100s(4)))
    assert [g.name for g in node.gpus] == ["NVIDIA H100 80GB HBM3"] * 4
    assert node.gpu_cap_range() == (200.0, 700.0)
    assert node.gpu_vendor == "nvidia" and node.gpu_note == ""


@pytest.mark.parametrize(
    "nvml,note",
    [
        (None, "no GPU: NVML library not installed"),
        (node_trees.FakeNvml([], broken=True), "no GPU: NVML unavailable (NVML Shared Library"),
        (node_trees.FakeNvml([]), "no GPU: NVML reports no device"),
    ],
)
def test_no_gpu_says_why(tree, nvml, note, monkeypatch):
    proc, sys_ = tree("bare")
    monkeypatch.setattr(discovery, "pynvml", None)
    node = discovery.discover(proc, sys_, nvml=nvml)
    assert node.gpus == () and node.gpu_note.startswith(note)


def test_missing_proc_is_a_discovery_error(tmp_path):
    with pytest.raises(discovery.DiscoveryError, match="cannot read .*cpuinfo"):
        discovery.discover(str(tmp_path), str(tmp_path))


def test_cpu_traits_follow_the_kernel_flags(tree, tmp_path):
    proc, sys_ = tree("intel")
    names = traits.cpu_traits(discovery.read_cpu(proc))
    for expected in (
        "HW_CPU_X86_SSE3",  # pni
        "HW_CPU_X86_CLMUL",  # pclmulqdq
        "HW_CPU_X86_SSE41",
        "HW_CPU_X86_AVX512F",
        "HW_CPU_X86_AVX512VAES",  # vaes with avx512f
        "HW_CPU_X86_SHA",
        "HW_CPU_X86_AMXTILE",
        "HW_CPU_X86_VMX",
        "HW_CPU_HYPERTHREADING",
    ):
        assert expected in names
    assert "HW_CPU_X86_SVM" not in names
    proc, _ = node_trees.write("amd", tmp_path / "amd")
    amd = traits.cpu_traits(discovery.read_cpu(proc))
    assert "HW_CPU_X86_SVM" in amd and "HW_CPU_X86_SSE4A" in amd
    assert "HW_CPU_X86_AVX512GFNI" in amd


def test_vaes_without_avx512_is_no_avx512_trait(tree):
    cpu = discovery.Cpu("x", "GenuineIntel", 1, 4, 4, frozenset({"avx2", "vaes", "gfni"}))
    assert traits.cpu_traits(cpu) == ["HW_CPU_X86_AVX2"]


def test_aarch64_features_and_no_x86_traits(tree):
    proc, _ = tree("cpufreq")
    names = traits.cpu_traits(discovery.read_cpu(proc))
    assert "HW_CPU_AARCH64_AES" in names and "HW_CPU_AARCH64_ATOMICS" in names
    assert not [n for n in names if n.startswith("HW_CPU_X86_")]
    assert "HW_CPU_HYPERTHREADING" not in names


def test_every_trait_name_is_an_os_traits_name():
    known = set(os_traits.get_traits())
    assert traits.MANAGED <= known, sorted(traits.MANAGED - known)
