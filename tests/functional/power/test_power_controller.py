"""End to end: the power controller against a live placement over HTTP.

A node running a performance consumer, planned eco, becomes draining (with
performance caps, the eco profile trait, and a schedulable class that keeps
new performance work off it while standard work still lands) and turns eco
once the consumer's allocations are gone. At every step the metrics agree
with the twins placement stores.
"""

import json
import types

from joule import placement_client
from joule.placement_client import url_path
from powerpolicy import cmd
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from powerpolicy import metrics as metrics_mod
from tests import builders
from tests.conftest import new_uuid

CPU = "AMD EPYC 9655 96-Core Processor"


def _register(client, db, name, labels=None):
    rp = builders.create_provider(db, name=name)
    builders.set_inventory(db, rp, "VCPU", 64)
    builders.set_inventory(db, rp, "MEMORY_MB", 65536)
    client.put_node(rp, cell="cell1", labels=labels or {"role": "worker"})
    client.put_hardware(
        rp, {"cpu_model": CPU, "gpu_count": 0, "cpu_min_cap_watts": 150, "cpu_max_cap_watts": 400}
    )
    return rp


def _stored(client):
    return {n["name"]: n for n in client.list_nodes()}


def _assert_metrics_match_twins(metrics, client):
    per_family = {}
    for node in client.list_nodes():
        family = f"cpu:{node['hardware']['cpu_model']}"
        entry = per_family.setdefault(family, [0, 0])
        entry[0] += 1
        entry[1] += node["twin"]["schedulable_class"] == "performance"
    for family, (nodes, perf) in per_family.items():
        assert metrics.value("joulie_policy_family_nodes", family=family) == nodes
        assert metrics.value("joulie_policy_family_performance_nodes", family=family) == perf
    draining = sum(n["twin"]["schedulable_class"] == "draining" for n in client.list_nodes())
    assert metrics.value("joulie_policy_draining_nodes") == draining


def _joulie_verdicts(api, performance):
    """What the scheduler's joulie filter says of each candidate host (node data)."""
    from scheduler.filters.joulie import JoulieFilter
    from scheduler.hosts import HostState

    resp = api.request(
        "GET",
        url_path("allocation_candidates"),
        params={"resources": "VCPU:1", "node_data": "true"},
    )
    nodes = resp.json()["nodes"]
    spec = types.SimpleNamespace(is_performance=performance)
    return {
        node["name"]: JoulieFilter().host_passes(
            HostState(uuid=uuid, name=node["name"], schedulable_class=node["schedulable_class"]),
            spec,
        )
        for uuid, node in nodes.items()
    }


def test_drain_then_eco_with_metrics_matching_twins(live_server, db):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    _register(api, db, "cn-a")
    b = _register(api, db, "cn-b")
    _register(api, db, "cn-infra", labels={"role": "infra"})
    conf = conf_mod.make_conf(overrides={"static_hp_frac": 1.0, "node_selector": "role=worker"})
    metrics = metrics_mod.Metrics()
    ctl = controller_mod.Controller(conf, api, metrics)

    first = ctl.tick()
    assert first.written == 2
    stored = _stored(api)
    assert stored["cn-infra"]["twin"] is None  # not selected, never touched
    assert {n: stored[n]["twin"]["schedulable_class"] for n in ("cn-a", "cn-b")} == {
        "cn-a": "performance",
        "cn-b": "performance",
    }
    _assert_metrics_match_twins(metrics, _OnlySelected(api))

    # A performance consumer runs on cn-b.
    consumer = new_uuid()
    _claim_for_performance(api, consumer, b)

    # Demand falls to one node: cn-b (second by name) is planned eco but drains.
    ctl.conf.set_override("static_hp_frac", 0.5, group="power")
    second = ctl.tick()
    assert second.written == 1
    twin_b = _stored(api)["cn-b"]["twin"]
    assert (twin_b["profile"], twin_b["schedulable_class"]) == ("eco", "draining")
    assert twin_b["cpu_cap_watts"] == 400.0  # performance caps until the work ends
    traits = api.request("GET", url_path("resource_providers", b, "traits")).json()
    assert "CUSTOM_POWER_PROFILE_ECO" in traits["traits"]
    assert "CUSTOM_POWER_PROFILE_PERFORMANCE" not in traits["traits"]
    assert _transitions(metrics, "performance", "draining", "deferred") == 1
    _assert_metrics_match_twins(metrics, _OnlySelected(api))
    # New performance work stays off the draining node; standard work still lands.
    assert _joulie_verdicts(api, performance=True) == {
        "cn-a": True,
        "cn-b": False,
        "cn-infra": True,
    }
    assert _joulie_verdicts(api, performance=False)["cn-b"] is True

    # Nothing changes while the consumer runs.
    assert ctl.tick().written == 0

    # The consumer goes away: cn-b turns eco with eco caps, the drain's end is counted.
    api.delete_allocations(consumer)
    third = ctl.tick()
    assert third.written == 1
    twin_b = _stored(api)["cn-b"]["twin"]
    assert (twin_b["profile"], twin_b["schedulable_class"]) == ("eco", "eco")
    assert twin_b["cpu_cap_watts"] == 240.0
    assert _transitions(metrics, "draining", "eco", "applied") == 1
    _assert_metrics_match_twins(metrics, _OnlySelected(api))


def _claim_for_performance(api, consumer, rp):
    """``consumer`` takes 2 VCPU of ``rp`` for performance work."""
    api.put_allocations(
        consumer,
        {"allocations": {rp: {"resources": {"VCPU": 2}}}},
        "p",
        "u",
        workload_class="performance",
    )


def _transitions(metrics, from_state, to_state, result):
    """joulie_policy_state_transitions_total of one transition and result."""
    return metrics.value(
        "joulie_policy_state_transitions_total",
        from_state=from_state,
        to_state=to_state,
        result=result,
    )


class _OnlySelected:
    """The placement client seen through the controller's selector (role=worker)."""

    def __init__(self, api):
        self.api = api

    def list_nodes(self):
        return [n for n in self.api.list_nodes() if n["labels"].get("role") == "worker"]


def test_pending_performance_builds_raise_demand(live_server, db):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    for i in range(4):
        _register(api, db, f"cn-{i}")
    conf = conf_mod.make_conf(
        overrides={
            "policy": "queue_aware_v1",
            "queue_hp_base_frac": 0.0,
            "queue_hp_min": 0,
            "queue_perf_per_hp_node": 1,
        }
    )
    ctl = controller_mod.Controller(conf, api)
    assert ctl.tick().hp_count == 1
    for _ in range(3):
        instance = new_uuid()
        assert api.create_build_request(
            instance,
            "req-1",
            "performance",
            {
                "version": "1.0",
                "request_id": "req-1",
                "instance_uuids": [instance],
                "workload_class": "performance",
                "resources": {"VCPU": 1},
                "project_id": "p",
                "user_id": "u",
            },
        )
    result = ctl.tick()
    assert (result.pending, result.hp_count) == (3, 3)
    assert sum(n["twin"]["profile"] == "performance" for n in api.list_nodes()) == 3


def test_a_tick_reads_every_page_of_nodes_and_usages(live_server, db, monkeypatch):
    """GET /nodes and GET /workload_usages page: at two a page, five nodes
    and three busy ones are still all the controller plans with."""
    from placement import paging

    monkeypatch.setattr(paging, "DEFAULT_LIMIT", 2)
    monkeypatch.setattr(placement_client, "LISTING_PAGE", 2)
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = [_register(api, db, f"cn-page-{i}") for i in range(5)]
    for rp in rps[1::2] + rps[4:]:
        api.put_allocations(
            new_uuid(),
            {"allocations": {rp: {"resources": {"VCPU": 1}}}},
            "p",
            "u",
            workload_class="performance",
        )
    gets = []
    real_json = api._json

    def counting(method, path, **kw):
        if method == "GET":
            gets.append(path.partition("?")[0])
        return real_json(method, path, **kw)

    api._json = counting
    conf = conf_mod.make_conf(overrides={"static_hp_frac": 0.2})
    result = controller_mod.Controller(conf, api).tick()
    assert (gets.count("/nodes"), gets.count("/workload_usages")) == (3, 2)
    assert result.running == 3 and result.written == 5
    assert sum(f["nodes"] for f in result.families.values()) == 5
    # The usages of the second page count too: no busy node turns eco.
    busy = {f"cn-page-{i}" for i in (1, 3, 4)}
    assert {n.name for n in result.nodes if n.running_performance} == busy
    assert all(
        n.desired["schedulable_class"] in ("performance", "draining")
        for n in result.nodes
        if n.name in busy
    )


def test_once_prints_the_tick(live_server, db, capsys, monkeypatch):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    _register(api, db, "cn-x")
    monkeypatch.setenv("OS_PLACEMENT__ENDPOINT_OVERRIDE", live_server.url)
    assert cmd.main(["--once", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["written"] == 1 and out["hp_count"] == 1 and out["repaired_traits"] == []
    assert api.list_nodes()[0]["twin"]["profile"] == "performance"


def _traits(api, rp):
    resp = api.request("GET", f"/resource_providers/{rp}/traits")
    assert resp.status_code == 200, resp.text
    return resp.json()


def _set_traits(api, rp, traits):
    """What any placement client may do behind the controller's back."""
    generation = _traits(api, rp)["resource_provider_generation"]
    resp = api.request(
        "PUT",
        f"/resource_providers/{rp}/traits",
        json={"traits": traits, "resource_provider_generation": generation},
    )
    assert resp.status_code == 200, resp.text


def _profile_traits(api, rp):
    return sorted(t for t in _traits(api, rp)["traits"] if t.startswith("CUSTOM_POWER_PROFILE_"))


def test_profile_traits_changed_behind_the_controller_are_put_back(live_server, db):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {name: _register(api, db, name) for name in ("cn-a", "cn-b", "cn-c", "cn-d")}
    conf = conf_mod.make_conf(overrides={"static_hp_frac": 0.5})
    metrics = metrics_mod.Metrics()
    ctl = controller_mod.Controller(conf, api, metrics)
    ctl.tick()
    before = _stored(api)
    assert [before[n]["twin"]["profile"] for n in sorted(rps)] == [
        "performance",
        "performance",
        "eco",
        "eco",
    ]
    # Behind the controller's back: a performance node advertised as eco, an eco
    # node stripped of its trait, one carrying both, another trait kept.
    _set_traits(api, rps["cn-a"], ["CUSTOM_POWER_PROFILE_ECO", "HW_CPU_X86_AVX2"])
    _set_traits(api, rps["cn-c"], [])
    _set_traits(api, rps["cn-d"], ["CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_PROFILE_PERFORMANCE"])
    untouched_generation = _traits(api, rps["cn-b"])["resource_provider_generation"]
    resp = api.request(
        "GET", "/resource_providers", params={"required": "CUSTOM_POWER_PROFILE_PERFORMANCE"}
    )
    assert sorted(rp["name"] for rp in resp.json()["resource_providers"]) == ["cn-b", "cn-d"]

    result = ctl.tick()
    assert sorted(result.repaired) == ["cn-a", "cn-c", "cn-d"]
    assert result.written == 3 and result.transitions == []
    assert metrics.value("joulie_policy_repaired_traits_total") == 3
    assert _profile_traits(api, rps["cn-a"]) == ["CUSTOM_POWER_PROFILE_PERFORMANCE"]
    assert "HW_CPU_X86_AVX2" in _traits(api, rps["cn-a"])["traits"]  # other traits stay
    assert _profile_traits(api, rps["cn-c"]) == ["CUSTOM_POWER_PROFILE_ECO"]
    assert _profile_traits(api, rps["cn-d"]) == ["CUSTOM_POWER_PROFILE_ECO"]
    # The twins say the same as before; the node whose trait was right was not written.
    after = _stored(api)
    for name in rps:
        same = {k: v for k, v in after[name]["twin"].items() if k != "generation"}
        assert same == {k: v for k, v in before[name]["twin"].items() if k != "generation"}
    assert after["cn-b"]["twin"]["generation"] == before["cn-b"]["twin"]["generation"]
    assert _traits(api, rps["cn-b"])["resource_provider_generation"] == untouched_generation
    resp = api.request(
        "GET", "/resource_providers", params={"required": "CUSTOM_POWER_PROFILE_PERFORMANCE"}
    )
    assert sorted(rp["name"] for rp in resp.json()["resource_providers"]) == ["cn-a", "cn-b"]

    # Repaired: the next tick writes nothing.
    again = ctl.tick()
    assert (again.written, again.repaired) == (0, [])
    assert metrics.value("joulie_policy_repaired_traits_total") == 3


def test_claim_between_the_usage_read_and_the_eco_write_fails_the_flip(live_server, db):
    """The power controller counts a node's performance work, then writes eco.
    A performance claim that lands in between (the node still performance)
    makes placement refuse the eco twin (409, nothing written); the next tick
    counts the claim and drains the node instead, so performance work never
    runs under eco caps."""
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    _register(api, db, "cn-a")
    b = _register(api, db, "cn-b")
    conf = conf_mod.make_conf(overrides={"static_hp_frac": 1.0, "node_selector": "role=worker"})
    ctl = controller_mod.Controller(conf, api, metrics_mod.Metrics())
    assert ctl.tick().written == 2
    ctl.conf.set_override("static_hp_frac", 0.5, group="power")  # cn-b planned eco

    consumer = new_uuid()
    real_usages = api.workload_usages

    def usages_then_a_claim(*args, **kwargs):
        counted = real_usages(*args, **kwargs)
        _claim_for_performance(api, consumer, b)
        return counted

    api.workload_usages = usages_then_a_claim
    before = _stored(api)["cn-b"]
    try:
        ctl.tick()
    except placement_client.Conflict as exc:
        assert exc.code == "placement.concurrent_update"
        assert b in exc.detail and "performance work" in exc.detail
    else:
        raise AssertionError("the eco write was not refused")
    finally:
        api.workload_usages = real_usages
    after = _stored(api)["cn-b"]
    assert after["twin"] == before["twin"]
    assert after["profile_traits"] == ["CUSTOM_POWER_PROFILE_PERFORMANCE"]

    assert ctl.tick().written == 1
    twin_b = _stored(api)["cn-b"]["twin"]
    assert (twin_b["profile"], twin_b["schedulable_class"]) == ("eco", "draining")
    assert twin_b["cpu_cap_watts"] == 400.0
    assert _stored(api)["cn-a"]["twin"]["schedulable_class"] == "performance"
    assert api.get_allocations(consumer)[0].keys() == {b}
