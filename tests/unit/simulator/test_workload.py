"""simulator.workload: the seeded generator and the JSON-lines trace format."""

import json

import pytest

from joule import inventory
from simulator import run as sim_run
from simulator import workload

NODES = inventory.load(sim_run.inventory_path("41"))


def _jobs(seed=1, hours=24):
    return workload.generate(workload.Capacity.of(NODES), hours, seed)


def test_same_seed_same_jobs_other_seed_other_jobs():
    assert _jobs(1) == _jobs(1)
    assert _jobs(1) != _jobs(2)


def test_generated_mix_has_both_classes_kinds_and_a_diurnal_profile():
    jobs = _jobs(1, hours=24 * 4)
    assert {j.workload_class for j in jobs} == {"performance", "standard"}
    assert {j.kind for j in jobs} == {"cpu", "gpu"}
    assert all(j.gpus >= 1 for j in jobs if j.kind == "gpu")
    assert all(j.gpus == 0 for j in jobs if j.kind == "cpu")
    share = sum(j.is_performance for j in jobs) / len(jobs)
    assert 0.2 < share < 0.4
    # Peak at noon, trough at midnight: the day half holds most arrivals.
    day = sum(1 for j in jobs if 6 <= (j.arrival / 3600) % 24 < 18)
    assert day > 0.6 * len(jobs)
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)


def _busy_share(jobs, t, kind):
    """Share of the GPUs (or CPU-node cores) the jobs would hold at ``t``, unqueued."""
    cap = workload.Capacity.of(NODES)
    device, total = ("gpus", cap.gpus) if kind == "gpu" else ("vcpus", cap.cpu_cores)
    used = sum(
        getattr(j, device) * j.instances
        for j in jobs
        if j.kind == kind and j.arrival <= t < j.arrival + j.duration
    )
    return used / total


def test_the_day_starts_in_service_with_the_jobs_of_the_day_before():
    warm = _jobs(1)
    cold = workload.generate(workload.Capacity.of(NODES), 24, 1, workload.Mix(warm_start=False))
    carried = [j for j in warm if j.id.startswith("carry-")]
    assert carried and warm[: len(carried)] == carried
    # The jobs arriving from 0:00 are the same with or without the start.
    assert warm[len(carried) :] == cold
    assert all(j.arrival == 0.0 and 0 < j.duration <= workload.Mix.max_duration for j in carried)
    assert len({j.id for j in warm}) == len(warm)
    # At 0:00 the cluster holds work (the cold start's is empty), some of
    # it still running at dawn.
    assert _busy_share(cold, 1.0, "gpu") == 0.0
    assert _busy_share(warm, 1.0, "gpu") > 0.2
    dawn = 6 * 3600.0
    assert _busy_share(warm, dawn, "gpu") > _busy_share(cold, dawn, "gpu")
    assert _jobs(1) == warm and _jobs(2)[:3] != warm[:3]


def test_trace_round_trip(tmp_path):
    jobs = _jobs(3, hours=6)
    path = tmp_path / "trace.jsonl"
    workload.write_trace(path, jobs)
    assert workload.read_trace(path) == jobs
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {
        "id",
        "arrival",
        "workload_class",
        "kind",
        "instances",
        "vcpus",
        "memory_mb",
        "gpus",
        "duration",
        "utilisation",
        "sensitivity",
    }


GOOD = {
    "id": "j1",
    "arrival": 10.0,
    "workload_class": "standard",
    "kind": "cpu",
    "instances": 1,
    "vcpus": 8,
    "memory_mb": 1024,
    "gpus": 0,
    "duration": 60.0,
    "utilisation": 0.5,
    "sensitivity": 0.5,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workload_class": "gold"}, "workload_class"),
        ({"kind": "gpu"}, "gpus >= 1"),
        ({"gpus": 2}, "gpus 0"),
        ({"duration": 0}, "duration"),
        ({"utilisation": 1.5}, "utilisation"),
        ({"vcpus": 2.5}, "not an integer"),
        ({"arrival": -1}, "arrival"),
    ],
)
def test_bad_trace_line_is_refused_with_its_line_number(tmp_path, change, message):
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "id": "j2", **change}) + "\n")
    with pytest.raises(workload.TraceError, match=message) as info:
        workload.read_trace(path)
    assert f"{path}:2" in str(info.value)


def test_trace_missing_key_repeat_and_not_json(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({k: v for k, v in GOOD.items() if k != "kind"}) + "\n")
    with pytest.raises(workload.TraceError, match="missing key 'kind'"):
        workload.read_trace(path)
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(workload.TraceError, match="repeats"):
        workload.read_trace(path)
    path.write_text("{nope\n")
    with pytest.raises(workload.TraceError, match=":1: not JSON"):
        workload.read_trace(path)


def test_cli_refuses_a_bad_trace_and_bad_options_in_one_line(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text("{nope\n")
    assert sim_run.main(["--trace", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "placement-sim:" in err and "not JSON" in err
    for argv in (
        ["--static-hp-frac", "0.2,1.5"],
        ["--policies", "none,magic"],
        ["--hours", "0"],
        ["--pue", "0.5"],
        ["--gpu-eco-cap-pct", "0"],
    ):
        assert sim_run.main(argv) == 2, argv
        assert "placement-sim:" in capsys.readouterr().err


@pytest.mark.parametrize(("overrides", "expected"), [({}, 0.9), ({"load": 0.6}, 0.6)])
def test_load_is_the_share_of_devices_the_work_would_keep_busy(overrides, expected):
    # The 5,000-node inventory (its job sizes average out over three days);
    # the default is a batch cluster with a queue.
    nodes = inventory.load(sim_run.inventory_path("5k"))
    cap = workload.Capacity.of(nodes)
    mix = workload.Mix(warm_start=False, **overrides)
    assert mix.load == expected
    hours = 72
    jobs = workload.generate(cap, hours, 1, mix)
    horizon = hours * 3600.0
    gpu = sum(j.gpus * j.instances * j.duration for j in jobs if j.kind == "gpu")
    cpu = sum(j.vcpus * j.instances * j.duration for j in jobs if j.kind == "cpu")
    assert gpu / (cap.gpus * horizon) == pytest.approx(expected, abs=0.08)
    assert cpu / (cap.cpu_cores * horizon) == pytest.approx(expected, abs=0.08)
