"""ComputeFilter: hosts that may not take work, as nova's ComputeFilter.

A host is dropped when an operator marked it unschedulable, or when its node
agent has not been heard from for more than ``[scheduler] service_down_time``
seconds (nova's option and default, 60). Only nodes that ever reported a
heartbeat can be down: a node loaded from an inventory file, which no agent
runs on, stays schedulable. A node whose agent reports again is schedulable
again at once. The age is placement's (the database's clock), so no clock
skew between machines makes a live node look dead.
"""

UNSCHEDULABLE = "host is marked unschedulable"
DOWN = "its node agent has not reported within [scheduler] service_down_time (host down)"


class ComputeFilter:
    name = "ComputeFilter"
    reason = UNSCHEDULABLE

    def node_fields(self, spec):
        return {"unschedulable", "heartbeat_age"}

    def host_passes(self, host, spec):
        return not host.unschedulable and not host.down

    def explain(self, removed):
        """The reason of a NoValidHost, from the hosts this filter removed."""
        down = sum(1 for h in removed if h.down and not h.unschedulable)
        if not down:
            return UNSCHEDULABLE
        if down == len(removed):
            return DOWN
        return f"{UNSCHEDULABLE} ({len(removed) - down}), or {DOWN} ({down})"
