"""simulator.report: energy saved against no management, and the trade-off plot."""

import pytest

from simulator import engine
from simulator import report


def _outcome(label, policy, it_kwh, options=None, std=(1.0,), waits=(0.0,)):
    return engine.Outcome(
        label=label,
        policy=policy,
        options=options or {},
        it_kwh=it_kwh,
        facility_kwh=it_kwh,
        submitted=3,
        completed=2,
        started=2,
        slowdowns={"performance": [1.0], "standard": list(std)},
        waits={"performance": list(waits), "standard": [0.0]},
        performance_on_eco=0,
        performance_on_eco_seconds=0.0,
        samples=[
            {"t": 900.0, "watts": 1000.0, "running": 1, "queued": 0, "performance_nodes": {"g": 1}}
        ],
        families={"g": 2},
        wall={},
        scheduler_calls=0,
        no_valid_host=0,
    )


def _data():
    outcomes = [
        _outcome("none", "static_partition", 1000.0, {"static_hp_frac": 1.0}),
        _outcome(
            "static_partition@0.5",
            "static_partition",
            900.0,
            {"static_hp_frac": 0.5},
            std=(1.0, 1.1, 1.2),
        ),
        _outcome(
            "static_partition@0.1",
            "static_partition",
            800.0,
            {"static_hp_frac": 0.1},
            std=(1.0, 1.3, 1.5),
            waits=(0.0, 600.0),
        ),
        _outcome("queue_aware_v1", "queue_aware_v1", 850.0),
    ]
    meta = {"nodes": 2, "inventory": "x", "hours": 1, "seed": 1, "jobs": 3}
    return report.summary(outcomes, meta, 1.0)


def test_energy_saved_is_against_no_management():
    data = _data()
    by = {p["label"]: p for p in data["policies"]}
    assert by["static_partition@0.1"]["energy_saved_pct"] == 20.0
    assert by["queue_aware_v1"]["energy_saved_pct"] == 15.0
    assert by["none"]["energy_saved_pct"] == 0.0
    # One IT figure: the hosts' measured wall power already holds what a
    # separate platform draw used to (simulator.power).
    assert "cpu_gpu_saved_pct" not in by["none"]
    assert "CPU+GPU" not in report.format_table(data)


def test_tradeoff_points_are_the_static_fractions_in_order(tmp_path):
    data = _data()
    points = report.tradeoff_points(data)
    assert [p[0] for p in points] == [0.1, 0.5]  # not none, not queue_aware_v1
    frac, saved, p50, p95, wait = points[0]
    assert (saved, p50) == (20.0, 1.3)
    assert p95 == pytest.approx(1.48) and wait == pytest.approx(9.5)
    path = tmp_path / "tradeoff.png"
    assert report.plot_tradeoff(data, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only_none = {**data, "policies": data["policies"][:1]}
    assert not report.plot_tradeoff(only_none, str(tmp_path / "none.png"))
    assert not (tmp_path / "none.png").exists()


def _split(data, labels):
    policies = [p for p in data["policies"] if p["label"] in labels]
    for p in policies:
        if p["label"] != "none":  # a run without none has no baseline
            p["energy_saved_pct"] = None
    return {**data, "policies": policies}


def test_merge_gives_the_comparison_of_one_run(tmp_path, capsys):
    import copy
    import json

    from simulator import run as sim_run

    data = _data()
    a = _split(copy.deepcopy(data), {"static_partition@0.5", "queue_aware_v1"})
    b = _split(copy.deepcopy(data), {"static_partition@0.1", "none", "static_partition@0.5"})
    merged = report.merge([a, b])
    assert [p["label"] for p in merged["policies"]] == [
        "none",
        "static_partition@0.1",
        "static_partition@0.5",
        "queue_aware_v1",
    ]
    by_label = {p["label"]: p for p in data["policies"]}
    for p in merged["policies"]:
        assert p == by_label[p["label"]]
    assert merged["seed"] == data["seed"] and "policies" in merged
    # Through the CLI: files whose last line is the JSON object.
    files = []
    for name, output in (("a.txt", a), ("b.txt", b)):
        path = tmp_path / name
        path.write_text("a table\n" + json.dumps(output) + "\n")
        files.append(str(path))
    plots = tmp_path / "plots"
    assert sim_run.main(["--merge", *files, "--json", "--plots", str(plots)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out.splitlines()[-1]) == json.loads(json.dumps(merged))
    assert (plots / "tradeoff.png").exists() and not (plots / "slowdown.png").exists()
    assert 'src="tradeoff.png"' in (plots / "index.html").read_text()


def test_merge_refuses_other_workloads_and_differing_runs(tmp_path, capsys):
    import copy

    from simulator import run as sim_run

    data = _data()
    other = {**copy.deepcopy(data), "seed": 2}
    with pytest.raises(report.MergeError, match="another workload: seed 2"):
        report.merge([data, other])
    changed = copy.deepcopy(data)
    changed["policies"][1]["it_kwh"] = 1.0
    with pytest.raises(report.MergeError, match="static_partition@0.5 differs"):
        report.merge([data, changed])
    bad = tmp_path / "bad.txt"
    bad.write_text("not json\n")
    assert sim_run.main(["--merge", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "last line is not the JSON object" in err


def test_suspend_sweep_points_follow_suspend_after(tmp_path):
    def suspended(minutes, kwh, wakeups):
        outcome = _outcome(
            f"static_partition+suspend@{minutes}m",
            "static_partition",
            kwh,
            {"static_hp_frac": 0.2, "suspend_enabled": True, "suspend_after": minutes * 60},
            waits=(0.0, 60.0 * minutes),
        )
        outcome.wakeups = wakeups
        return outcome

    outcomes = [
        _outcome("none", "static_partition", 1000.0, {"static_hp_frac": 1.0}),
        suspended(30, 800.0, 4),
        suspended(3, 700.0, 10),
        # One value of another policy is no sweep: it gets no line.
        _outcome(
            "queue_aware_v1+suspend",
            "queue_aware_v1",
            750.0,
            {"suspend_enabled": True, "suspend_after": 1800},
        ),
    ]
    meta = {"nodes": 2, "inventory": "x", "hours": 1, "seed": 1, "jobs": 3}
    data = report.summary(outcomes, meta, 1.0)
    sweeps = report.suspend_sweep_points(data)
    assert list(sweeps) == ["static_partition"]
    minutes = [p[0] for p in sweeps["static_partition"]]
    saved = [p[1] for p in sweeps["static_partition"]]
    wear = [p[2] for p in sweeps["static_partition"]]
    assert minutes == [3.0, 30.0] and saved == [30.0, 20.0]
    # 10 and 4 wake-ups over 2 nodes in 15 simulated minutes (the last
    # sample's time): 1/96 of a day.
    assert wear == [480.0, 192.0]
    path = tmp_path / "sweep.png"
    assert report.plot_suspend_sweep(data, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    no_sweep = {**data, "policies": data["policies"][:2]}
    assert not report.plot_suspend_sweep(no_sweep, str(tmp_path / "none.png"))
    assert not (tmp_path / "none.png").exists()
