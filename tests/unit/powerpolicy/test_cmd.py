"""power-controller --dry-run: the plan of an inventory file, without a database."""

import json
import pathlib

import pytest

from joule import inventory
from powerpolicy import cmd

FIVE_K = str(pathlib.Path(__file__).parents[3] / "powerpolicy" / "data" / "cluster-nodes-5k.yaml")
PACKAGED_41 = str(pathlib.Path(cmd.__file__).parent / "data" / "cluster-nodes-41.yaml")


def _dry_run(capsys, *args):
    assert cmd.main(["--dry-run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_dry_run_5k_with_environment_override(capsys, monkeypatch):
    monkeypatch.setenv("OS_POWER__STATIC_HP_FRAC", "0.2")
    out = _dry_run(capsys, "--inventory", FIVE_K)
    assert list(out) == ["policy", "hp_count", "families", "performance_nodes"]
    assert out["policy"] == "static_partition" and out["hp_count"] == 1000
    assert len(out["performance_nodes"]) == 1000
    assert out["performance_nodes"] == sorted(out["performance_nodes"])
    for family, counts in out["families"].items():
        assert counts["performance"] * 5 == counts["nodes"], family
    assert out["families"]["gpu:NVIDIA H100 NVL"] == {"nodes": 1450, "performance": 290}


def test_dry_run_honours_config_file_and_policy(capsys, tmp_path):
    conf = tmp_path / "power.conf"
    conf.write_text(
        "[power]\npolicy = queue_aware_v1\nqueue_hp_base_frac = 0\n"
        "queue_perf_per_hp_node = 2\nqueue_hp_max = 12\n"
    )
    out = _dry_run(capsys, "--config-file", str(conf), "--inventory", PACKAGED_41, "--demand", "20")
    # ceil(20 / 2) = 10 slots, raised to the 8 families' floor -> 10.
    assert (out["policy"], out["hp_count"]) == ("queue_aware_v1", 10)
    out = _dry_run(
        capsys, "--config-file", str(conf), "--inventory", PACKAGED_41, "--demand", "500"
    )
    assert out["hp_count"] == 12  # QUEUE_HP_MAX


def test_dry_run_human_output(capsys, monkeypatch):
    monkeypatch.setenv("OS_POWER__STATIC_HP_FRAC", "0.2")
    assert cmd.main(["--dry-run", "--inventory", PACKAGED_41]) == 0
    text = capsys.readouterr().out
    assert text.startswith("policy static_partition: 8 performance nodes")
    assert "gpu:NVIDIA H100 NVL" in text


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--inventory", FIVE_K], {}, "--inventory needs --dry-run"),
        (["--dry-run", "--demand", "3"], {}, "--demand needs --dry-run --inventory"),
        (["--dry-run", "--inventory", "/nonexistent.yaml"], {}, "cannot read inventory"),
        (
            ["--dry-run", "--inventory", FIVE_K],
            {"OS_POWER__STATIC_HP_FRAC": "1.5"},
            "bad configuration: [power] static_hp_frac",
        ),
        (
            ["--dry-run", "--inventory", FIVE_K],
            {"OS_POWER__POLICY": "greedy"},
            "bad configuration: [power] policy",
        ),
    ],
)
def test_bad_input_exits_2_with_a_message(capsys, monkeypatch, args, env, message):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cmd.main(args) == 2
    assert message in capsys.readouterr().err


def test_inventory_errors_name_the_entry():
    with pytest.raises(inventory.InventoryError, match=r"nodes\[0\]: gpu_count is 2"):
        inventory.parse({"nodes": [{"node_name_prefix": "x", "gpu_count": 2, "product": ""}]})
    with pytest.raises(inventory.InventoryError, match="replicas must be a non-negative"):
        inventory.parse({"nodes": [{"node_name_prefix": "x", "replicas": -1}]})
    with pytest.raises(inventory.InventoryError, match="appears twice"):
        inventory.parse({"nodes": [{"node_name_prefix": "x"}, {"node_name_prefix": "x"}]})
    nodes = inventory.parse(
        {
            "nodes": [
                {
                    "node_name_prefix": "g",
                    "replicas": 2,
                    "gpu_count": 4,
                    "product": "L40S",
                    "cpu": "EPYC",
                }
            ]
        }
    )
    assert [(n.name, n.family) for n in nodes] == [("g-0", "gpu:L40S"), ("g-1", "gpu:L40S")]
