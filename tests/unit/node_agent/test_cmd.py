"""node-agent's command line: the dry run and the exit statuses."""

from node_agent import cmd
from tests import node_trees
from tests import processes


def _argv(tmp_path, kind, *extra, **agent):
    proc, sys_ = node_trees.write(kind, tmp_path)
    conf = tmp_path / "agent.conf"
    lines = [
        "[agent]",
        "host = n1",
        f"procfs_root = {proc}",
        f"sysfs_root = {sys_}",
        "gpus = false",
    ]
    lines += [f"{k} = {v}" for k, v in agent.items()]
    lines += ["[placement]", f"endpoint_override = http://127.0.0.1:{processes.free_port()}"]
    lines += ["connect_retries = 0"]
    conf.write_text("\n".join(lines) + "\n")
    return ["--config-file", str(conf), *extra], sys_


def test_dry_run_prints_the_node_and_writes_nothing(tmp_path, capsys):
    argv, sys_ = _argv(tmp_path, "intel", "--once", "--dry-run")
    assert cmd.main(argv) == 0
    out = capsys.readouterr().out
    assert f"CPU: {node_trees.INTEL_MODEL} (GenuineIntel): 2 socket(s), 8 core(s)" in out
    assert "memory: 524288 MiB" in out
    assert "RAPL intel-rapl:0 package-0: limit 270 W, max 270 W, min ? W" in out
    assert "no GPU: NVML unavailable (disabled by [agent] gpus = false)" in out
    assert "would register root provider n1:" in out
    assert "VCPU: total 16, reserved 0" in out
    assert "placement not read (placement at http" in out
    assert node_trees.rapl_limit(sys_, 0) == node_trees.INTEL_MAX_UW


def test_dry_run_of_a_bare_node_says_no_rapl(tmp_path, capsys):
    argv, _ = _argv(tmp_path, "bare", "--dry-run")
    assert cmd.main(argv) == 0
    out = capsys.readouterr().out
    assert "no RAPL: no powercap package zone under /sys/class/powercap" in out
    assert "CPU caps: unsupported (no RAPL power limit and no cpufreq)" in out


def test_once_against_an_unreachable_placement_is_exit_3(tmp_path, capsys):
    argv, _ = _argv(tmp_path, "bare", "--once")
    assert cmd.main(argv) == 3
    assert "is unreachable" in capsys.readouterr().err


def test_bad_provider_config_and_missing_proc_are_exit_2(tmp_path, capsys):
    bad = tmp_path / "p.yaml"
    bad.write_text("meta: {schema_version: '9'}\n")
    argv, _ = _argv(tmp_path, "bare", "--once", provider_config=str(bad))
    assert cmd.main(argv) == 2
    assert "meta.schema_version" in capsys.readouterr().err
    argv, _ = _argv(tmp_path / "x", "bare", "--once", procfs_root=str(tmp_path / "nowhere"))
    assert cmd.main(argv) == 2
    assert "cannot discover the node: cannot read" in capsys.readouterr().err
