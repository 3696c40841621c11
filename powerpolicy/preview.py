"""``power-controller --dry-run``: what the next tick would do, written nowhere.

The preview is the real tick's plan (``Controller.plan``: the same reads of
placement, the same policy, split and downgrade guard) stopped before the
write, so an operator who changes ``static_hp_frac`` or the policy sees the
exact moves the service would make:

- the nodes whose schedulable class would change, by the class they would
  move to (performance, eco, draining) and the class they leave;
- every node the downgrade guard would hold in ``draining``, with the
  performance consumers that hold it;
- the nodes whose profile trait would be put back;
- per hardware family: nodes, performance / draining / eco counts after the
  guard, and the watts the caps hold now and after the tick.

"The watts the caps hold" of a node is its CPU cap plus its per-GPU cap
times its GPUs, the power its capped parts may draw at most. A part without
a cap (the host CPU of a GPU node, any part of a node without a twin) adds
nothing; ``uncapped_now`` counts the nodes without a twin yet.
"""

from joule import vocabulary


def cap_watts(hardware, cpu_cap, gpu_cap):
    """The watts the caps of one node hold (0.0 when nothing is capped)."""
    total = 0.0
    if cpu_cap is not None:
        total += cpu_cap
    if gpu_cap is not None:
        total += gpu_cap * max(0, hardware.gpu_count)
    return total


def build(result):
    """The preview of a ``controller.TickResult`` from ``Controller.plan()`` (a dict)."""
    moves = {vocabulary.PERFORMANCE: [], vocabulary.ECO: [], vocabulary.DRAINING: []}
    draining = []
    families = {}
    for node in sorted(result.nodes, key=lambda n: n.name):
        decision = node.decision
        if decision.changed:
            moves[decision.to_state].append({"node": node.name, "from": decision.from_state})
        if decision.schedulable_class == vocabulary.DRAINING:
            draining.append({"node": node.name, "performance_consumers": node.running_performance})
        entry = families.setdefault(
            node.hardware.family,
            {
                "nodes": 0,
                vocabulary.PERFORMANCE: 0,
                vocabulary.DRAINING: 0,
                vocabulary.ECO: 0,
                "cap_watts_now": 0.0,
                "cap_watts_planned": 0.0,
                "uncapped_now": 0,
            },
        )
        entry["nodes"] += 1
        entry[decision.schedulable_class] += 1
        if node.twin is None:
            entry["uncapped_now"] += 1
        else:
            entry["cap_watts_now"] += cap_watts(
                node.hardware, node.twin.get("cpu_cap_watts"), node.twin.get("gpu_cap_watts")
            )
        entry["cap_watts_planned"] += cap_watts(
            node.hardware, node.desired["cpu_cap_watts"], node.desired["gpu_cap_watts"]
        )
    for entry in families.values():
        for key in ("cap_watts_now", "cap_watts_planned"):
            entry[key] = round(entry[key], 1)
    return {
        "dry_run": True,
        "policy": result.policy,
        "hp_count": result.hp_count,
        "requested_hp_count": result.requested_hp_count,
        "demand": {"running": result.running, "pending": result.pending},
        "nodes": len(result.nodes),
        "moves": moves,
        "draining": draining,
        "repair_traits": sorted(result.repaired),
        "families": dict(sorted(families.items())),
        "cap_watts": {
            "now": round(sum(f["cap_watts_now"] for f in families.values()), 1),
            "planned": round(sum(f["cap_watts_planned"] for f in families.values()), 1),
        },
    }


def _names(items, shown=20):
    more = len(items) - shown
    text = ", ".join(items[:shown])
    return text + (f" and {more} more" if more > 0 else "")


def format_text(preview):
    """The preview as lines for a terminal."""
    lines = [
        f"dry run, nothing written: policy {preview['policy']}, {preview['hp_count']} "
        f"performance nodes of {preview['nodes']} (requested {preview['requested_hp_count']}), "
        f"demand {preview['demand']['running']} running + {preview['demand']['pending']} "
        "pending performance consumers"
    ]
    for to_state, moved in preview["moves"].items():
        names = [f"{m['node']} (from {m['from']})" for m in moved]
        lines.append(f"would move to {to_state} ({len(moved)}): {_names(names) or '-'}")
    held = [f"{d['node']} ({d['performance_consumers']} running)" for d in preview["draining"]]
    lines.append(f"would drain, held by performance work ({len(held)}): {_names(held) or '-'}")
    lines.append(
        f"profile traits to put back ({len(preview['repair_traits'])}): "
        f"{_names(preview['repair_traits']) or '-'}"
    )
    width = max([len(f) for f in preview["families"]] + [len("total")])
    header = (
        f"{'family':<{width}}  {'nodes':>6}  {'performance':>11}  {'draining':>8}  "
        f"{'eco':>6}  {'cap W now':>12}  {'cap W planned':>13}"
    )
    lines.append(header)
    for family, entry in preview["families"].items():
        lines.append(
            f"{family:<{width}}  {entry['nodes']:>6}  {entry['performance']:>11}  "
            f"{entry['draining']:>8}  {entry['eco']:>6}  {entry['cap_watts_now']:>12,.1f}  "
            f"{entry['cap_watts_planned']:>13,.1f}"
        )
    total = preview["cap_watts"]
    lines.append(
        f"{'total':<{width}}  {preview['nodes']:>6}  {'':>11}  {'':>8}  {'':>6}  "
        f"{total['now']:>12,.1f}  {total['planned']:>13,.1f}"
    )
    return lines
