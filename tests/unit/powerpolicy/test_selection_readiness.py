"""With idle nodes suspended, a family's performance slots go to the nodes
that can take performance work soonest (powerpolicy.selection readiness,
set by powerpolicy.controller.readiness)."""

from joule import vocabulary
from powerpolicy import controller
from powerpolicy import selection

PERF, ECO = vocabulary.PERFORMANCE, vocabulary.ECO


def _node(name, power_state=None, uuid=None):
    twin = {"profile": ECO}
    if power_state is not None:
        twin["power_state"] = power_state
    return {"name": name, "uuid": uuid or f"uuid-{name}", "twin": twin}


def _demand(running_by_node=None, usages=None):
    return controller.Demand(running_by_node or {}, 0, 0, usages or {})


def test_readiness_follows_power_state_and_what_runs():
    demand = _demand(
        running_by_node={"perf": 2},
        usages={"uuid-perf": {PERF: 2}, "uuid-busy": {vocabulary.STANDARD: 3}},
    )
    got = {
        name: controller.readiness(node, demand)
        for name, node in {
            "perf": _node("perf"),
            "idle": _node("idle"),
            "never-planned": {"name": "never-planned", "uuid": "uuid-np"},
            "waking": _node("waking", vocabulary.POWER_WAKING),
            "off": _node("off", vocabulary.POWER_OFF),
            "suspending": _node("suspending", vocabulary.POWER_SUSPENDING),
            "busy": _node("busy", vocabulary.POWER_ON),
        }.items()
    }
    assert got == {
        "perf": selection.READY_RUNNING_PERFORMANCE,
        "idle": selection.READY_ON_IDLE,
        "never-planned": selection.READY_ON_IDLE,
        "waking": selection.READY_WAKING,
        "off": selection.READY_ASLEEP,
        "suspending": selection.READY_ASLEEP,
        "busy": selection.READY_BUSY_STANDARD,
    }


def test_new_slots_go_to_the_readiest_nodes_and_current_ones_stay():
    nodes = [
        selection.Candidate("a-busy", "f", ECO, selection.READY_BUSY_STANDARD),
        selection.Candidate("b-off", "f", ECO, selection.READY_ASLEEP),
        selection.Candidate("c-idle", "f", ECO, selection.READY_ON_IDLE),
        selection.Candidate("d-perf-busy", "f", PERF, selection.READY_BUSY_STANDARD),
        selection.Candidate("e-waking", "f", ECO, selection.READY_WAKING),
    ]
    order = [c.name for c in selection.group_families(nodes)["f"]]
    # The current performance node first (no churn), then by readiness.
    assert order == ["d-perf-busy", "c-idle", "e-waking", "b-off", "a-busy"]
    assert selection.performance_set(nodes, 3) == {"d-perf-busy", "c-idle", "e-waking"}


def test_without_readiness_the_order_is_by_name_as_before():
    nodes = [selection.Candidate(n, "f", ECO) for n in ("c", "a", "b")]
    assert [c.name for c in selection.group_families(nodes)["f"]] == ["a", "b", "c"]
