"""The three policies of Joulie's power controller: how many nodes stay in performance.

Each policy returns a ``Plan``: the requested slot count, the effective one
(after the family floor and the node cap of ``performance_set``) and the
desired profile of every eligible node. Plans are pure functions of their
inputs (rule_swap_v1 takes the clock as an argument), so the controller, the
dry run and the tests all see the same answer for the same inputs.
"""

import dataclasses
import math
import time

from joule import vocabulary
from powerpolicy import selection

STATIC_PARTITION = "static_partition"
QUEUE_AWARE_V1 = "queue_aware_v1"
RULE_SWAP_V1 = "rule_swap_v1"
POLICIES = (STATIC_PARTITION, QUEUE_AWARE_V1, RULE_SWAP_V1)

# What a twin's managed_by says about the policy that wrote it (Joulie's names).
MANAGED_BY = {
    STATIC_PARTITION: "static-partition-v1",
    QUEUE_AWARE_V1: "queue-aware-v1",
    RULE_SWAP_V1: "rule-swap-v1",
}


@dataclasses.dataclass(frozen=True)
class Plan:
    policy: str
    requested_hp_count: int
    performance: frozenset
    profiles: dict  # node name -> "performance" | "eco"

    @property
    def hp_count(self):
        """Nodes planned in performance (the effective slot count)."""
        return len(self.performance)

    def families(self, nodes):
        """{family: {"nodes": n, "performance": k}} sorted by family key."""
        out = {}
        for node in sorted(nodes, key=lambda c: c.family):
            entry = out.setdefault(node.family, {"nodes": 0, "performance": 0})
            entry["nodes"] += 1
            if node.name in self.performance:
                entry["performance"] += 1
        return out


def _plan(policy, nodes, requested, performance):
    profiles = {
        n.name: vocabulary.PERFORMANCE if n.name in performance else vocabulary.ECO for n in nodes
    }
    return Plan(policy, requested, frozenset(performance), profiles)


def static_partition(nodes, static_hp_frac):
    """hp_count = round(N * STATIC_HP_FRAC), split per family."""
    nodes = list(nodes)
    requested = selection.scaled_count(len(nodes), _clamp01(static_hp_frac))
    return _plan(STATIC_PARTITION, nodes, requested, selection.performance_set(nodes, requested))


def queue_hp_count(n, demand, base_frac, hp_min, hp_max, perf_per_hp_node):
    """queue_aware_v1's slot count before the family floor and node cap.

    max(round(N * base), ceil(P / per_node)) clamped to [hp_min, hp_max]; an
    hp_max <= 0 means "no upper bound but N", as in Joulie.
    """
    hp_min = max(0, int(hp_min))
    hp_max = n if hp_max <= 0 else int(hp_max)
    hp_max = max(hp_max, hp_min)
    per_node = max(1, int(perf_per_hp_node))
    base = selection.scaled_count(n, _clamp01(base_frac))
    need = math.ceil(max(0, int(demand)) / per_node)
    return min(max(max(base, need), hp_min), hp_max)


def queue_aware_v1(nodes, demand, base_frac, hp_min, hp_max, perf_per_hp_node):
    """Performance slots follow demand P (running + pending performance consumers)."""
    nodes = list(nodes)
    requested = queue_hp_count(len(nodes), demand, base_frac, hp_min, hp_max, perf_per_hp_node)
    return _plan(QUEUE_AWARE_V1, nodes, requested, selection.performance_set(nodes, requested))


def rule_swap_phase(interval_seconds, now=None):
    """0 or 1: which half-period of the swap the clock is in."""
    interval = int(interval_seconds) if interval_seconds and interval_seconds > 0 else 60
    now = time.time() if now is None else now
    return int(now // interval) % 2


def rule_swap_v1(nodes, interval_seconds, now=None):
    """Debug policy: the first or second node (by name) is eco, alternating each interval.

    A lone node alternates between eco and performance.
    """
    nodes = list(nodes)
    names = sorted(n.name for n in nodes)
    phase = rule_swap_phase(interval_seconds, now)
    performance = set(names)
    if len(names) == 1:
        if phase == 0:
            performance.clear()
    elif names:
        performance.discard(names[phase])
    return _plan(RULE_SWAP_V1, nodes, len(performance), performance)


@dataclasses.dataclass(frozen=True)
class PolicyOptions:
    """What a plan is made of besides its nodes and demand: the policy and its
    [power] options (``from_conf``), one object from the configuration to
    the policy."""

    policy: str
    static_hp_frac: float
    queue_hp_base_frac: float
    queue_hp_min: int
    queue_hp_max: int
    queue_perf_per_hp_node: int
    reconcile_interval: int  # rule_swap_v1's phase length

    @classmethod
    def from_conf(cls, power_conf):
        """The options of a [power] group (powerpolicy.conf), read by their names."""
        return cls(**{field.name: power_conf[field.name] for field in dataclasses.fields(cls)})


def build_plan(options, nodes, demand=0, now=None):
    """The plan of ``options.policy`` for ``nodes`` (selection.Candidate).

    :param demand: performance consumers running and pending (queue_aware_v1).
    :param now: the clock of rule_swap_v1 (default: time.time()).
    """
    if options.policy == STATIC_PARTITION:
        return static_partition(nodes, options.static_hp_frac)
    if options.policy == QUEUE_AWARE_V1:
        return queue_aware_v1(
            nodes,
            demand,
            options.queue_hp_base_frac,
            options.queue_hp_min,
            options.queue_hp_max,
            options.queue_perf_per_hp_node,
        )
    if options.policy == RULE_SWAP_V1:
        return rule_swap_v1(nodes, options.reconcile_interval, now)
    raise ValueError(f"unknown policy {options.policy!r}; choose one of {', '.join(POLICIES)}")


def _clamp01(value):
    return min(1.0, max(0.0, float(value)))
