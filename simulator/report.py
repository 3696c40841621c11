"""What a comparison says: the summary dict, the terminal table, plots and an HTML report."""

import html
import math
import os

from joule import vocabulary

NONE_LABEL = "none"


def percentile(values, q):
    """The q-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def _r(value, digits=3):
    return None if value is None else round(value, digits)


def policy_summary(outcome, baseline_kwh, pue):
    slowdown = {}
    for wc in vocabulary.WORKLOAD_CLASSES:
        values = outcome.slowdowns[wc]
        waits = outcome.waits[wc]
        slowdown[wc] = {
            "completed": len(values),
            "p50": _r(percentile(values, 50)),
            "p95": _r(percentile(values, 95)),
            "max": _r(max(values) if values else None),
            "wait_p95_minutes": _r((percentile(waits, 95) or 0.0) / 60.0, 1),
        }
    saved = None
    if baseline_kwh:
        saved = round(100.0 * (baseline_kwh - outcome.it_kwh) / baseline_kwh, 2)
    families = sorted(outcome.families)
    extra = {}
    if outcome.options.get("suspend_enabled"):
        nodes = sum(outcome.families.values()) or 1
        days = max(outcome_hours(outcome), 1e-9) / 24.0
        extra = {
            "wakeups": outcome.wakeups,
            "suspends": outcome.suspends,
            "wakeups_per_node_day": round(outcome.wakeups / nodes / days, 3),
        }
    return {
        **extra,
        "label": outcome.label,
        "policy": outcome.policy,
        "options": outcome.options,
        "it_kwh": round(outcome.it_kwh, 1),
        "facility_kwh": round(outcome.it_kwh * pue, 1),
        # Drawn by nodes holding no work: the most that powering idle nodes
        # off could take from this row (less the few watts an off node draws).
        "idle_it_kwh": round(outcome.idle_kwh, 1),
        # The idle floor of the awake nodes beyond the fewest each family's
        # running work needed (simulator.ceiling): the most that packing
        # and suspending could take from this row's work, with migration
        # free and boots instant. The ceiling is this row's saving had
        # they taken all of it.
        "sleepable_it_kwh": round(outcome.sleepable_kwh, 1),
        "ceiling_saved_pct": _saved(baseline_kwh, outcome.it_kwh - outcome.sleepable_kwh),
        "held_share": {rc: round(v, 4) for rc, v in sorted(outcome.held_share.items())},
        # IT energy as Joulie's simulator counts it: the hosts' measured wall
        # power plus the GPU boards (simulator.power).
        "energy_saved_pct": saved,
        "jobs_submitted": outcome.submitted,
        "jobs_started": outcome.started,
        "jobs_completed": outcome.completed,
        "kwh_per_completed_job": (
            round(outcome.it_kwh / outcome.completed, 2) if outcome.completed else None
        ),
        "slowdown": slowdown,
        "performance_on_eco": outcome.performance_on_eco,
        "performance_on_eco_seconds": round(outcome.performance_on_eco_seconds, 1),
        "performance_nodes_over_time": {
            "hours": [round(s["t"] / 3600.0, 3) for s in outcome.samples],
            "families": {
                f: [s["performance_nodes"].get(f, 0) for s in outcome.samples] for f in families
            },
        },
        "power_kw_over_time": [round(s["watts"] / 1000.0, 2) for s in outcome.samples],
        "family_nodes": outcome.families,
        "scheduler_calls": outcome.scheduler_calls,
        "no_valid_host": outcome.no_valid_host,
    }


def outcome_hours(outcome):
    """The simulated hours of an outcome (its samples' last time)."""
    return (outcome.samples[-1]["t"] / 3600.0) if outcome.samples else 0.0


def summary(outcomes, meta, pue):
    base = next((o for o in outcomes if o.label == NONE_LABEL), None)
    baseline = base.it_kwh if base else None
    return {
        **meta,
        "pue": pue,
        "policies": [policy_summary(o, baseline, pue) for o in outcomes],
    }


# What makes two runs' outputs comparable: the same cluster, workload, caps.
WORKLOAD_KEYS = (
    "inventory",
    "nodes",
    "hours",
    "seed",
    "jobs",
    "trace",
    "warm_start",
    "tick_minutes",
    "cpu_eco_cap_pct",
    "gpu_eco_cap_pct",
    "pue",
)


class MergeError(ValueError):
    """Outputs that do not describe the same workload cannot be combined."""


def _saved(baseline, value):
    if not baseline:
        return None
    return round(100.0 * (baseline - value) / baseline, 2)


def _order(policy):
    if policy["label"] == NONE_LABEL:
        return (0, 0.0)
    suspended = 2 if policy["options"].get("suspend_enabled") else 0
    if policy["policy"] == "static_partition":
        return (1 + suspended, policy["options"].get("static_hp_frac") or 0.0)
    return (2 + suspended, 0.0)


def merge(outputs):
    """One comparison from the ``--json`` outputs of several runs of the same
    workload (so that a sweep can run a few policies at a time): the policies
    of all, each label once, none first and the static fractions in order,
    with the savings recomputed against the run labelled none."""
    if not outputs:
        raise MergeError("nothing to merge")
    first = outputs[0]
    policies = {}
    for number, data in enumerate(outputs, 1):
        if not isinstance(data, dict) or not isinstance(data.get("policies"), list):
            raise MergeError(f"output {number} is not a placement-sim --json object")
        for key in WORKLOAD_KEYS:
            if data.get(key) != first.get(key):
                raise MergeError(
                    f"output {number} is another workload: {key} {data.get(key)!r}, "
                    f"not {first.get(key)!r}"
                )
        for policy in data["policies"]:
            known = policies.get(policy["label"])
            if known is not None and known["it_kwh"] != policy["it_kwh"]:
                raise MergeError(
                    f"{policy['label']} differs between outputs ({known['it_kwh']} "
                    f"and {policy['it_kwh']} kWh): not the same code or workload"
                )
            policies.setdefault(policy["label"], dict(policy))
    merged = sorted(policies.values(), key=_order)
    base = policies.get(NONE_LABEL)
    for policy in merged:
        policy["energy_saved_pct"] = _saved(base and base["it_kwh"], policy["it_kwh"])
        if "sleepable_it_kwh" in policy:
            policy["ceiling_saved_pct"] = _saved(
                base and base["it_kwh"], policy["it_kwh"] - policy["sleepable_it_kwh"]
            )
    return {**{k: v for k, v in first.items() if k != "policies"}, "policies": merged}


def format_timings(outcomes, load_seconds, total_seconds):
    """Where the wall time went (stderr: not part of the deterministic output)."""
    lines = [f"wall time: {total_seconds:.1f} s (loading the inventory {load_seconds:.1f} s)"]
    for o in outcomes:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in o.wall.items())
        lines.append(
            f"  {o.label}: {parts}; {o.scheduler_calls} scheduler calls, "
            f"{o.no_valid_host} no valid host"
        )
    return "\n".join(lines)


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def _share(policy, rc):
    share = (policy.get("held_share") or {}).get(rc)
    return "-" if share is None else f"{100.0 * share:.1f} %"


def format_table(data):
    # Wide enough for every label: a sweep's '+suspend@3m' and '@10m'
    # columns must not be cut to the same name (26 without one that long).
    w = max([26] + [len(p["label"]) + 1 for p in data["policies"]])
    head = (
        f"{'policy':<{w}}{'IT kWh':>11}{'saved %':>9}{'jobs':>7}{'done':>7}"
        f"{'kWh/job':>9}{'perf p50/p95':>15}{'std p50/p95':>15}{'perf on eco':>13}"
    )
    lines = [
        f"{data['nodes']} nodes ({data['inventory']}), {data['hours']:g} h, seed "
        f"{data['seed']}, {data['jobs']} jobs; slowdown = run time / uncapped run time",
        head,
        "-" * len(head),
    ]
    for p in data["policies"]:
        perf, std = p["slowdown"][vocabulary.PERFORMANCE], p["slowdown"][vocabulary.STANDARD]
        lines.append(
            f"{p['label']:<{w}}{p['it_kwh']:>11.1f}{_fmt(p['energy_saved_pct'], '.1f'):>9}"
            f"{p['jobs_submitted']:>7}{p['jobs_completed']:>7}"
            f"{_fmt(p['kwh_per_completed_job'], '.1f'):>9}"
            f"{_fmt(perf['p50'], '.2f') + '/' + _fmt(perf['p95'], '.2f'):>15}"
            f"{_fmt(std['p50'], '.2f') + '/' + _fmt(std['p95'], '.2f'):>15}"
            f"{p['performance_on_eco']:>13}"
        )
    waits = [p for p in data["policies"] if "wakeups" in p]
    if waits:
        lines.append("")
        lines.append(
            f"{'policy':<{w}}{'perf wait p95':>15}{'std wait p95':>14}"
            f"{'suspends':>10}{'wake-ups':>10}{'per node-day':>14}{'idle kWh':>12}"
            f"{'ceiling %':>11}{'GPUs held':>11}{'cores held':>12}"
        )
        for p in data["policies"]:
            perf, std = p["slowdown"][vocabulary.PERFORMANCE], p["slowdown"][vocabulary.STANDARD]
            lines.append(
                f"{p['label']:<{w}}{_fmt(perf['wait_p95_minutes'], '.1f') + ' min':>15}"
                f"{_fmt(std['wait_p95_minutes'], '.1f') + ' min':>14}"
                f"{_fmt(p.get('suspends'), 'd'):>10}{_fmt(p.get('wakeups'), 'd'):>10}"
                f"{_fmt(p.get('wakeups_per_node_day'), '.3f'):>14}"
                f"{_fmt(p.get('idle_it_kwh'), '.1f'):>12}"
                f"{_fmt(p.get('ceiling_saved_pct'), '.1f'):>11}"
                f"{_share(p, 'PGPU'):>11}{_share(p, 'VCPU'):>12}"
            )
    if waits:
        lines.append(
            "idle kWh = IT energy of nodes holding no work (on, waking or off): "
            "the most that suspending idle nodes can save"
        )
        lines.append(
            "ceiling % = saved % had packing and suspending slept every awake node "
            "beyond the fewest each family's work needed (free migration, instant boots)"
        )
    lines.append("saved % = IT energy (hosts' wall power and GPU boards) saved vs none")
    if data.get("pue", 1.0) != 1.0:
        lines.append(f"facility energy = IT energy x PUE {data['pue']:g}")
    return "\n".join(lines)


# -- plots ---------------------------------------------------------------------

POWER_PNG = "power.png"
FAMILIES_PNG = "performance_nodes.png"
SLOWDOWN_PNG = "slowdown.png"
TRADEOFF_PNG = "tradeoff.png"
SUSPEND_SWEEP_PNG = "suspend_after.png"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot

    return pyplot


def plot_power(data, path):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    for p in data["policies"]:
        hours = p["performance_nodes_over_time"]["hours"]
        ax.plot(hours, p["power_kw_over_time"], label=p["label"], linewidth=1.5)
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("IT power (kW, mean per sample)")
    ax.set_title(f"IT power over time, {data['nodes']} nodes, seed {data['seed']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def plot_families(data, path):
    plt = _pyplot()
    policies = data["policies"]
    fig, axes = plt.subplots(
        len(policies),
        1,
        figsize=(9, 2.4 * len(policies) + 0.6),
        dpi=100,
        sharex=True,
        squeeze=False,
    )
    for ax, p in zip(axes[:, 0], policies, strict=True):
        series = p["performance_nodes_over_time"]
        for family, counts in series["families"].items():
            ax.step(series["hours"], counts, where="post", label=family, linewidth=1.2)
        ax.set_title(p["label"], fontsize=9)
        ax.set_ylabel("perf nodes")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=6, ncol=2)
    axes[-1, 0].set_xlabel("simulated time (h)")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def plot_slowdowns(outcomes, path):
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=100, squeeze=False)
    for ax, wc in zip(axes[0], vocabulary.WORKLOAD_CLASSES, strict=True):
        values = [o.slowdowns[wc] or [1.0] for o in outcomes]
        ax.boxplot(values, whis=(5, 95), showfliers=False)
        ax.set_xticks(
            range(1, len(outcomes) + 1),
            [o.label for o in outcomes],
            rotation=30,
            ha="right",
            fontsize=7,
        )
        ax.set_title(f"{wc} jobs: slowdown vs uncapped (box 25-75 %, whiskers 5-95 %)", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def tradeoff_points(data):
    """(fraction, IT saved %, std p50, std p95, perf p95 wait min)
    of each static_partition fraction, by fraction."""
    points = []
    for p in data["policies"]:
        std = p["slowdown"][vocabulary.STANDARD]
        if (
            p["policy"] != "static_partition"
            or p["label"] == NONE_LABEL
            or p["energy_saved_pct"] is None
            or std["p95"] is None
        ):
            continue
        points.append(
            (
                p["options"].get("static_hp_frac"),
                p["energy_saved_pct"],
                std["p50"],
                std["p95"],
                p["slowdown"][vocabulary.PERFORMANCE]["wait_p95_minutes"],
            )
        )
    return sorted(points)


def plot_tradeoff(data, path):
    """The STATIC_HP_FRAC trade-off, one point per static fraction: energy
    saved against standard work's p50 and p95 slowdown (left), and what each
    fraction saves and makes performance work wait (right)."""
    points = tradeoff_points(data)
    if not points:
        return False
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100)
    saved = [p[1] for p in points]
    for index, (name, marker) in ((2, ("p50", "s")), (3, ("p95", "o"))):
        left.plot([p[index] for p in points], saved, marker=marker, label=f"standard {name}")
    for frac, it_saved, _p50, p95, _wait in points:
        left.annotate(
            f"{frac:g}", (p95, it_saved), textcoords="offset points", xytext=(5, 4), fontsize=8
        )
    left.set_xlabel("standard jobs: slowdown vs uncapped")
    left.set_ylabel("IT energy saved vs no management (%)")
    left.set_title("energy against slowdown (labels: STATIC_HP_FRAC)", fontsize=9)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    fracs = [p[0] for p in points]
    right.plot(fracs, saved, marker="o", label="IT energy saved (%)")
    right.set_xlabel("STATIC_HP_FRAC")
    right.set_ylabel("energy saved vs no management (%)")
    right.grid(alpha=0.3)
    wait = right.twinx()
    wait.plot(
        fracs,
        [p[4] for p in points],
        color="tab:red",
        marker="x",
        linestyle="--",
        label="performance p95 wait (min)",
    )
    wait.set_ylabel("performance jobs: p95 wait (minutes)")
    wait.set_ylim(bottom=0)
    lines = right.get_legend_handles_labels()
    extra = wait.get_legend_handles_labels()
    right.legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=8)
    right.set_title("what each fraction saves and makes performance work wait", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def suspend_sweep_points(data):
    """{policy: [(suspend_after minutes, IT saved %, wake-ups per node-day,
    performance p95 wait min, standard p95 wait min, standard p95 slowdown)]}
    of the '+suspend' columns, by suspend_after; only policies swept over at
    least two values."""
    by_policy = {}
    for p in data["policies"]:
        options = p["options"]
        if not options.get("suspend_enabled") or p["energy_saved_pct"] is None:
            continue
        perf, std = p["slowdown"][vocabulary.PERFORMANCE], p["slowdown"][vocabulary.STANDARD]
        by_policy.setdefault(p["policy"], []).append(
            (
                options["suspend_after"] / 60.0,
                p["energy_saved_pct"],
                p.get("wakeups_per_node_day", 0.0),
                perf["wait_p95_minutes"],
                std["wait_p95_minutes"],
                std["p95"],
            )
        )
    return {
        policy: sorted(points)
        for policy, points in sorted(by_policy.items())
        if len({point[0] for point in points}) > 1
    }


def plot_suspend_sweep(data, path):
    """The suspend_after trade-off, one line per swept policy: energy saved
    and wake-ups per node-day (left; sooner saves more and wakes more), and
    how long performance and standard work wait at p95 (right)."""
    sweeps = suspend_sweep_points(data)
    if not sweeps:
        return False
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100)
    wear = left.twinx()
    for policy, points in sweeps.items():
        minutes = [p[0] for p in points]
        left.plot(minutes, [p[1] for p in points], marker="o", label=f"{policy}: IT saved (%)")
        wear.plot(
            minutes,
            [p[2] for p in points],
            marker="x",
            linestyle="--",
            label=f"{policy}: wake-ups per node-day",
        )
        right.plot(minutes, [p[3] for p in points], marker="o", label=f"{policy}: performance")
        right.plot(
            minutes, [p[4] for p in points], marker="s", linestyle="--", label=f"{policy}: standard"
        )
    left.set_xlabel("suspend_after (minutes idle before a node is suspended)")
    left.set_ylabel("IT energy saved vs no management (%)")
    wear.set_ylabel("wake-ups per node per day")
    wear.set_ylim(bottom=0)
    lines, extra = left.get_legend_handles_labels(), wear.get_legend_handles_labels()
    left.legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=8)
    left.set_title("energy saved and wear against suspend_after", fontsize=9)
    left.grid(alpha=0.3)
    right.set_xlabel("suspend_after (minutes)")
    right.set_ylabel("p95 wait (minutes)")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    right.set_title("how long work waits at p95", fontsize=9)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def write_plots(data, outcomes, directory):
    """The PNGs and ``index.html`` in ``directory``; returns the report's path."""
    os.makedirs(directory, exist_ok=True)
    plot_power(data, os.path.join(directory, POWER_PNG))
    plot_families(data, os.path.join(directory, FAMILIES_PNG))
    images = [
        (POWER_PNG, "IT power over time per policy"),
        (FAMILIES_PNG, "Performance nodes per family over time"),
    ]
    if outcomes is not None:  # merged outputs keep percentiles, not every job's slowdown
        plot_slowdowns(outcomes, os.path.join(directory, SLOWDOWN_PNG))
        images.append((SLOWDOWN_PNG, "Slowdown distributions per class"))
    if plot_tradeoff(data, os.path.join(directory, TRADEOFF_PNG)):
        images.append((TRADEOFF_PNG, "static_partition: energy saved against slowdown"))
    if plot_suspend_sweep(data, os.path.join(directory, SUSPEND_SWEEP_PNG)):
        images.append((SUSPEND_SWEEP_PNG, "suspend_after: energy saved against wear and waits"))
    path = os.path.join(directory, "index.html")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(_html(data, images))
    return path


def _html(data, images):
    esc = html.escape
    rows = []
    for p in data["policies"]:
        perf, std = p["slowdown"][vocabulary.PERFORMANCE], p["slowdown"][vocabulary.STANDARD]
        cells = [
            p["label"],
            f"{p['it_kwh']:.1f}",
            _fmt(p["energy_saved_pct"], ".1f"),
            str(p["jobs_submitted"]),
            str(p["jobs_completed"]),
            _fmt(p["kwh_per_completed_job"], ".1f"),
            f"{_fmt(perf['p50'], '.2f')} / {_fmt(perf['p95'], '.2f')}",
            f"{_fmt(std['p50'], '.2f')} / {_fmt(std['p95'], '.2f')}",
            str(p["performance_on_eco"]),
        ]
        rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    head = [
        "policy",
        "IT kWh",
        "saved %",
        "jobs",
        "completed",
        "kWh/job",
        "perf slowdown p50 / p95",
        "std slowdown p50 / p95",
        "perf on eco",
    ]
    figures = "\n".join(
        f'<h2>{esc(title)}</h2>\n<p><a href="{esc(name)}"><img src="{esc(name)}" '
        f'alt="{esc(title)}" style="max-width:100%"></a></p>'
        for name, title in images
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>placement-sim report</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}</style></head>
<body><h1>placement-sim: {esc(str(data["nodes"]))} nodes ({esc(data["inventory"])}),
{data["hours"]:g} h, seed {data["seed"]}, {data["jobs"]} jobs</h1>
<table><tr>{"".join(f"<th>{esc(h)}</th>" for h in head)}</tr>
{"".join(rows)}</table>
{figures}
</body></html>
"""
