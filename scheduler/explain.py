"""The "no valid host" explanation, said so that an operator can act on it.

Who removed how many hosts and why (the filters' records of the walk), what
placement left out for a filter (candidate_query), and when some instances
could be placed, how many, how many claims were lost to concurrent writers,
refused because a host turned eco, or ruled out by a server group.
"""

from scheduler import candidate_query
from scheduler.claim import PROFILE_CONFLICT
from scheduler.filters import compute


def no_valid_host(spec, seen, records, query=None, excluded=()):
    """The sentence for a request the walk's hosts cannot take at all."""
    head = (
        f"No valid host for request {spec.request_id} ({spec.workload_class}, "
        f"{spec.num_instances} instance(s))"
    )
    if excluded:
        head += "; " + "; ".join(excluded)
    if seen == 0:
        query = "&".join(f"{k}={v}" for k, v in _shown(query or spec.candidate_query()))
        return f"{head}: placement returned no candidates for {query}"
    parts = []
    for r in records:
        errors = r.get("errors", 0)
        if errors:
            parts.append(f"{r['name']} failed on {errors} host(s) ({r['error']})")
        if r["removed"] > errors:
            parts.append(f"{r['name']} removed {r['removed'] - errors} ({r['reason']})")
    left = records[-1]["after"] if records else seen
    detail = "; ".join(parts) if parts else "no filter removed any"
    return f"{head}: placement returned {seen} candidate host(s); {detail}; {left} left"


def partial(state, placed, walk, report, filters, lost=()):
    """The sentence for a request of which only ``placed`` instances fit."""
    races = report.data["races_lost"]
    base = no_valid_host(
        state, walk.seen, walk.records, excluded=candidate_query.explain_excluded(state, filters)
    )
    text = (
        f"{base}; could place {placed} of {state.num_instances} instance(s): "
        f"the remaining hosts lack capacity or were taken by concurrent claims "
        f"({races} race(s) lost)"
    )
    eco = report.data.get("profile_refusals", 0)
    if eco:
        text += (
            f"; {eco} of them refused by placement because the host is eco now "
            f"({PROFILE_CONFLICT}: performance work is not placed on eco nodes)"
        )
    group = state.group
    if group is not None:
        ruled_out = sum(1 for h in walk.passed if h.uuid not in lost and not group.allows(h.uuid))
        refused = report.data.get("group_refusals", 0)
        if ruled_out or refused:
            text += (
                f"; {group.describe()} ruled out {ruled_out} more host(s) "
                f"for the remaining instances and refused {refused} claim(s)"
            )
    return text


_ROUTINE = frozenset("!" + t for t in compute.ASLEEP_TRAITS)


def _shown(query):
    """The query as the operator should read it: without the sleeping-node
    exclusion every request carries (filters.compute)."""
    out = []
    for key, value in query:
        if key == "root_required":
            value = ",".join(t for t in value.split(",") if t not in _ROUTINE)
            if not value:
                continue
        out.append((key, value))
    return out
