"""Registration and caps on each fake tree, against an in-memory placement.

The fake keeps generations and refuses an inventory below what is
allocated the way placement does (409 placement.inventory.inuse); the
functional test (tests/functional/power/test_node_agent.py) does the same against
a real placement-api.
"""

import os
import uuid as uuid_lib

import pytest

from joule import placement_client
from node_agent import agent as agent_mod
from node_agent import conf as conf_mod
from node_agent import discovery
from node_agent import power as power_mod
from node_agent import provider_config
from node_agent import register as register_mod
from tests import node_trees


class FakePlacement:
    def __init__(self):
        self.providers = {}  # uuid -> {"name", "generation", "inventories", "traits"}
        self.nodes = {}  # uuid -> node record (with "generation")
        self.hardware = {}
        self.twins = {}
        self.used = {}  # uuid -> {rc: used}
        self.writes = []
        self.classes, self.custom_traits = set(), set()

    def _conflict(self, code, detail="conflict"):
        return placement_client.Conflict("PUT", "/x", 409, code, detail)

    def find_provider(self, name):
        for u, p in self.providers.items():
            if p["name"] == name:
                return {"uuid": u, "name": name, "parent_provider_uuid": None}
        return None

    def create_provider(self, name):
        u = str(uuid_lib.uuid4())
        self.providers[u] = {"name": name, "generation": 0, "inventories": {}, "traits": []}
        self.writes.append("POST provider")
        return {"uuid": u, "name": name}

    def get_inventories(self, u):
        p = self.providers[u]
        return p["generation"], {rc: dict(v) for rc, v in p["inventories"].items()}

    def put_inventories(self, u, generation, inventories):
        p = self.providers[u]
        if generation != p["generation"]:
            raise self._conflict("placement.concurrent_update")
        for rc, used in self.used.get(u, {}).items():
            inv = inventories.get(rc)
            if inv is None or used > (inv["total"] - inv["reserved"]) * inv["allocation_ratio"]:
                raise self._conflict(
                    "placement.inventory.inuse",
                    f"Inventory for '{rc}' on resource provider '{u}' in use.",
                )
        p["inventories"] = {rc: dict(v) for rc, v in inventories.items()}
        p["generation"] += 1
        self.writes.append("PUT inventories")
        return p["generation"]

    def get_traits(self, u):
        p = self.providers[u]
        return p["generation"], list(p["traits"])

    def put_traits(self, u, generation, traits):
        p = self.providers[u]
        if generation != p["generation"]:
            raise self._conflict("placement.concurrent_update")
        p["traits"] = sorted(traits)
        p["generation"] += 1
        self.writes.append("PUT traits")
        return p["generation"]

    def ensure_trait(self, name):
        self.custom_traits.add(name)

    def ensure_resource_class(self, name):
        self.classes.add(name)

    def get_node(self, u):
        if u not in self.nodes and u not in self.hardware and u not in self.twins:
            return None
        node = dict(self.nodes.get(u) or {"generation": None, "labels": {}, "cell": None})
        node["hardware"] = self.hardware.get(u)
        node["twin"] = self.twins.get(u)
        return node

    def put_node(self, u, **record):
        have = self.nodes.get(u)
        if (have and have["generation"]) != record["generation"] and not (
            have is None and record["generation"] is None
        ):
            raise self._conflict("placement.concurrent_update")
        gen = -1 if have is None else have["generation"]
        self.nodes[u] = {**record, "generation": gen + 1, "heartbeat_at": None}
        self.writes.append("PUT node")

    def put_hardware(self, u, hardware):
        self.hardware[u] = dict(hardware)
        self.writes.append("PUT hardware")

    def heartbeat(self, u, twin_status=None):
        if u not in self.nodes:
            raise placement_client.NotFound("POST", "/h", 404, "placement.node.not_found", "")
        twin = self.twins.get(u)
        if twin is not None and twin_status is not None:
            twin["status"] = twin_status
        self.nodes[u]["heartbeat_at"] = "now"
        return {"heartbeat_at": "now", "twin": None if twin is None else dict(twin)}


def _conf(proc, sys_, **agent):
    overrides = {("agent", "procfs_root"): proc, ("agent", "sysfs_root"): sys_}
    overrides[("agent", "host")] = agent.pop("host", "node-1")
    for key, value in agent.items():
        overrides[("agent", key)] = value
    return conf_mod.make_conf(overrides=overrides)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _agent(kind, tmp_path, nvml=None, **agent_opts):
    proc, sys_ = node_trees.write(kind, tmp_path, with_min=agent_opts.pop("with_min", False))
    conf = _conf(proc, sys_, **agent_opts)
    fake = FakePlacement()
    clock = Clock()
    nvml = nvml or node_trees.FakeNvml([])
    return agent_mod.Agent(conf, fake, nvml=nvml, clock=clock), fake, sys_, clock


# -- registration --------------------------------------------------------------


@pytest.mark.parametrize(
    "kind,vcpu,memory_mb,cpu_range",
    [
        ("intel", 16, 512 * 1024, (None, 540.0)),
        ("amd", 16, 256 * 1024, (None, None)),
        ("cpufreq", 8, 128 * 1024, (None, None)),
        ("bare", 4, 8 * 1024, (None, None)),
    ],
)
def test_registration_of_each_kind_then_zero_writes(tmp_path, kind, vcpu, memory_mb, cpu_range):
    agent, fake, _sys, _clock = _agent(kind, tmp_path, cell="cell1", labels={"role": "worker"})
    result = agent.refresh()
    assert result.writes == ["provider", "inventories", "traits", "node", "hardware"]
    provider = fake.providers[agent.uuid]
    inv = provider["inventories"]
    assert inv["VCPU"] == {
        "total": vcpu,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": vcpu,
        "step_size": 1,
        "allocation_ratio": 4.0,  # nova's initial_cpu_allocation_ratio
    }
    assert inv["MEMORY_MB"]["total"] == memory_mb and inv["MEMORY_MB"]["reserved"] == 512
    assert inv["MEMORY_MB"]["allocation_ratio"] == 1.0
    assert "PGPU" not in inv
    hw = fake.hardware[agent.uuid]
    assert (hw["cpu_min_cap_watts"], hw["cpu_max_cap_watts"]) == cpu_range
    assert hw["gpu_count"] == 0 and hw["memory_gib"] == memory_mb // 1024
    node = fake.nodes[agent.uuid]
    assert node["cell"] == "cell1" and node["labels"]["role"] == "worker"
    assert node["labels"]["family"] == f"cpu:{hw['cpu_model']}"
    assert node["labels"]["joulie.io/managed"] == "true"

    # A restart with the same hardware: a new agent finds everything in place.
    again = agent_mod.Agent(agent.conf, fake, nvml=agent.nvml, clock=agent.clock)
    before = len(fake.writes)
    assert again.refresh().writes == []
    assert len(fake.writes) == before and again.uuid == agent.uuid


def test_intel_node_traits_and_an_operators_traits_kept(tmp_path):
    agent, fake, _sys, _clock = _agent("intel", tmp_path)
    agent.refresh()
    traits = fake.providers[agent.uuid]["traits"]
    assert "HW_CPU_X86_AVX512F" in traits and "HW_CPU_HYPERTHREADING" in traits
    # An operator's trait and the power controller's profile trait stay; a CPU
    # trait the CPU no longer has goes.
    p = fake.providers[agent.uuid]
    p["traits"] = sorted(
        set(p["traits"]) | {"CUSTOM_POWER_PROFILE_ECO", "CUSTOM_RACK_A", "HW_CPU_X86_SVM"}
    )
    assert agent.refresh().writes == ["traits"]
    traits = set(p["traits"])
    assert {"CUSTOM_POWER_PROFILE_ECO", "CUSTOM_RACK_A"} <= traits
    assert "HW_CPU_X86_SVM" not in traits


def test_allocation_ratios_follow_nova(tmp_path):
    agent, fake, _sys, _clock = _agent("bare", tmp_path)
    agent.refresh()
    inv = fake.providers[agent.uuid]["inventories"]
    # An operator changes the ratio through the API: kept while the option is unset.
    inv["VCPU"]["allocation_ratio"] = 8.0
    assert agent.refresh().writes == []
    agent.conf.set_override("cpu_allocation_ratio", 2.0, group="agent")
    agent.conf.set_override("reserved_host_cpus", 1, group="agent")
    assert agent.refresh().writes == ["inventories"]
    inv = fake.providers[agent.uuid]["inventories"]
    assert (inv["VCPU"]["allocation_ratio"], inv["VCPU"]["reserved"]) == (2.0, 1)


def test_inventory_below_allocations_is_refused_once_and_the_agent_goes_on(tmp_path, caplog):
    agent, fake, _sys, _clock = _agent("bare", tmp_path)
    agent.refresh()
    fake.used[agent.uuid] = {"VCPU": 16}  # 4 threads x 4.0 are allocated
    agent.conf.set_override("cpu_allocation_ratio", 1.0, group="agent")
    caplog.set_level("ERROR", logger="node_agent.register")
    for _ in range(3):
        result = agent.refresh()
        assert result.refused and "placement.inventory.inuse" in result.refused[0]
    lines = [r.getMessage() for r in caplog.records if "not updated" in r.getMessage()]
    assert len(lines) == 1 and "in use" in lines[0]
    assert fake.providers[agent.uuid]["inventories"]["VCPU"]["allocation_ratio"] == 4.0
    # The heartbeat and the rest of the pass still happen.
    agent.run_pass()
    assert fake.nodes[agent.uuid]["heartbeat_at"] == "now"


def test_gpu_node_registers_pgpu_and_gpu_caps(tmp_path):
    nvml = node_trees.FakeNvml(node_trees.h100s(4))
    agent, fake, _sys, _clock = _agent("intel", tmp_path, nvml=nvml)
    agent.refresh()
    inv = fake.providers[agent.uuid]["inventories"]
    assert inv["PGPU"] == {
        "total": 4,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": 4,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }
    hw = fake.hardware[agent.uuid]
    assert (hw["gpu_model"], hw["gpu_count"], hw["gpu_vendor"]) == (
        "NVIDIA H100 80GB HBM3",
        4,
        "nvidia",
    )
    assert (hw["gpu_min_cap_watts"], hw["gpu_max_cap_watts"]) == (200.0, 700.0)
    assert fake.nodes[agent.uuid]["labels"]["family"] == "gpu:NVIDIA H100 80GB HBM3"


def test_provider_config_adds_custom_classes_and_traits(tmp_path):
    path = tmp_path / "provider.yaml"
    path.write_text(
        "meta:\n  schema_version: '1.0'\nproviders:\n"
        "  - identification: {uuid: $COMPUTE_NODE}\n"
        "    inventories:\n      additional:\n"
        "        - CUSTOM_FPGA: {total: 4, reserved: 1}\n"
        "    traits:\n      additional: [CUSTOM_RACK_B1, COMPUTE_STATUS_DISABLED]\n"
        "  - identification: {name: another-node}\n"
        "    traits:\n      additional: [CUSTOM_NOT_OURS]\n"
    )
    agent, fake, _sys, _clock = _agent("bare", tmp_path, provider_config=str(path))
    agent.refresh()
    p = fake.providers[agent.uuid]
    assert p["inventories"]["CUSTOM_FPGA"]["total"] == 4
    assert p["inventories"]["CUSTOM_FPGA"]["reserved"] == 1
    assert {"CUSTOM_RACK_B1", "COMPUTE_STATUS_DISABLED"} <= set(p["traits"])
    assert "CUSTOM_NOT_OURS" not in p["traits"]
    assert fake.classes == {"CUSTOM_FPGA"} and fake.custom_traits == {"CUSTOM_RACK_B1"}


@pytest.mark.parametrize(
    "text,message",
    [
        ("meta: {schema_version: '2.0'}\nproviders: []\n", "schema_version"),
        (
            "meta: {schema_version: '1.0'}\nproviders:\n  - identification: {uuid: $COMPUTE_NODE}\n"
            "    inventories: {additional: [{VCPU: {total: 4}}]}\n",
            "not a custom resource class",
        ),
        (
            "meta: {schema_version: '1.0'}\nproviders:\n  - identification: {uuid: $COMPUTE_NODE}\n"
            "    inventories: {additional: [{CUSTOM_X: {total: 4, reserved: 5}}]}\n",
            "reserved is greater",
        ),
        (
            "meta: {schema_version: '1.0'}\nproviders:\n  - identification: {uuid: $COMPUTE_NODE}\n"
            "    traits: {additional: [not_a_trait]}\n",
            "neither a custom trait",
        ),
        ("[1, 2", "not YAML"),
    ],
)
def test_provider_config_errors_name_the_place(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(provider_config.ProviderConfigError, match=message):
        provider_config.load(str(path), "node-1")


# -- caps ------------------------------------------------------------------------


def _twin(fake, agent, cpu=None, gpu=None, profile="eco", generation=0):
    fake.twins[agent.uuid] = {
        "profile": profile,
        "schedulable_class": profile,
        "cpu_cap_watts": cpu,
        "gpu_cap_watts": gpu,
        "managed_by": "test",
        "generation": generation,
    }


def test_intel_rapl_caps_each_package_and_measures(tmp_path):
    agent, fake, sys_, clock = _agent("intel", tmp_path, with_min=True)
    agent.run_pass()  # registered, no twin yet: nothing touched
    assert node_trees.rapl_limit(sys_, 0) == node_trees.INTEL_MAX_UW
    _twin(fake, agent, cpu=300.0)
    clock.now += 10
    node_trees.add_energy(sys_, "intel-rapl:0", 1_000_000_000)  # 100 W over 10 s
    node_trees.add_energy(sys_, "intel-rapl:1", 1_500_000_000)  # 150 W
    status = agent.run_pass()
    assert [node_trees.rapl_limit(sys_, p) for p in (0, 1)] == [150_000_000, 150_000_000]
    cpu = status["cpu"]
    assert (cpu["method"], cpu["result"], cpu["applied_watts"]) == ("rapl", "applied", 300.0)
    assert cpu["measured_watts"] == 250.0
    assert [(d["name"], d["limit_watts"], d["measured_watts"]) for d in cpu["domains"]] == [
        ("package-0", 150.0, 100.0),
        ("package-1", 150.0, 150.0),
    ]
    assert fake.twins[agent.uuid]["status"] == status  # reported in the same pass
    assert status["observed_generation"] == 0 and status["gpu"]["result"] == "uncapped"
    # Outside the hardware's range: not applied, said why; the old limit stays.
    _twin(fake, agent, cpu=100.0, generation=1)
    status = agent.run_pass()
    assert status["cpu"]["result"] == "out_of_range"
    assert "below intel-rapl:0's minimum 90 W" in status["cpu"]["reason"]
    assert node_trees.rapl_limit(sys_, 0) == 150_000_000
    # Uncapped (null): back to the maximum.
    _twin(fake, agent, cpu=None, profile="performance", generation=2)
    status = agent.run_pass()
    assert status["cpu"]["result"] == "uncapped"
    assert node_trees.rapl_limit(sys_, 1) == node_trees.INTEL_MAX_UW


def test_a_limit_changed_behind_the_agents_back_is_put_back(tmp_path):
    agent, fake, sys_, _clock = _agent("intel", tmp_path)
    agent.refresh()
    _twin(fake, agent, cpu=400.0)
    agent.run_pass()
    path = os.path.join(sys_, "class", "powercap", "intel-rapl:0", "constraint_0_power_limit_uw")
    with open(path, "w") as fh:
        fh.write("1\n")
    agent.run_pass()
    assert node_trees.rapl_limit(sys_, 0) == 200_000_000


def test_permission_denied_is_reported(tmp_path, monkeypatch):
    agent, fake, sys_, _clock = _agent("intel", tmp_path)
    agent.refresh()

    def denied(path, value):
        raise PermissionError(13, "Permission denied", path)

    # The agent runs as root where it caps (tests may too): the kernel's
    # answer to a write without CAP_SYS_ADMIN is what is faked here.
    monkeypatch.setattr(power_mod, "_write", denied)
    _twin(fake, agent, cpu=300.0)
    status = agent.run_pass()
    assert status["cpu"]["result"] == "failed"
    assert status["cpu"]["reason"] == (
        "permission denied writing "
        + os.path.join(sys_, "class", "powercap", "intel-rapl:0", "constraint_0_power_limit_uw")
    )
    assert fake.twins[agent.uuid]["status"]["cpu"]["result"] == "failed"


def test_amd_caps_through_cpufreq_and_measures_rapl_energy(tmp_path):
    agent, fake, sys_, clock = _agent("amd", tmp_path, cpu_nominal_watts=280.0)
    agent.refresh()
    hw = fake.hardware[agent.uuid]
    assert hw["cpu_max_cap_watts"] == 280.0 and hw["cpu_min_cap_watts"] == pytest.approx(110.526)
    _twin(fake, agent, cpu=140.0)
    agent.run_pass()
    clock.now += 5
    node_trees.add_energy(sys_, "intel-rapl:0", 600_000_000)  # 120 W
    status = agent.run_pass()
    assert [node_trees.scaling_max(sys_, c) for c in range(16)] == [1_900_000] * 16
    cpu = status["cpu"]
    assert (cpu["method"], cpu["result"], cpu["scaling_max_khz"]) == (
        "cpufreq",
        "applied",
        1_900_000,
    )
    assert cpu["measured_watts"] == 120.0
    assert [d["name"] for d in cpu["domains"]] == ["package-0"]


def test_amd_without_a_nominal_power_reports_unsupported(tmp_path):
    agent, fake, sys_, _clock = _agent("amd", tmp_path)
    agent.refresh()
    _twin(fake, agent, cpu=140.0)
    status = agent.run_pass()
    assert status["cpu"]["result"] == "unsupported"
    assert "cpu_nominal_watts" in status["cpu"]["reason"]
    assert node_trees.scaling_max(sys_, 0) == 3_800_000


def test_cpufreq_only_node(tmp_path):
    agent, fake, sys_, _clock = _agent("cpufreq", tmp_path, cpu_nominal_watts=150.0)
    agent.refresh()
    assert fake.hardware[agent.uuid]["cpu_max_cap_watts"] == 150.0
    _twin(fake, agent, cpu=90.0)
    status = agent.run_pass()
    assert [node_trees.scaling_max(sys_, c) for c in range(8)] == [1_800_000] * 8
    assert status["cpu"]["applied_watts"] == 90.0 and status["cpu"]["measured_watts"] is None
    _twin(fake, agent, cpu=10.0, generation=1)
    assert agent.run_pass()["cpu"]["result"] == "out_of_range"


def test_bare_node_reports_unsupported_clearly(tmp_path, caplog):
    agent, fake, _sys, _clock = _agent("bare", tmp_path)
    agent.refresh()
    _twin(fake, agent, cpu=120.0, gpu=300.0)
    caplog.set_level("WARNING", logger="node_agent.power")
    status = agent.run_pass()
    assert status["cpu"] == {
        "method": "none",
        "result": "unsupported",
        "requested_watts": 120.0,
        "applied_watts": None,
        "measured_watts": None,
        "reason": "no RAPL power limit (constraint_0_power_limit_uw) and no cpufreq on this "
        "node: CPU caps cannot be applied",
        "domains": [],
    }
    assert status["gpu"]["result"] == "unsupported"
    assert status["gpu"]["reason"] == "no GPU: NVML reports no device"
    agent.run_pass()
    warned = [r for r in caplog.records if "CPU caps cannot be applied" in r.getMessage()]
    assert len(warned) == 1  # said once, not every pass


def test_gpu_caps_through_nvml(tmp_path):
    nvml = node_trees.FakeNvml(node_trees.h100s(2))
    agent, fake, _sys, _clock = _agent("intel", tmp_path, nvml=nvml)
    agent.refresh()
    _twin(fake, agent, gpu=350.0)
    status = agent.run_pass()
    assert nvml.sets == [(0, 350_000), (1, 350_000)]
    gpu = status["gpu"]
    assert (gpu["method"], gpu["result"], gpu["applied_watts"]) == ("nvml", "applied", 350.0)
    assert gpu["measured_watts"] == 701.0
    agent.run_pass()
    assert len(nvml.sets) == 2  # in force: no second write
    _twin(fake, agent, gpu=900.0, generation=1)
    assert "above GPU 0's maximum 700 W" in agent.run_pass()["gpu"]["reason"]
    denied = node_trees.FakeNvml(node_trees.h100s(1), deny=True)
    agent2, fake2, _s, _c = _agent("bare", tmp_path / "other", nvml=denied)
    agent2.refresh()
    _twin(fake2, agent2, gpu=300.0)
    status = agent2.run_pass()
    assert status["gpu"]["result"] == "failed" and "permission denied" in status["gpu"]["reason"]


def test_dry_run_power_writes_nothing(tmp_path):
    proc, sys_ = node_trees.write("intel", tmp_path)
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    power = power_mod.Power(node, dry_run=True)
    status = power.status({"generation": 0, "profile": "eco", "cpu_cap_watts": 200.0})
    assert status["cpu"]["result"] == "applied"
    assert node_trees.rapl_limit(sys_, 0) == node_trees.INTEL_MAX_UW
    assert sorted(v for _p, v in power.planned) == [100_000_000, 100_000_000]


def test_energy_counter_wrap(tmp_path):
    proc, sys_ = node_trees.write("intel", tmp_path)
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    clock = Clock()
    power = power_mod.Power(node, clock=clock)
    # The counter sits 500,000 uJ below its range when sampled, then 600,000
    # uJ come: it reads 100,000, below the sample (a raw delta of -400,000).
    path = os.path.join(sys_, "class", "powercap", "intel-rapl:0", "energy_uj")
    with open(path, "w") as fh:
        fh.write(str(node_trees.ENERGY_RANGE_UJ - 500_000))
    power.measure_cpu()
    clock.now += 1
    node_trees.add_energy(sys_, "intel-rapl:0", 600_000)  # wraps past the range
    assert int(node_trees.read(path)) < node_trees.ENERGY_RANGE_UJ - 500_000
    assert power.measure_cpu()["package-0"] == pytest.approx(0.6, abs=1e-3)


def test_plan_is_the_shape_inventory_load_writes(tmp_path):
    proc, sys_ = node_trees.write("intel", tmp_path)
    conf = _conf(proc, sys_)
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    plan = register_mod.plan(node, conf.agent)
    from placement.objects import node as node_obj

    assert set(plan.hardware) == set(node_obj.HARDWARE_FIELDS)


def test_a_limit_the_kernel_rounded_is_not_rewritten(tmp_path, monkeypatch):
    # The kernel keeps a RAPL limit in its power unit (often 125,000 uW): the
    # file reads back 41,625,000 after 41,666,667 was written. A steady node
    # must not write it again every pass.
    from node_agent import power

    path = tmp_path / "constraint_0_power_limit_uw"
    path.write_text("0")
    real = power._read_int
    monkeypatch.setattr(
        power, "_read_int", lambda p: None if real(p) is None else real(p) // 125000 * 125000
    )
    assert power._write(str(path), 41_666_667) is True
    assert power._write(str(path), 41_666_667) is False
    assert power._write(str(path), 50_000_000) is True


def test_the_heartbeat_says_how_many_instances_run_with_the_compute_service(tmp_path):
    agent, fake, _sys, _clock = _agent("intel", tmp_path)
    agent.run_pass()
    _twin(fake, agent, cpu=300.0)
    assert "instances" not in agent.run_pass()  # no compute service: not said
    counts = {"running": 2, "running_performance": 1}
    agent.instances = lambda: dict(counts)
    _twin(fake, agent, cpu=300.0, generation=1)
    status = agent.run_pass()
    assert status["instances"] == counts
    assert fake.twins[agent.uuid]["status"]["instances"] == counts
