"""The exec driver with real processes in real cgroups: limits equal to the
claim (read back from the cgroup files), start failures, exits, the memory
limit, delete, and an agent restarted while its instances run."""

import time
import uuid

import pytest

from node_agent import cgroups
from node_agent import compute as compute_mod
from node_agent import drivers
from node_agent import instance_store
from node_agent.drivers import exec as exec_driver
from tests.functional.agent.conftest import agent_conf


def _compute(tmp_path, parent, gpus=(), **overrides):
    conf = agent_conf(tmp_path, parent, driver="exec", **overrides)
    store = instance_store.Store(conf.agent.state_dir)
    driver = drivers.load("exec", conf, store)
    return compute_mod.Compute(store, driver, gpu_indices=gpus, delete_grace=2.0)


def _wait_ended(compute, uuid_, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rec in compute.watch_once():
            if rec["instance_uuid"] == uuid_:
                return rec
        time.sleep(0.05)
    raise AssertionError(f"{uuid_} did not end within {timeout} s: {compute.show(uuid_)}")


def _sh(script, **env):
    return {"command": ["sh", "-c", script], "env": env}


def test_a_running_instance_has_its_claim_as_cgroup_limits(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    rec = compute.build(inst, {"VCPU": 2, "MEMORY_MB": 96}, _sh("sleep 30"))
    assert rec["state"] == "running"
    limits = compute.limits(inst)
    assert (limits.cpu_quota_us, limits.cpu_period_us) == (200_000, 100_000)
    assert limits.memory_bytes == 96 * 1024 * 1024
    # The command itself runs in the group, not only its supervisor.
    group = compute.driver.tree.find(inst)
    pids = group.pids()
    assert len(pids) >= 2  # the supervisor and the command (and its children)
    commands = {open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0] for p in pids}
    assert b"sleep" in commands
    ended = compute.delete(inst, grace=1.0)
    assert ended["state"] == "deleted"
    assert compute.driver.tree.find(inst) is None  # the group is gone
    for p in pids:
        assert exec_driver._pid_start(p) is None  # gone, or a zombie


def test_an_exit_0_is_finished_and_its_output_is_kept(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    rec = compute.build(
        inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 0.8; echo hello $WHO", WHO="you")
    )
    assert rec["state"] == "running"
    ended = _wait_ended(compute, inst)
    assert (ended["state"], ended["exit_status"], ended["reason"]) == ("finished", 0, None)
    with open(ended["log_path"]) as log:
        assert log.read().strip() == "hello you"
    assert compute.driver.tree.find(inst) is None


def test_a_command_that_fails_at_start_fails_the_build_and_leaves_nothing(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    rec = compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("echo broken config >&2; exit 1"))
    assert rec["state"] == "failed"
    assert "exit status 1 within 0.5 s of its start: broken config" in rec["reason"]
    assert compute.show(inst) is None
    assert compute.driver.tree.find(inst) is None
    assert compute.store.load_all() == ([], [])
    # The same instance can be built again (on another host, or here).
    assert compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 5"))["state"] == "running"
    compute.delete(inst, grace=0.5)


@pytest.mark.parametrize(
    "workload, reason",
    [
        ({"command": ["no-such-command-here"]}, "command 'no-such-command-here' not found"),
        (
            {"command": ["sleep", "1"], "cwd": "/no/such/dir"},
            "working directory /no/such/dir does not exist",
        ),
        (None, "the exec driver needs a workload with a command"),
    ],
)
def test_a_command_that_cannot_start_fails_the_build(tmp_path, cgroup_parent, workload, reason):
    compute = _compute(tmp_path, cgroup_parent)
    rec = compute.build(str(uuid.uuid4()), {"VCPU": 1, "MEMORY_MB": 64}, workload)
    assert rec["state"] == "failed" and reason in rec["reason"]


def test_a_later_non_zero_exit_is_errored_with_its_status(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    assert (
        compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 0.7; exit 3"))["state"]
        == "running"
    )
    ended = _wait_ended(compute, inst)
    assert (ended["state"], ended["exit_status"], ended["reason"]) == (
        "errored",
        3,
        "exit status 3",
    )


def test_the_memory_limit_kills_and_is_said_as_such(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    # Holds 200 MiB in a shell variable after the start window; the claim is 48.
    script = "sleep 0.7; python3 -c 'x = bytearray(200 * 1024 * 1024); import time; time.sleep(5)'"
    assert compute.build(inst, {"VCPU": 1, "MEMORY_MB": 48}, _sh(script))["state"] == "running"
    ended = _wait_ended(compute, inst, timeout=20)
    assert ended["state"] == "errored"
    assert ended["reason"].startswith("killed by its memory limit (48 MiB)")
    assert ended["exit_status"] == 137


def test_gpus_of_the_claim_are_the_visible_devices(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent, gpus=(0, 1, 2))
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    for inst in (first, second):
        rec = compute.build(
            inst,
            {"VCPU": 1, "MEMORY_MB": 64, "PGPU": 1},
            _sh('echo "$CUDA_VISIBLE_DEVICES"; sleep 30'),
        )
        assert rec["state"] == "running"
    assert [compute.show(i)["gpus"] for i in (first, second)] == [[0], [1]]
    third = compute.build(
        str(uuid.uuid4()), {"VCPU": 1, "MEMORY_MB": 64, "PGPU": 2}, _sh("sleep 1")
    )
    assert third["state"] == "failed" and "none free" in third["reason"]
    time.sleep(0.2)
    assert open(compute.show(second)["log_path"]).read().strip() == "1"
    for inst in (first, second):
        compute.delete(inst, grace=0.2)


def test_delete_sends_sigterm_then_sigkill_after_the_grace(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    stubborn = "trap 'echo got TERM' TERM; while :; do sleep 0.1; done"
    assert (
        compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, {"command": ["bash", "-c", stubborn]})[
            "state"
        ]
        == "running"
    )
    started = time.monotonic()
    ended = compute.delete(inst, grace=1.0)
    took = time.monotonic() - started
    assert ended["state"] == "deleted"
    assert 1.0 <= took < 5.0
    assert "got TERM" in open(ended["log_path"]).read()
    assert compute.driver.tree.find(inst) is None


def test_a_restarted_agent_finds_its_instances_and_how_the_others_ended(tmp_path, cgroup_parent):
    first = _compute(tmp_path, cgroup_parent)
    running, finishing, failing = (str(uuid.uuid4()) for _ in range(3))
    first.build(running, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 30"))
    first.build(finishing, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 0.8"))
    first.build(failing, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 0.8; exit 7"))
    # The agent is gone (its objects dropped, its children reparented in
    # the test process); a new one reads the records.
    del first
    time.sleep(1.5)
    second = _compute(tmp_path, cgroup_parent)
    alive, ended = second.recover()
    assert alive == [running]
    assert sorted(ended) == sorted([finishing, failing])
    assert second.show(finishing)["state"] == "finished"
    assert (second.show(failing)["state"], second.show(failing)["exit_status"]) == ("errored", 7)
    assert second.limits(running).memory_bytes == 64 * 1024 * 1024
    # Ended ones are reported until acknowledged, then forgotten.
    reported = {r["instance_uuid"] for r in second.watch_once()}
    assert reported == {finishing, failing}
    second.acknowledge([finishing, failing])
    assert second.watch_once() == []
    assert second.delete(running, grace=0.5)["state"] == "deleted"


def test_a_second_build_of_the_same_instance_starts_nothing(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 30"))
    before = compute.driver.tree.find(inst).pids()
    again = compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 30"))
    assert again["state"] == "running"
    assert compute.driver.tree.find(inst).pids() == before
    compute.delete(inst, grace=0.2)


def test_the_tree_is_refused_clearly_when_it_is_not_there(tmp_path):
    with pytest.raises(cgroups.CgroupError, match="no cgroup tree at"):
        cgroups.Tree(str(tmp_path), "joule")


def test_an_instance_found_again_after_a_restart_can_be_deleted(tmp_path, cgroup_parent):
    first = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    stubborn = "trap 'echo got TERM' TERM; while :; do sleep 0.1; done"
    first.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, {"command": ["bash", "-c", stubborn]})
    del first
    second = _compute(tmp_path, cgroup_parent)
    assert second.recover() == ([inst], [])
    ended = second.delete(inst, grace=0.3)
    assert ended["state"] == "deleted"
    assert second.driver.tree.find(inst) is None
    # Its record was saved (an end of a recovered instance must serialise).
    records, broken = second.store.load_all()
    assert broken == [] and [r.state for r in records] == ["deleted"]


def test_a_delete_after_the_command_exited_keeps_its_own_end(tmp_path, cgroup_parent):
    compute = _compute(tmp_path, cgroup_parent)
    inst = str(uuid.uuid4())
    assert (
        compute.build(inst, {"VCPU": 1, "MEMORY_MB": 64}, _sh("sleep 0.7; exit 5"))["state"]
        == "running"
    )
    time.sleep(1.5)
    ended = compute.delete(inst, grace=1.0)
    assert (ended["state"], ended["exit_status"]) == ("errored", 5)
