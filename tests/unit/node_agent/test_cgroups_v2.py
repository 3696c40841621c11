"""The cgroup v2 layout, on a tree of plain files shaped as the kernel's
(these machines have v1, which tests/functional/agent runs for real): the
controllers enabled from the root down, the claim written as cpu.max and
memory.max, read back, and the OOM kill count from memory.events."""

import os

import pytest

from node_agent import cgroups


def _v2_tree(root, parent):
    os.makedirs(os.path.join(root, parent))
    for path in (root, os.path.join(root, parent)):
        with open(os.path.join(path, "cgroup.controllers"), "w") as f:
            f.write("cpuset cpu io memory pids\n")
        open(os.path.join(path, "cgroup.subtree_control"), "w").close()


def test_a_v2_group_holds_the_claim_and_reads_it_back(tmp_path):
    root = str(tmp_path)
    _v2_tree(root, "joule")
    tree = cgroups.Tree(root, "joule")
    assert tree.version == cgroups.V2
    # The kernel takes one "+controller" per write; the file keeps the last here.
    assert open(tmp_path / "joule" / "cgroup.subtree_control").read() in ("+cpu", "+memory")
    group = tree.create("inst-1", 1.5, 256)
    assert open(tmp_path / "joule" / "inst-1" / "cpu.max").read() == "150000 100000"
    assert open(tmp_path / "joule" / "inst-1" / "memory.max").read() == str(256 * 2**20)
    assert group.limits() == cgroups.Limits(150_000, 100_000, 256 * 2**20)
    assert (group.limits().vcpus, group.limits().memory_mb) == (1.5, 256)
    assert group.procs_files() == [str(tmp_path / "joule" / "inst-1" / "cgroup.procs")]
    (tmp_path / "joule" / "inst-1" / "memory.events").write_text(
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"
    )
    assert group.oom_kills() == 1
    assert tree.names() == ["inst-1"]
    with pytest.raises(cgroups.CgroupError, match="exists already"):
        tree.create("inst-1", 1, 64)


def test_a_v2_tree_without_the_memory_controller_is_refused(tmp_path):
    root = str(tmp_path)
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    with pytest.raises(cgroups.CgroupError, match=r"controllers \['memory'\] are not available"):
        cgroups.Tree(root, "joule")


@pytest.mark.parametrize("parent", ["/abs", "../up", ""])
def test_a_parent_outside_the_tree_is_refused(tmp_path, parent):
    _v2_tree(str(tmp_path), "joule")
    with pytest.raises(cgroups.CgroupError, match="relative path"):
        cgroups.Tree(str(tmp_path), parent)
