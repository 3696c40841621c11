"""``power-controller --dry-run`` against a live placement: the next tick's moves, unwritten.

The console script runs as its own process against placement served over
HTTP; everything placement stores (twins with their generations, profile
traits, provider generations) is compared before and after.
"""

import json
import os
import shutil
import subprocess

import pytest

from joule import placement_client
from joule import request_spec
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from tests import builders
from tests.conftest import new_uuid
from tests.specs import build_request_spec

CPU = "AMD EPYC 9655 96-Core Processor"
GPU = "NVIDIA H100 NVL"


def _register(api, db, name, gpus=0):
    rp = builders.create_provider(db, name=name)
    builders.set_inventory(db, rp, "VCPU", 64)
    api.put_node(rp, cell="cell1", labels={"role": "worker"})
    if gpus:
        api.put_hardware(
            rp,
            {
                "cpu_model": CPU,
                "gpu_model": GPU,
                "gpu_count": gpus,
                "gpu_min_cap_watts": 200,
                "gpu_max_cap_watts": 400,
            },
        )
    else:
        api.put_hardware(
            rp,
            {"cpu_model": CPU, "gpu_count": 0, "cpu_min_cap_watts": 150, "cpu_max_cap_watts": 400},
        )
    return rp


def _everything(api):
    """What placement stores that a dry run must not change."""
    nodes = api.list_nodes()
    providers = api.request("GET", "/resource_providers").json()
    return nodes, sorted((rp["uuid"], rp["generation"]) for rp in providers["resource_providers"])


def _dry_run(url, *args, **env):
    exe = shutil.which("power-controller") or pytest.fail("power-controller is not installed")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OS_POWER__")}
    environ.update({"OS_PLACEMENT__ENDPOINT_OVERRIDE": url, **env})
    proc = subprocess.run(
        [exe, "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def cluster(live_server, db):
    """Five CPU nodes and one 4-GPU node, all performance after a tick at
    STATIC_HP_FRAC 1.0; then a performance consumer on cn-2, a sixth CPU node
    that was never planned, and cn-0's profile trait changed behind the
    controller's back."""
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {f"cn-{i}": _register(api, db, f"cn-{i}") for i in range(4)}
    rps["gpu-0"] = _register(api, db, "gpu-0", gpus=4)
    conf = conf_mod.make_conf(overrides={"static_hp_frac": 1.0})
    controller_mod.Controller(conf, api).tick()
    rps["cn-4"] = _register(api, db, "cn-4")
    resp = api.request(
        "PUT",
        f"/allocations/{new_uuid()}",
        ok=(204,),
        json={
            "allocations": {rps["cn-2"]: {"resources": {"VCPU": 2}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
            "workload_class": "performance",
        },
    )
    assert resp.status_code == 204, resp.text
    traits = api.request("GET", f"/resource_providers/{rps['cn-0']}/traits")
    resp = api.request(
        "PUT",
        f"/resource_providers/{rps['cn-0']}/traits",
        json={
            "traits": ["CUSTOM_POWER_PROFILE_ECO"],
            "resource_provider_generation": traits.json()["resource_provider_generation"],
        },
    )
    assert resp.status_code == 200, resp.text
    return api, rps


def test_dry_run_json_shows_the_next_tick_and_writes_nothing(live_server, cluster):
    api, _ = cluster
    before = _everything(api)
    out = json.loads(_dry_run(live_server.url, "--json", OS_POWER__STATIC_HP_FRAC="0.2"))
    assert _everything(api) == before

    # 7 nodes * 0.2 = 1 slot, raised to one per family (2): cn-0 stays
    # performance (current performance first, then name), gpu-0 too.
    assert (out["dry_run"], out["policy"], out["hp_count"], out["requested_hp_count"]) == (
        True,
        "static_partition",
        2,
        1,
    )
    assert out["demand"] == {"running": 1, "pending": 0}
    assert out["nodes"] == 6
    assert out["moves"] == {
        "performance": [],
        "eco": [
            {"node": "cn-1", "from": "performance"},
            {"node": "cn-3", "from": "performance"},
            {"node": "cn-4", "from": "unknown"},
        ],
        "draining": [{"node": "cn-2", "from": "performance"}],
    }
    assert out["draining"] == [{"node": "cn-2", "performance_consumers": 1}]
    assert out["repair_traits"] == ["cn-0"]
    # Caps: CPU nodes 400 W performance, 240 W eco (60 %); the draining node
    # keeps 400 W; the GPU node holds 4 x 400 W; cn-4 has no twin (no cap) yet.
    assert out["families"] == {
        f"cpu:{CPU}": {
            "nodes": 5,
            "performance": 1,
            "draining": 1,
            "eco": 3,
            "cap_watts_now": 1600.0,
            "cap_watts_planned": 1520.0,
            "uncapped_now": 1,
        },
        f"gpu:{GPU}": {
            "nodes": 1,
            "performance": 1,
            "draining": 0,
            "eco": 0,
            "cap_watts_now": 1600.0,
            "cap_watts_planned": 1600.0,
            "uncapped_now": 0,
        },
    }
    assert out["cap_watts"] == {"now": 3200.0, "planned": 3120.0}

    # The preview is what the tick then does.
    conf = conf_mod.make_conf(overrides={"static_hp_frac": 0.2})
    result = controller_mod.Controller(conf, api).tick()
    assert sorted(result.repaired) == ["cn-0"]
    assert sorted((d.name, d.to_state) for d in result.transitions) == [
        ("cn-1", "eco"),
        ("cn-2", "draining"),
        ("cn-3", "eco"),
        ("cn-4", "eco"),
    ]
    after = json.loads(_dry_run(live_server.url, "--json", OS_POWER__STATIC_HP_FRAC="0.2"))
    assert after["moves"] == {"performance": [], "eco": [], "draining": []}
    assert after["repair_traits"] == []
    assert after["families"][f"cpu:{CPU}"]["cap_watts_now"] == 1520.0


def test_dry_run_counts_pending_work_for_queue_aware(live_server, cluster):
    api, _ = cluster
    for _ in range(3):
        instance = new_uuid()
        resp = api.request(
            "POST",
            "/build_requests",
            ok=(201,),
            json={
                "instance_uuid": instance,
                "request_id": "req-1",
                "workload_class": "performance",
                "spec": build_request_spec(
                    instance, "req-1", "performance", version=request_spec.REQUEST_SPEC_VERSION
                ),
            },
        )
        assert resp.status_code == 201, resp.text
    before = _everything(api)
    out = json.loads(
        _dry_run(
            live_server.url,
            "--json",
            OS_POWER__POLICY="queue_aware_v1",
            OS_POWER__QUEUE_HP_BASE_FRAC="0",
            OS_POWER__QUEUE_HP_MIN="0",
            OS_POWER__QUEUE_PERF_PER_HP_NODE="1",
        )
    )
    assert _everything(api) == before
    # P = 1 running + 3 pending: 4 slots; the CPU family gets 3 of them
    # (Sainte-Lague over sizes 5 and 1), kept on its current performance nodes.
    assert out["demand"] == {"running": 1, "pending": 3}
    assert out["hp_count"] == 4
    assert out["families"][f"cpu:{CPU}"]["performance"] == 3
    assert [m["node"] for m in out["moves"]["eco"]] == ["cn-3", "cn-4"]
    assert out["moves"]["draining"] == []  # cn-2 keeps performance: no drain


def test_dry_run_text_for_an_operator(live_server, cluster):
    api, _ = cluster
    before = _everything(api)
    text = _dry_run(live_server.url, OS_POWER__STATIC_HP_FRAC="0.2")
    assert _everything(api) == before
    lines = text.splitlines()
    assert lines[0] == (
        "dry run, nothing written: policy static_partition, 2 performance "
        "nodes of 6 (requested 1), demand 1 running + 0 pending performance "
        "consumers"
    )
    assert "would move to performance (0): -" in lines
    assert (
        "would move to eco (3): cn-1 (from performance), cn-3 (from performance), "
        "cn-4 (from unknown)"
    ) in lines
    assert "would move to draining (1): cn-2 (from performance)" in lines
    assert "would drain, held by performance work (1): cn-2 (1 running)" in lines
    assert "profile traits to put back (1): cn-0" in lines
    assert any(
        line.startswith(f"cpu:{CPU}") and line.split()[-2:] == ["1,600.0", "1,520.0"]
        for line in lines
    )
    assert lines[-1].split()[0] == "total" and lines[-1].split()[-2:] == ["3,200.0", "3,120.0"]


def test_dry_run_against_an_unreachable_placement_fails_cleanly():
    exe = shutil.which("power-controller")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OS_POWER__")}
    environ["OS_PLACEMENT__ENDPOINT_OVERRIDE"] = "http://127.0.0.1:9"
    proc = subprocess.run(
        [exe, "--dry-run", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        check=False,
    )
    # Exit 3: placement unreachable, as for every console script (joule/config.py).
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.startswith(
        "power-controller: error: dry run failed: placement at http://127.0.0.1:9 is unreachable"
    )


def test_once_against_an_unreachable_placement_exits_3():
    # --once, the service and --dry-run agree: placement unreachable is 3.
    exe = shutil.which("power-controller")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OS_POWER__")}
    environ["OS_PLACEMENT__ENDPOINT_OVERRIDE"] = "http://127.0.0.1:9"
    proc = subprocess.run(
        [exe, "--once"], capture_output=True, text=True, timeout=120, env=environ, check=False
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(
        "power-controller: error: reconcile failed: placement at http://127.0.0.1:9 is unreachable"
    )
