"""The agent's compute service with the fake driver: failure injection, a
fake instance's end, the counts the heartbeat carries, and a restart."""

import uuid

from node_agent import compute as compute_mod
from node_agent import conf as conf_mod
from node_agent import drivers
from node_agent import instance_store


def _compute(tmp_path, **agent):
    overrides = {("agent", "host"): "node-f", ("agent", "state_dir"): str(tmp_path)}
    overrides.update({("agent", k): v for k, v in agent.items()})
    conf = conf_mod.make_conf([], default_config_files=[], overrides=overrides)
    store = instance_store.Store(conf.agent.state_dir)
    return compute_mod.Compute(store, drivers.load("fake", conf, store), gpu_indices=[0])


def _new():
    return str(uuid.uuid4())


def test_a_node_that_fails_every_build_says_so_and_keeps_nothing(tmp_path):
    compute = _compute(tmp_path, fake_fails=True)
    rec = compute.build(_new(), {"VCPU": 1})
    assert rec["state"] == "failed" and "fails every build" in rec["reason"]
    assert compute.list() == [] and compute.store.load_all() == ([], [])


def test_failures_at_a_rate_are_the_same_for_the_same_seed(tmp_path):
    def outcomes(seed):
        compute = _compute(
            tmp_path / str(seed) / str(uuid.uuid4()), fake_failure_rate=0.5, fake_seed=seed
        )
        return [compute.build(_new(), {"VCPU": 1})["state"] for _ in range(20)]

    first = outcomes(7)
    assert first == outcomes(7)
    assert set(first) == {"running", "failed"}


def test_counts_fake_ends_and_a_restart(tmp_path):
    compute = _compute(tmp_path)
    perf, std, short = _new(), _new(), _new()
    compute.build(perf, {"VCPU": 2}, None, "performance")
    compute.build(std, {"VCPU": 1}, None, "standard")
    compute.build(
        short, {"VCPU": 1}, {"command": ["x"], "env": {"JOULE_FAKE_SECONDS": "0"}}, "performance"
    )
    assert compute.build(perf, {"VCPU": 2})["state"] == "running"  # never twice
    ended = compute.watch_once()
    assert [(e["instance_uuid"], e["state"], e["exit_status"]) for e in ended] == [
        (short, "finished", 0)
    ]
    assert compute.counts() == {"running": 2, "running_performance": 1}
    # A GPU claim takes the one device; a second finds none free.
    gpu = compute.build(_new(), {"VCPU": 1, "PGPU": 1})
    assert gpu["gpus"] == [0]
    assert "none free" in compute.build(_new(), {"VCPU": 1, "PGPU": 1})["reason"]
    # Restarted before the end was acknowledged: running ones run on, the
    # ended one is reported again.
    again = _compute(tmp_path)
    running, ended_ids = again.recover()
    assert sorted(running) == sorted([perf, std, gpu["instance_uuid"]])
    assert ended_ids == [short]
    assert [e["instance_uuid"] for e in again.watch_once()] == [short]
    again.acknowledge([short])
    assert again.show(short) is None
    assert again.delete(perf)["state"] == "deleted"
    assert again.counts() == {"running": 2, "running_performance": 0}


def test_a_bad_build_message_is_refused_and_leaves_nothing(tmp_path):
    endpoint = compute_mod.ComputeEndpoint(_compute(tmp_path))
    good = _new()
    for args in (
        ("not-a-uuid", {"VCPU": 1}, None, None),
        (good, ["VCPU"], None, None),
        (good, {"VCPU": -1}, None, None),
        (good, {"VCPU": True}, None, None),
        (good, {"VCPU": 1}, {"command": "sleep 1"}, None),
        (good, {"VCPU": 1}, {"command": ["a\0b"]}, None),
        (good, {"VCPU": 1}, {"command": ["true"], "env": {"A": 1}}, None),
        (good, {"VCPU": 1}, {"command": ["true"], "shell": True}, None),
        (good, {"VCPU": 1}, None, "urgent"),
        (good, {"VCPU": 1}, {"command": ["true"], "env": {"A=B": "x"}}, None),
        (good, {"VCPU": 1}, {"command": ["true"], "env": {"A": "\udc80"}}, None),
        (good, {"VCPU": 1}, {"command": ["true"], "cwd": "relative"}, None),
        (good, {"VCPU": 1}, {"command": ["x" * 5000]}, None),
    ):
        rec = endpoint.build_instance({}, *args)
        assert rec["state"] == "failed" and rec["reason"].startswith("bad build message"), args
    assert endpoint.list_instances({}) == []
    assert endpoint.compute.store.load_all() == ([], [])
    assert endpoint.build_instance({}, good, {"VCPU": 1})["state"] == "running"


def test_gpus_are_reserved_while_a_build_starts(tmp_path):
    compute = _compute(tmp_path)
    compute._starting["other"] = [0]  # another build is starting with device 0
    rec = compute.build(_new(), {"VCPU": 1, "PGPU": 1})
    assert rec["state"] == "failed" and "none free" in rec["reason"]


def test_a_delete_while_the_build_starts_ends_it_once_it_runs(tmp_path):
    compute = _compute(tmp_path)
    inst = _new()
    real_start = compute.driver.start

    def start_with_a_delete_meanwhile(instance):
        real_start(instance)
        assert compute.delete(inst)["state"] == "deleted"  # asked while starting

    compute.driver.start = start_with_a_delete_meanwhile
    rec = compute.build(inst, {"VCPU": 1})
    assert rec["state"] == "failed" and "deleted while it was starting" in rec["reason"]
    assert compute.show(inst)["state"] == "deleted"
    assert compute.counts()["running"] == 0
