"""Fixtures of the agent's compute tests: a cgroup parent of its own in the
machine's real cgroup tree (v1 or v2, whichever the host has), removed
after; the tests run real processes in it."""

import os
import time
import uuid

import pytest

from node_agent import cgroups

CGROUP_ROOT = "/sys/fs/cgroup"


@pytest.fixture
def cgroup_parent():
    """A fresh parent group name, created by the driver, removed after."""
    reason = None
    if os.geteuid() != 0:
        reason = "creating cgroups needs root"
    else:
        try:
            cgroups.detect(CGROUP_ROOT)
        except cgroups.CgroupError as exc:
            reason = str(exc)
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires a writable cgroup tree: {reason}")
        pytest.skip(reason)
    parent = f"joule-test-{uuid.uuid4().hex[:10]}"
    yield parent
    version = cgroups.detect(CGROUP_ROOT)
    tops = (
        [CGROUP_ROOT]
        if version == cgroups.V2
        else [os.path.join(CGROUP_ROOT, c) for c in ("cpu", "memory")]
    )
    for top in tops:
        _remove_tree(os.path.join(top, parent))


def _remove_tree(base):
    """Kill what is left in every group under ``base`` (a test that failed
    half-way leaves instances, two levels down for the agents' parents),
    then remove the groups, deepest first."""
    if not os.path.isdir(base):
        return
    groups = [d for d, _subdirs, _files in os.walk(base, topdown=False)]
    for group in groups:
        try:
            with open(os.path.join(group, "cgroup.procs")) as procs:
                pids = procs.read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
    for group in groups:
        for _ in range(100):
            try:
                os.rmdir(group)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def agent_conf(tmp_path, parent, **overrides):
    from node_agent import conf as conf_mod

    values = {
        ("agent", "host"): "node-a",
        ("agent", "state_dir"): str(tmp_path / "state"),
        ("agent", "cgroup_root"): CGROUP_ROOT,
        ("agent", "cgroup_parent"): parent,
        ("agent", "start_grace"): 0.5,
        ("agent", "delete_grace"): 2.0,
    }
    values.update({("agent", k): v for k, v in overrides.items()})
    return conf_mod.make_conf([], default_config_files=[], overrides=values)
