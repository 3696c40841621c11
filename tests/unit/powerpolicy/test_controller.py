"""The reconcile tick against a fake placement client (no HTTP, no database)."""

import pytest

from joule import placement_client as client_mod
from joule import vocabulary
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from powerpolicy import hardware
from powerpolicy import metrics as metrics_mod


def _node(
    name, family="cpu:EPYC", gpus=0, labels=None, reserved=False, unschedulable=False, hardware=True
):
    hw = None
    if hardware:
        hw = {
            "cpu_model": family.split(":", 1)[1] if not gpus else "EPYC",
            "gpu_model": family.split(":", 1)[1] if gpus else None,
            "gpu_count": gpus,
            "cpu_min_cap_watts": 100.0 if not gpus else None,
            "cpu_max_cap_watts": 400.0 if not gpus else None,
            "gpu_min_cap_watts": 200.0 if gpus else None,
            "gpu_max_cap_watts": 400.0 if gpus else None,
        }
    return {
        "uuid": f"uuid-{name}",
        "name": name,
        "cell": None,
        "labels": labels or {},
        "reserved": reserved,
        "unschedulable": unschedulable,
        "generation": 0,
        "hardware": hw,
        "twin": None,
    }


class FakeClient:
    """Placement as the controller sees it; twin writes land in the node list."""

    def __init__(
        self,
        nodes,
        usages=None,
        pending=0,
        pending_missing=False,
        usages_missing=False,
        inventories=None,
    ):
        self.nodes = nodes
        self.usages = usages or {}
        self.pending = pending
        self.pending_missing = pending_missing
        self.usages_missing = usages_missing
        self.inventories = inventories or {}
        self.writes = []
        self.traits = {}  # uuid -> set of profile traits, kept in step by twin writes

    def list_nodes(self):
        return [{**n, "profile_traits": sorted(self.traits.get(n["uuid"], ()))} for n in self.nodes]

    def workload_usages(self):
        if self.usages_missing:
            raise client_mod.ServerError("GET", "/workload_usages", 501)
        return self.usages

    def count_build_requests(self, status=None, workload_class=None):
        assert (status, workload_class) == ("pending", "performance")
        if self.pending_missing:
            raise client_mod.NotFound("GET", "/build_requests", 404)
        return self.pending

    def provider_inventories(self, uuid):
        return self.inventories.get(uuid, {})

    def write_twins(self, twins):
        self.writes.append(twins)
        by_uuid = {n["uuid"]: n for n in self.nodes}
        for t in twins:
            node = by_uuid[t["uuid"]]
            gen = None if node["twin"] is None else node["twin"]["generation"]
            assert t["generation"] == gen
            twin = {k: v for k, v in t.items() if k not in ("uuid", "generation")}
            twin["generation"] = 0 if gen is None else gen + 1
            node["twin"] = twin
            self.traits[t["uuid"]] = {vocabulary.PROFILE_TRAITS[t["profile"]]}
        return twins


def _controller(client, **opts):
    conf = conf_mod.make_conf(overrides=opts)
    metrics = metrics_mod.Metrics()
    return controller_mod.Controller(conf, client, metrics), metrics


def _classes(client):
    return {n["name"]: n["twin"]["schedulable_class"] for n in client.nodes if n["twin"]}


def test_eligibility_selector_reserved_unschedulable():
    nodes = [
        _node("a", labels={"role": "worker"}),
        _node("b", labels={"role": "worker"}),
        _node("c", labels={"role": "infra"}),
        _node("d", labels={"role": "worker"}, reserved=True),
        _node("e", labels={"role": "worker"}, unschedulable=True),
    ]
    client = FakeClient(nodes)
    ctl, _ = _controller(client, node_selector="role=worker", static_hp_frac=0.5)
    result = ctl.tick()
    assert sorted(_classes(client)) == ["a", "b"]
    assert result.families == {"cpu:EPYC": {"nodes": 2, "performance": 1}}


def test_second_tick_writes_nothing_and_caps_follow_profile():
    nodes = [_node(f"cpu-{i}") for i in range(4)] + [
        _node(f"gpu-{i}", "gpu:H100", gpus=4) for i in range(4)
    ]
    client = FakeClient(nodes)
    ctl, metrics = _controller(client, static_hp_frac=0.5)
    first = ctl.tick()
    assert first.written == 8 and first.hp_count == 4
    twins = {n["name"]: n["twin"] for n in client.nodes}
    assert twins["cpu-0"]["cpu_cap_watts"] == 400.0 and twins["cpu-0"]["gpu_cap_watts"] is None
    assert twins["cpu-3"]["cpu_cap_watts"] == 240.0  # 60 % of 400
    assert twins["gpu-0"]["gpu_cap_watts"] == 400.0 and twins["gpu-0"]["cpu_cap_watts"] is None
    assert twins["gpu-3"]["gpu_cap_watts"] == 240.0
    assert twins["gpu-0"]["managed_by"] == "static-partition-v1"
    second = ctl.tick()
    assert second.written == 0 and client.writes[-1] == []
    assert metrics.value("joulie_policy_written_nodes_total") == 8
    assert metrics.value("joulie_policy_family_performance_nodes", family="gpu:H100") == 2


def test_demand_counts_pending_work():
    """Joulie gap: its demand ignored pending performance work."""
    nodes = [_node(f"n-{i:02d}") for i in range(10)]
    opts = dict(
        policy="queue_aware_v1", queue_hp_base_frac=0.0, queue_hp_min=0, queue_perf_per_hp_node=2
    )
    running_only = FakeClient([dict(n) for n in nodes], usages={"uuid-n-00": {"performance": 2}})
    ctl, _ = _controller(running_only, **opts)
    assert ctl.tick().hp_count == 1
    with_pending = FakeClient(
        [dict(n) for n in nodes], usages={"uuid-n-00": {"performance": 2}}, pending=6
    )
    ctl, metrics = _controller(with_pending, **opts)
    result = ctl.tick()
    assert (result.running, result.pending, result.hp_count) == (2, 6, 4)
    assert metrics.value("joulie_policy_performance_demand", source="pending") == 6


def test_missing_build_request_queue_counts_running_only():
    nodes = [_node(f"n-{i}") for i in range(4)]
    client = FakeClient(nodes, usages={"uuid-n-0": {"performance": 3}}, pending_missing=True)
    ctl, _ = _controller(
        client, policy="queue_aware_v1", queue_hp_base_frac=0.0, queue_perf_per_hp_node=1
    )
    assert ctl.tick().hp_count == 3


def test_missing_workload_usages_writes_nothing():
    client = FakeClient([_node("a")], usages_missing=True)
    ctl, metrics = _controller(client)
    with pytest.raises(client_mod.ServerError):
        ctl.tick()
    assert client.writes == []
    assert metrics.value("joulie_policy_reconciles_total", outcome="error") == 1
    # A failed tick is no success: the stalled-controller alert sees it.
    assert metrics.value("joulie_policy_last_reconcile_success_timestamp_seconds") == 0
    assert metrics.value("joulie_policy_reconcile_interval_seconds") == 60


def test_a_successful_tick_stamps_the_time():
    import time

    client = FakeClient([_node("a")])
    ctl, metrics = _controller(client, reconcile_interval=30)
    before = time.time()
    ctl.tick()
    stamp = metrics.value("joulie_policy_last_reconcile_success_timestamp_seconds")
    assert before <= stamp <= time.time()
    assert metrics.value("joulie_policy_reconcile_interval_seconds") == 30


def test_drain_lifecycle_metrics_agree_with_twins():
    nodes = [_node("a"), _node("b")]
    client = FakeClient(nodes)
    ctl, metrics = _controller(client, static_hp_frac=1.0)
    ctl.tick()
    assert _classes(client) == {"a": "performance", "b": "performance"}
    # Demand falls: b is planned eco but still runs performance work.
    ctl.conf.set_override("static_hp_frac", 0.5, group="power")
    client.usages = {"uuid-b": {"performance": 1}}
    result = ctl.tick()
    assert _classes(client) == {"a": "performance", "b": "draining"}
    b = client.nodes[1]["twin"]
    assert (b["profile"], b["cpu_cap_watts"]) == ("eco", 400.0)  # performance caps kept
    assert [(d.from_state, d.to_state, d.result) for d in result.transitions] == [
        ("performance", "draining", "deferred")
    ]
    assert metrics.value("joulie_policy_family_performance_nodes", family="cpu:EPYC") == 1
    assert metrics.value("joulie_policy_draining_nodes") == 1
    # Still running: nothing to write.
    assert ctl.tick().written == 0
    # Work done: b turns eco, and the end of the drain is counted.
    client.usages = {}
    ctl.tick()
    assert _classes(client) == {"a": "performance", "b": "eco"}
    assert client.nodes[1]["twin"]["cpu_cap_watts"] == 240.0
    assert (
        metrics.value(
            "joulie_policy_state_transitions_total",
            from_state="draining",
            to_state="eco",
            result="applied",
        )
        == 1
    )
    assert (
        metrics.value(
            "joulie_policy_state_transitions_total",
            from_state="performance",
            to_state="draining",
            result="deferred",
        )
        == 1
    )
    assert metrics.value("joulie_policy_draining_nodes") == 0


def test_a_trait_changed_behind_the_controller_is_put_back():
    client = FakeClient([_node(n) for n in "abcd"])
    ctl, metrics = _controller(client, static_hp_frac=0.5)
    ctl.tick()
    twins = {n["name"]: dict(n["twin"]) for n in client.nodes}
    assert [twins[n]["profile"] for n in "abcd"] == ["performance", "performance", "eco", "eco"]
    client.traits["uuid-a"] = {"CUSTOM_POWER_PROFILE_ECO"}  # swapped
    client.traits["uuid-c"] = set()  # removed
    client.traits["uuid-d"] = {"CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_PROFILE_PERFORMANCE"}
    result = ctl.tick()
    assert sorted(result.repaired) == ["a", "c", "d"] and result.written == 3
    assert [w["uuid"] for w in client.writes[-1]] == ["uuid-a", "uuid-c", "uuid-d"]
    for name in "acd":  # the twin is the truth: the same spec and class, rewritten
        node = next(n for n in client.nodes if n["name"] == name)
        assert {k: v for k, v in node["twin"].items() if k != "generation"} == {
            k: v for k, v in twins[name].items() if k != "generation"
        }
    assert client.traits == {
        "uuid-a": {"CUSTOM_POWER_PROFILE_PERFORMANCE"},
        "uuid-b": {"CUSTOM_POWER_PROFILE_PERFORMANCE"},
        "uuid-c": {"CUSTOM_POWER_PROFILE_ECO"},
        "uuid-d": {"CUSTOM_POWER_PROFILE_ECO"},
    }
    assert result.transitions == []  # a repair is no transition
    assert metrics.value("joulie_policy_repaired_traits_total") == 3
    again = ctl.tick()
    assert (again.written, again.repaired) == (0, [])


def test_a_placement_without_profile_traits_is_not_rewritten_every_tick(caplog):
    class Older(FakeClient):
        def list_nodes(self):
            return [
                {k: v for k, v in n.items() if k != "profile_traits"} for n in super().list_nodes()
            ]

    client = Older([_node(n) for n in "ab"])
    ctl, _ = _controller(client)
    assert ctl.tick().written == 2
    for _ in range(2):
        result = ctl.tick()
        assert (result.written, result.repaired) == (0, [])
    assert caplog.text.count("does not report profile_traits") == 1


def test_hardware_fallback_labels_then_inventory():
    nodes = [
        _node(
            "lab",
            hardware=False,
            labels={"nvidia.com/gpu.product": "L40S", "nvidia.com/gpu.count": "4"},
        ),
        _node("inv", hardware=False, labels={"nvidia.com/gpu.product": "L40S"}),
        _node("cpu", hardware=False, labels={"joulie.io/cpu.model": "EPYC 9655"}),
    ]
    client = FakeClient(nodes, inventories={"uuid-inv": {"PGPU": {"total": 2}}})
    ctl, _ = _controller(client)
    result = ctl.tick()
    assert result.families == {
        "cpu:EPYC 9655": {"nodes": 1, "performance": 1},
        "gpu:L40S": {"nodes": 2, "performance": 1},
    }


def test_service_loop_serves_metrics_and_survives_a_failed_tick():
    import threading
    import urllib.request

    stop = threading.Event()

    class Flaky(FakeClient):
        calls = 0

        def list_nodes(self):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise client_mod.PlacementUnreachable(
                    "GET", "/nodes", "http://p", "connection refused"
                )
            if Flaky.calls == 3:
                stop.set()
            return super().list_nodes()

    client = Flaky([_node("a"), _node("b")])
    ctl, metrics = _controller(client, reconcile_interval=1)
    server, thread = metrics.serve(0)
    try:
        ctl.conf.set_override("reconcile_interval", 1, group="power")
        stop_wait = stop.wait
        stop.wait = lambda timeout: stop_wait(0.01)  # do not sleep a whole interval
        ctl.run_forever(stop)
        body = (
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics").read().decode()
        )
    finally:
        server.shutdown()
    assert Flaky.calls == 3
    assert 'joulie_policy_reconciles_total{outcome="error"} 1.0' in body
    assert 'joulie_policy_reconciles_total{outcome="ok"} 2.0' in body
    assert 'joulie_policy_family_performance_nodes{family="cpu:EPYC"} 1.0' in body


def test_joulie_hw_labels_make_the_hardware_view():
    joulie = {
        "joulie.io/hw.cpu-model": "AMD EPYC 9654",
        "joulie.io/hw.cpu-sockets": "2",
        "joulie.io/hw.gpu-model": "NVIDIA H100 NVL",
        "joulie.io/hw.gpu-count": "8",
        # Older keys lose to Joulie's hw.* keys.
        "nvidia.com/gpu.product": "H100-OLD",
        "joulie.io/cpu.model": "old",
    }
    view = hardware.view_of(_node("g", hardware=False, labels=joulie))
    assert (view.cpu_model, view.cpu_sockets, view.gpu_model, view.gpu_count, view.source) == (
        "AMD EPYC 9654",
        2,
        "NVIDIA H100 NVL",
        8,
        "labels",
    )
    assert view.family == "gpu:NVIDIA H100 NVL"
    cpu_only = hardware.view_of(
        _node(
            "c",
            hardware=False,
            labels={"joulie.io/hw.cpu-model": "Intel Xeon 6980P", "joulie.io/hw.gpu-count": "0"},
        ),
        inventories=lambda uuid: pytest.fail("the count label answers; no inventory read"),
    )
    assert cpu_only.family == "cpu:Intel Xeon 6980P" and cpu_only.gpu_count == 0
    # A record without a CPU model takes it (and the sockets) from the labels.
    node = _node(
        "r", gpus=0, labels={"joulie.io/hw.cpu-model": "EPYC 9965", "joulie.io/hw.cpu-sockets": "1"}
    )
    node["hardware"]["cpu_model"] = None
    view = hardware.view_of(node)
    assert (view.family, view.cpu_sockets, view.cpu_max_cap_watts) == ("cpu:EPYC 9965", 1, 400.0)


def test_bad_count_labels_are_ignored_with_one_warning_per_node(caplog):
    labels = {
        "joulie.io/hw.cpu-model": "EPYC",
        "joulie.io/hw.gpu-count": "eight",
        "joulie.io/hw.cpu-sockets": "-2",
    }
    view = hardware.view_of(_node("x", hardware=False, labels=labels), inventories=lambda uuid: {})
    assert (view.gpu_count, view.cpu_sockets, view.source) == (0, None, "inventory")
    client = FakeClient([_node("x", hardware=False, labels=labels)])
    ctl, _ = _controller(client)
    caplog.set_level("WARNING", logger="powerpolicy.controller")
    for _ in range(3):
        ctl.tick()
    warnings = sorted(r.getMessage() for r in caplog.records if "label" in r.getMessage())
    assert warnings == [
        "node x: CPU sockets label '-2' is not a non-negative integer; ignored",
        "node x: GPU count label 'eight' is not a non-negative integer; ignored",
    ]


def test_a_node_with_no_known_hardware_is_its_own_family_warned_once(caplog):
    nodes = [
        _node("a", hardware=False, labels={"joulie.io/hw.cpu-model": "EPYC"}),
        _node("b", hardware=False, labels={"joulie.io/hw.cpu-model": "EPYC"}),
        _node("c", hardware=False),
        _node("d", hardware=False),
    ]
    client = FakeClient(nodes)
    ctl, metrics = _controller(client, static_hp_frac=0.25)
    caplog.set_level("WARNING", logger="powerpolicy.controller")
    result = ctl.tick()
    # Not a share of a "cpu:" family with an empty model: its own, with its own slot.
    assert result.families == {
        "cpu:EPYC": {"nodes": 2, "performance": 1},
        "unknown": {"nodes": 2, "performance": 1},
    }
    assert metrics.value("joulie_policy_family_nodes", family="unknown") == 2
    assert metrics.value("joulie_policy_family_nodes", family="cpu:") is None
    ctl.tick()
    ctl.tick()
    warnings = [r.getMessage() for r in caplog.records if "no known hardware" in r.getMessage()]
    assert len(warnings) == 2  # once per node, not per tick
    assert warnings[0].startswith("node c: ") and warnings[1].startswith("node d: ")
    # Its hardware becomes known, then is lost again: warned again.
    client.nodes[2]["labels"] = {"joulie.io/hw.cpu-model": "EPYC"}
    ctl.tick()
    client.nodes[2]["labels"] = {}
    ctl.tick()
    warnings = [r.getMessage() for r in caplog.records if "no known hardware" in r.getMessage()]
    assert len(warnings) == 3 and warnings[2].startswith("node c: ")


@pytest.mark.parametrize(
    "gpus, gpu_model, cpu_model, family",
    [
        (8, "H100", "EPYC", "gpu:H100"),
        (0, "H100", "EPYC", "cpu:EPYC"),
        (0, None, "EPYC 9654 96-Core", "cpu:EPYC 9654 96-Core"),
        (0, None, None, "unknown"),
        (0, None, "", "unknown"),
        (0, None, "  ", "unknown"),
        (None, None, None, "unknown"),
    ],
)
def test_family_key(gpus, gpu_model, cpu_model, family):
    assert vocabulary.family_key(gpus, gpu_model, cpu_model) == family


def test_nodes_whose_agent_is_silent_are_not_managed_and_reported(caplog):
    nodes = [_node("a"), _node("b"), _node("from-file"), _node("silent")]
    ages = {"a": 3.0, "b": 59.0, "from-file": None, "silent": 61.0}
    for n in nodes:
        n["heartbeat_age_seconds"] = ages[n["name"]]
    client = FakeClient(nodes)
    ctl, metrics = _controller(client, static_hp_frac=1.0, service_down_time=60)
    caplog.set_level("WARNING", logger="powerpolicy")
    result = ctl.tick()
    assert result.down == ["silent"]
    assert sorted(_classes(client)) == ["a", "b", "from-file"]
    assert metrics.value("joulie_policy_down_nodes") == 1
    ctl.tick()
    warned = [r.getMessage() for r in caplog.records if "no heartbeat" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("node silent: no heartbeat")
    # Its agent reports again: managed from the next tick, no operator needed.
    nodes[3]["heartbeat_age_seconds"] = 1.0
    result = ctl.tick()
    assert result.down == [] and "silent" in _classes(client)
    assert metrics.value("joulie_policy_down_nodes") == 0


def test_performance_instances_the_agent_reports_running_hold_the_guard():
    """An instance still running after its claim went (or before placement
    shows it) keeps its node's performance caps, as an allocation does."""
    nodes = [_node(f"n-{i}") for i in range(4)]
    client = FakeClient(nodes)
    ctl, _ = _controller(client, static_hp_frac=1.0)
    ctl.tick()  # every node performance
    reported = {"running": 2, "running_performance": 1}
    client.nodes[1]["twin"]["status"] = {"instances": reported}
    client.nodes[2]["twin"]["status"] = {"instances": {"running": 3, "running_performance": 0}}
    ctl, _ = _controller(client, static_hp_frac=0.0)
    result = ctl.tick()
    twins = {n["name"]: n["twin"] for n in client.nodes}
    assert twins["n-1"]["schedulable_class"] == "draining"
    assert twins["n-1"]["cpu_cap_watts"] == 400.0  # performance caps kept
    assert result.running == 0  # demand: the allocations' count, as before
    # Standard instances and a status without counts hold nothing (the
    # seed's one performance node per family stays).
    others = sorted(twins[name]["schedulable_class"] for name in ("n-0", "n-2", "n-3"))
    assert others == ["eco", "eco", "performance"]
