"""ComputeFilter: hosts that may not take work, as nova's ComputeFilter.

A host is dropped when an operator marked it unschedulable, or when its node
agent has not been heard from for more than ``[scheduler] service_down_time``
seconds (nova's option and default, 60). Only nodes that ever reported a
heartbeat can be down: a node loaded from an inventory file, which no agent
runs on, stays schedulable. A node whose agent reports again is schedulable
again at once. The age is placement's (the database's clock), so no clock
skew between machines makes a live node look dead.

A node the power controller suspended is not up either ([power]
suspend_enabled: its twin's power state is suspending, off or waking):
placement leaves such nodes out by their power-state trait
(``root_required=!CUSTOM_POWER_STATE_...``), so a night with most of the
cluster asleep does not fill the candidate pages with nodes only dropped
here, and the twin's state is still checked, since anyone may change a
provider's traits until the controller's next write.
"""

from joule import vocabulary

UNSCHEDULABLE = "host is marked unschedulable"
DOWN = "its node agent has not reported within [scheduler] service_down_time (host down)"
ASLEEP = "the power controller suspended it (power state suspending, off or waking)"
ASLEEP_TRAITS = frozenset(vocabulary.POWER_STATE_TRAITS[s] for s in vocabulary.NOT_ON)


class ComputeFilter:
    name = "ComputeFilter"
    reason = UNSCHEDULABLE
    # Every request leaves sleeping nodes out: not repeated in each report.
    explain_exclusion = False

    def node_fields(self, spec):
        return {"unschedulable", "heartbeat_age", "power_state"}

    def root_forbidden_traits(self, spec):
        return set(ASLEEP_TRAITS)

    def host_passes(self, host, spec):
        return (
            not host.unschedulable and not host.down and host.power_state not in vocabulary.NOT_ON
        )

    def explain(self, removed):
        """The reason of a NoValidHost, from the hosts this filter removed."""
        asleep = sum(1 for h in removed if h.power_state in vocabulary.NOT_ON)
        down = sum(1 for h in removed if h.down and not h.unschedulable)
        parts = [
            (UNSCHEDULABLE, sum(1 for h in removed if h.unschedulable)),
            (DOWN, down),
            (ASLEEP, asleep),
        ]
        parts = [(text, n) for text, n in parts if n]
        if len(parts) <= 1:
            return parts[0][0] if parts else UNSCHEDULABLE
        return ", or ".join(f"{text} ({n})" for text, n in parts)
