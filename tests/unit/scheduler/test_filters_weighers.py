import pytest

from joule.request_spec import load_request_spec
from scheduler import filters as filters_mod
from scheduler import weighers as weighers_mod
from scheduler.filters.joulie import JoulieFilter
from scheduler.hosts import HostState
from scheduler.weighers.normalize import normalize


def spec(**kw):
    data = {"version": "1.0", "resources": {"VCPU": 1}, "project_id": "p", "user_id": "u"}
    data.update(kw)
    return load_request_spec(data)


def hs(name, klass="performance", cell="c1", labels=None, unschedulable=False, ram=0, vcpu=0):
    return HostState(
        uuid=name,
        name=name,
        cell=cell,
        schedulable_class=klass,
        labels=labels or {},
        unschedulable=unschedulable,
        providers={name: {"MEMORY_MB": [ram, 0], "VCPU": [vcpu, 0]}},
    )


HOSTS = [hs("perf"), hs("eco", "eco"), hs("drain", "draining"), hs("bare", None)]


@pytest.mark.parametrize(
    "workload, expected",
    [
        ("performance", ["perf", "bare"]),
        ("standard", ["perf", "eco", "drain", "bare"]),
    ],
)
def test_joulie_filter(workload, expected):
    flt = JoulieFilter()
    kept = [h.name for h in HOSTS if flt.host_passes(h, spec(workload_class=workload))]
    assert kept == expected


def test_compute_cell_and_node_selector_filters():
    hosts = [
        hs("a", cell="c1", labels={"zone": "z1"}),
        hs("b", cell="c2", labels={"zone": "z1"}),
        hs("c", cell="c1", labels={"zone": "z2"}),
        hs("d", cell="c1", unschedulable=True),
    ]
    req = spec(cell="c1", node_selector={"zone": "z1"})
    left, records = filters_mod.run_filters(
        hosts,
        req,
        filters_mod.load(["ComputeFilter", "CellFilter", "NodeSelectorFilter", "JoulieFilter"]),
    )
    assert [h.name for h in left] == ["a"]
    assert [(r["name"], r["before"], r["removed"]) for r in records] == [
        ("ComputeFilter", 4, 1),
        ("CellFilter", 3, 1),
        ("NodeSelectorFilter", 2, 1),
        ("JoulieFilter", 1, 0),
    ]
    assert records[0]["reason"] == "host is marked unschedulable"


def test_filter_chain_stops_when_nothing_is_left():
    left, records = filters_mod.run_filters(
        [hs("eco", "eco")],
        spec(workload_class="performance"),
        filters_mod.load(["JoulieFilter", "ComputeFilter"]),
    )
    assert left == [] and [r["name"] for r in records] == ["JoulieFilter"]


def test_unknown_filter_fails_at_load():
    with pytest.raises(filters_mod.UnknownFilter, match="RamFilter"):
        filters_mod.load(["RamFilter"])


def test_normalize_contract():
    assert normalize([]) == []
    assert normalize([5, 5, 5]) == [0.0, 0.0, 0.0]
    assert normalize([0, 5, 10]) == [0.0, 0.5, 1.0]
    assert normalize([0, 5, 10], reverse=True) == [1.0, 0.5, 0.0]


def test_weights_are_normalized_then_multiplied(sconf):
    hosts = [hs("small", "eco", ram=1000, vcpu=4), hs("big", "performance", ram=3000, vcpu=4)]
    weighers = weighers_mod.load(sconf.filter_scheduler)
    out = weighers_mod.weigh_hosts(hosts, spec(), weighers)
    by_name = {h.name: (w, parts) for w, parts, h in out}
    # Resource weighers normalize against 0 (nova's minval): RAM big=3000/3000,
    # small=1000/3000; VCPU 4/4 for both; power: standard prefers eco (x10).
    assert by_name["big"][1] == {
        "RAMWeigher": 1.0,
        "CPUWeigher": 1.0,
        "DiskWeigher": 0.0,
        "PowerWeigher": 0.0,
        "BuildFailureWeigher": 0.0,
    }
    assert by_name["small"][0] == pytest.approx(10.0 + 1 / 3 + 1.0)
    # Performance work gets no power preference: RAM decides.
    perf = {
        h.name: w
        for w, _p, h in weighers_mod.weigh_hosts(
            hosts, spec(workload_class="performance"), weighers
        )
    }
    assert perf["big"] > perf["small"]


def test_negative_multiplier_stacks(sconf):
    from tests.unit.scheduler.conftest import make_conf

    conf = make_conf(
        ram_weight_multiplier=-1.0,
        power_weight_multiplier=0.0,
        cpu_weight_multiplier=0.0,
        disk_weight_multiplier=0.0,
        soft_affinity_weight_multiplier=0.0,
        build_failure_weight_multiplier=0.0,
        soft_anti_affinity_weight_multiplier=0.0,
    )
    weighers = weighers_mod.load(conf.filter_scheduler)
    assert [w.name for w, _m in weighers] == ["RAMWeigher"]
    out = weighers_mod.weigh_hosts([hs("a", ram=10), hs("b", ram=20)], spec(), weighers)
    best = max(out, key=lambda item: item[0])
    assert best[2].name == "a"


def _group_state(policy, hosts, rules=None, **kw):
    from scheduler import request_state
    from scheduler import server_groups

    group = server_groups.GroupView(
        {"uuid": "g", "policy": policy, "rules": rules or {}, "hosts": hosts}
    )
    return request_state.RequestState(spec(**kw), group)


def test_server_group_filters():
    hosts = [hs("a"), hs("b"), hs("c")]
    chain = filters_mod.load(["ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"])

    def names(state):
        return [h.name for h in filters_mod.run_filters(hosts, state, chain)[0]]

    assert names(_group_state("anti-affinity", {"a": ["m1"]})) == ["b", "c"]
    assert names(
        _group_state("anti-affinity", {"a": ["m1"], "b": ["m2", "m3"]}, {"max_server_per_host": 2})
    ) == ["a", "c"]
    assert names(_group_state("affinity", {"b": ["m1"]})) == ["b"]
    assert names(_group_state("affinity", {})) == ["a", "b", "c"]
    assert names(_group_state("soft-anti-affinity", {"a": ["m1"]})) == ["a", "b", "c"]
    # A request without a group (a plain spec, as older callers pass) passes all.
    assert [h.name for h in filters_mod.run_filters(hosts, spec(), chain)[0]] == ["a", "b", "c"]
    # The record names the filter and its reason, for NoValidHost.
    _left, records = filters_mod.run_filters(
        hosts, _group_state("anti-affinity", {"a": ["1"], "b": ["2"], "c": ["3"]}), chain
    )
    assert records[0]["removed"] == 3 and "anti-affinity group" in records[0]["reason"]


def test_soft_group_weighers_only_weigh_their_policy(sconf):
    hosts = [hs("a", ram=100, vcpu=4), hs("b", ram=100, vcpu=4)]
    weighers = weighers_mod.load(sconf.filter_scheduler)

    def best(state):
        return max(weighers_mod.weigh_hosts(hosts, state, weighers), key=lambda x: x[0])

    w, parts, host = best(_group_state("soft-affinity", {"b": ["m1", "m2"]}))
    assert host.name == "b" and parts["ServerGroupSoftAffinityWeigher"] == 1.0
    assert "ServerGroupSoftAntiAffinityWeigher" not in parts
    w, parts, host = best(_group_state("soft-anti-affinity", {"b": ["m1"]}))
    assert host.name == "a" and parts["ServerGroupSoftAntiAffinityWeigher"] == 1.0
    _w, parts, _h = best(spec())
    assert not any(name.startswith("ServerGroup") for name in parts)


def test_hint_filters():
    from scheduler import request_state

    hosts = [hs("a"), hs("b"), hs("c")]
    chain = filters_mod.load(["ForceHostsFilter", "SameHostFilter", "DifferentHostFilter"])

    def names(hints, providers=None):
        state = request_state.RequestState(
            spec(version="1.2", scheduler_hints=hints), hint_providers=providers
        )
        return [h.name for h in filters_mod.run_filters(hosts, state, chain)[0]]

    assert names({}) == ["a", "b", "c"]
    assert names({"force_hosts": ["b", "zz"]}) == ["b"]
    assert names({"force_nodes": ["c"]}) == ["c"]
    assert names({"force_hosts": ["a", "b"], "force_nodes": ["b"]}) == ["b"]
    uuid = "0f0e0d0c-0b0a-4909-8807-060504030201"
    assert names({"same_host": [uuid]}, {"same_host": {"b"}}) == ["b"]
    assert names({"same_host": [uuid]}, {"same_host": set()}) == []
    assert names({"different_host": [uuid]}, {"different_host": {"a", "c"}}) == ["b"]


def test_resource_weighers_normalize_against_zero_and_labels_override_multipliers(sconf):
    # Nearly full hosts: 10 and 12 MB free weigh 0.83 and 1.0, not 0 and 1.
    assert normalize([10, 12], minval=0) == [pytest.approx(10 / 12), 1.0]
    assert normalize([0, 0], minval=0) == [0.0, 0.0]
    weighers = [
        (w, m) for w, m in weighers_mod.load(sconf.filter_scheduler) if w.name == "RAMWeigher"
    ]
    a = hs("a", ram=100)
    b = hs("b", ram=90)
    out = {h.name: w for w, _p, h in weighers_mod.weigh_hosts([a, b], spec(), weighers)}
    assert out == {"a": 1.0, "b": pytest.approx(0.9)}
    # A node label overrides the multiplier on that node (nova: per aggregate).
    b.labels = {"scheduler.joule.io/ram_weight_multiplier": "3"}
    out = {h.name: w for w, _p, h in weighers_mod.weigh_hosts([a, b], spec(), weighers)}
    assert out == {"a": 1.0, "b": pytest.approx(2.7)}
    b.labels = {"scheduler.joule.io/ram_weight_multiplier": "lots"}  # ignored
    out = {h.name: w for w, _p, h in weighers_mod.weigh_hosts([a, b], spec(), weighers)}
    assert out["b"] == pytest.approx(0.9)


def _stacking_conf(**multipliers):
    from tests.unit.scheduler.conftest import make_conf

    return make_conf(
        power_weight_multiplier=10.0,
        ram_weight_multiplier=1.0,
        cpu_weight_multiplier=1.0,
        disk_weight_multiplier=1.0,
        **multipliers,
    )


def _ranked(hosts, conf, **spec_kw):
    weighers = weighers_mod.load(conf.filter_scheduler)
    out = weighers_mod.weigh_hosts(hosts, spec(**spec_kw), weighers)
    return [h.name for _w, _p, h in sorted(out, key=lambda item: -item[0])]


def _eco(name, used_vcpu, vcpu, cores_per_watt=None):
    host = hs(name, "eco", ram=100000, vcpu=vcpu)
    host.providers[name]["VCPU"][1] = used_vcpu
    host.cores_per_watt = cores_per_watt
    return host


def test_packing_puts_work_on_the_busiest_host_and_efficiency_picks_where_a_stack_starts():
    busy_old = _eco("busy-9654", 96, 192, 0.27)
    empty_old = _eco("empty-9654", 0, 192, 0.27)
    empty_new = _eco("empty-9965", 0, 384, 0.38)
    unknown = _eco("empty-unknown", 0, 384)
    hosts = [empty_old, unknown, empty_new, busy_old]
    # Shipped defaults: both off, the free-resource weighers spread (the
    # biggest empty hosts first).
    assert set(_ranked(hosts, _stacking_conf())[:2]) == {"empty-unknown", "empty-9965"}
    packing = _stacking_conf(packing_weight_multiplier=5.0)
    assert _ranked(hosts, packing)[0] == "busy-9654"
    both = _stacking_conf(packing_weight_multiplier=5.0, efficiency_weight_multiplier=2.0)
    order = _ranked(hosts, both)
    # A host already running work first; then the empty host of the family
    # doing the most work per watt, and one whose record says nothing last.
    assert order[:2] == ["busy-9654", "empty-9965"]
    assert order[-1] == "empty-unknown"
    # Performance work gets no efficiency preference.
    weighers = weighers_mod.load(both.filter_scheduler)
    parts = {
        h.name: p.get("EfficiencyWeigher")
        for _w, p, h in weighers_mod.weigh_hosts(
            hosts, spec(workload_class="performance"), weighers
        )
    }
    assert set(parts.values()) == {0.0}


def test_efficiency_weigher_reads_node_data_only_for_standard_work():
    weigher = weighers_mod.EfficiencyWeigher()
    assert weigher.node_fields(spec()) == {"cores_per_watt"}
    assert weigher.node_fields(spec(workload_class="performance")) == set()
