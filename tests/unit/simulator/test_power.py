"""simulator.power: what a node draws and how fast its work runs under a cap."""

import pytest

from simulator import power

H100_NVL = {
    "cpu_model": "AMD EPYC 9654 96-Core Processor",
    "cpu_sockets": 2,
    "cpu_cores": 192,
    "memory_gib": 1536,
    "gpu_model": "NVIDIA H100 NVL",
    "gpu_count": 8,
    "gpu_min_cap_watts": 200,
    "gpu_max_cap_watts": 400,
}
CPU_NODE = {
    "cpu_model": "AMD EPYC 9655 96-Core Processor",
    "cpu_sockets": 2,
    "cpu_cores": 192,
    "memory_gib": 1536,
    "gpu_model": "",
    "gpu_count": 0,
}


def test_idle_node_draws_the_measured_host_idle_and_gpu_idle():
    model = power.NodeModel.of(H100_NVL)
    watts, speeds = power.node_state(model, [])
    assert speeds == []
    # An idle two-socket EPYC 9654 server as SPECpower measures it (128 W,
    # memory, fans and power supply included) + 8 x 60 W idle H100 NVL boards.
    assert watts == pytest.approx(128 + 8 * 60)
    assert watts == pytest.approx(model.idle_watts)
    assert model.max_watts == pytest.approx(817 + 8 * 400)


def test_host_power_follows_the_measured_curve_or_its_proxy_scaled_by_tdp():
    model = power.NodeModel.of(CPU_NODE)
    assert model.host == power.HOST_CURVES["AMD EPYC 9655 96-Core Processor"]
    # Linear between the curve's 10 % points.
    assert model.host_watts(0.05) == pytest.approx((138 + 297) / 2)
    assert model.host_watts(0.25) == pytest.approx((367 + 438) / 2)
    assert model.host_watts(1.5) == 861
    # The EPYC 9534 has no measured curve: its proxy's (the 9654), at 280 of 360 W TDP.
    l40s = power.NodeModel.of({**H100_NVL, "cpu_model": "AMD EPYC 9534 64-Core Processor"})
    assert l40s.host[0] == pytest.approx(128 * 280 / 360)
    assert l40s.host[-1] == pytest.approx(817 * 280 / 360)
    # An unknown model, one socket: the default curve at its share of TDP.
    odd = power.NodeModel.of({**CPU_NODE, "cpu_model": "Some CPU", "cpu_sockets": 1})
    tdp = power.cpu_tdp("Some CPU", 192)
    assert odd.host[-1] == pytest.approx(817 * tdp / 720)


def test_gpu_idle_draw_is_the_models_else_a_share_of_its_maximum():
    assert power.NodeModel.of(H100_NVL).gpu_idle == 60.0
    sxm = {**H100_NVL, "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_max_cap_watts": 700}
    assert power.NodeModel.of(sxm).gpu_idle == 120.0
    unknown = {**H100_NVL, "gpu_model": "Some GPU", "gpu_max_cap_watts": 500}
    assert power.NodeModel.of(unknown).gpu_idle == pytest.approx(500 * power.GPU_IDLE_SHARE)
    # An idle board draws the same whatever its cap: caps bind only under load.
    model = power.NodeModel.of(H100_NVL)
    assert power.node_state(model, [], gpu_cap=200)[0] == power.node_state(model, [])[0]


def test_uncapped_gpu_job_draws_its_utilisation_and_runs_full_speed():
    model = power.NodeModel.of(H100_NVL)
    idle, _ = power.node_state(model, [])
    job = power.Load(vcpus=0, gpus=4, utilisation=1.0, sensitivity=0.8)
    watts, speeds = power.node_state(model, [job], gpu_cap=400)
    assert speeds == [1.0]
    # Four GPUs go from idle (60 W) to their maximum (400 W).
    assert watts - idle == pytest.approx(4 * (400 - 60))


def test_eco_gpu_cap_holds_power_and_slows_by_sensitivity():
    model = power.NodeModel.of(H100_NVL)
    full = power.Load(vcpus=0, gpus=8, utilisation=1.0, sensitivity=1.0)
    immune = power.Load(vcpus=0, gpus=8, utilisation=1.0, sensitivity=0.0)
    watts, (speed,) = power.node_state(model, [full], gpu_cap=240)
    # Wanted dynamic 340 W per GPU, the cap leaves 180 W: speed 180/340.
    assert speed == pytest.approx(180 / 340)
    assert watts == pytest.approx(128 + 8 * 240)  # the host idles: no CPU work
    _w, (speed0,) = power.node_state(model, [immune], gpu_cap=240)
    assert speed0 == 1.0  # memory-bound work is not slowed, but still capped
    assert _w == pytest.approx(watts)


def test_gpu_job_below_the_cap_is_not_slowed():
    model = power.NodeModel.of(H100_NVL)
    light = power.Load(vcpus=0, gpus=2, utilisation=0.4, sensitivity=1.0)
    _w, (speed,) = power.node_state(model, [light], gpu_cap=240)
    assert speed == 1.0  # 60 + 0.4 x 340 = 196 W < 240 W


def test_cpu_cap_is_shared_by_the_jobs_of_a_node():
    hw = power.with_cpu_cap_range(CPU_NODE)
    model = power.NodeModel.of(hw)
    a = power.Load(vcpus=96, gpus=0, utilisation=1.0, sensitivity=1.0)
    b = power.Load(vcpus=96, gpus=0, utilisation=1.0, sensitivity=0.5)
    quarter = power.Load(vcpus=48, gpus=0, utilisation=1.0, sensitivity=1.0)
    watts, speeds = power.node_state(model, [quarter], cpu_cap=240)
    # A quarter of the cores at full load rises 264.5 W above the 138 W
    # idle; the two packages' eco caps allow 2 x 240 W: not slowed.
    assert speeds == [1.0]
    assert watts == pytest.approx((367 + 438) / 2)
    watts, speeds = power.node_state(model, [a, b], cpu_cap=240)
    ratio = (861 - 138) / (2 * 240)
    assert speeds == pytest.approx([ratio**-1.0, ratio**-0.5])
    assert watts == pytest.approx(138 + 2 * 240)
    watts_perf, speeds_perf = power.node_state(model, [a, b], cpu_cap=400)
    assert speeds_perf == [1.0, 1.0]
    assert watts_perf == pytest.approx(model.max_watts)


def test_cpu_work_on_a_gpu_node_uses_the_uncapped_host_cpus():
    model = power.NodeModel.of(H100_NVL)
    job = power.Load(vcpus=192, gpus=0, utilisation=1.0, sensitivity=1.0)
    watts, (speed,) = power.node_state(model, [job], cpu_cap=100, gpu_cap=240)
    assert speed == 1.0
    assert watts == pytest.approx(817 + 8 * 60)


def test_cpu_cap_range_comes_from_the_tdp_table_or_the_core_count():
    hw = power.with_cpu_cap_range(CPU_NODE)
    assert hw["cpu_max_cap_watts"] == 400.0 and hw["cpu_min_cap_watts"] == 160.0
    unknown = power.with_cpu_cap_range({**CPU_NODE, "cpu_model": "Some CPU", "cpu_cores": 64})
    assert unknown["cpu_max_cap_watts"] == 50 + 2.5 * 32
    # GPU nodes are capped on their GPUs only; a record with a range is kept.
    assert power.with_cpu_cap_range(H100_NVL) is H100_NVL
    given = {**CPU_NODE, "cpu_max_cap_watts": 300}
    assert power.with_cpu_cap_range(given) is given
