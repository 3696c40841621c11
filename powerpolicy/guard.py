"""The downgrade guard: never throttle performance work that is already running.

A node the plan puts in eco while it still runs performance consumers gets
schedulable class ``draining``: its profile (and profile trait) is eco, so it
no longer counts as a performance node and the scheduler keeps new
performance work off it, but its twin keeps the *performance* caps until the
last performance consumer is gone. That transition is recorded as deferred.
When the count reaches zero the node becomes ``eco`` with eco caps, and the
end of the drain is recorded as an applied transition (draining -> eco).

The guard counts running consumers only; pending work is demand, not load.
"""

import dataclasses

from joule import vocabulary

APPLIED = "applied"
DEFERRED = "deferred"
UNKNOWN = "unknown"  # from_state of a node that has no twin yet


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the controller writes for one node, and the transition it makes."""

    name: str
    profile: str  # desired spec profile: performance | eco
    schedulable_class: str  # performance | eco | draining
    caps_profile: str  # whose caps the spec carries: performance while draining
    from_state: str  # previous schedulable class, or "unknown"
    result: str | None  # "applied", "deferred", or None when the state is unchanged

    @property
    def to_state(self):
        return self.schedulable_class

    @property
    def changed(self):
        return self.result is not None


def decide(name, planned_profile, running_performance, current_class=None):
    """The guard for one node.

    :param planned_profile: what the policy planned (performance | eco).
    :param running_performance: active performance consumers on the node.
    :param current_class: the schedulable class stored in its twin, or None.
    """
    from_state = current_class or UNKNOWN
    if planned_profile == vocabulary.PERFORMANCE:
        to_state, caps = vocabulary.PERFORMANCE, vocabulary.PERFORMANCE
    elif running_performance > 0:
        to_state, caps = vocabulary.DRAINING, vocabulary.PERFORMANCE
    else:
        to_state, caps = vocabulary.ECO, vocabulary.ECO
    if to_state == from_state:
        result = None
    elif to_state == vocabulary.DRAINING:
        result = DEFERRED
    else:
        result = APPLIED
    return Decision(name, planned_profile, to_state, caps, from_state, result)


def apply(plan, running, current_classes):
    """Decisions for every node of ``plan``.

    :param running: {node name: active performance consumers} (missing = 0).
    :param current_classes: {node name: stored schedulable class} (missing = no twin).
    """
    return [
        decide(name, profile, running.get(name, 0), current_classes.get(name))
        for name, profile in sorted(plan.profiles.items())
    ]
