"""``placement-sim``: compare power policies on one workload, on a simulated clock.

Replays a day (``--hours``) of a seeded workload, or a recorded trace, through
placement (in-process, a temporary SQLite file per policy), the scheduler,
the conductor and the power controller, once per policy, and prints per
policy the IT energy, the energy saved against no management, the jobs
completed, kWh per completed job, the slowdown of each class against
uncapped, and the performance work that ran under eco caps (always 0: the
guard). ``--json`` adds the whole comparison as one JSON object on the last
line; ``--plots DIR`` writes PNG plots and ``DIR/index.html``.

    placement-sim --inventory 41 --hours 24 --seed 1 --json
    placement-sim --inventory 5k --static-hp-frac 0.1,0.2,0.3 --plots report/
"""

import argparse
import concurrent.futures
import dataclasses
import json
import logging
import multiprocessing
import os
import queue as queue_mod
import shutil
import sys
import tempfile
import time

import powerpolicy
from joule import config
from joule import inventory as inventory_mod
from joule import placement_client
from powerpolicy import policies
from simulator import cluster
from simulator import engine
from simulator import report
from simulator import workload as workload_mod

PROG = "placement-sim"
DATA = os.path.join(os.path.dirname(powerpolicy.__file__), "data")
INVENTORIES = {"41": "cluster-nodes-41.yaml", "5k": "cluster-nodes-5k.yaml"}
NONE = "none"
POLICY_CHOICES = (NONE, policies.STATIC_PARTITION, policies.QUEUE_AWARE_V1)


def _fractions(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be within [0, 1]: {text!r}")
    return values


def _minutes_list(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of minutes: {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"minutes must be 0 or more: {text!r}")
    return values


def _policies(text):
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [n for n in names if n not in POLICY_CHOICES]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"unknown policy {', '.join(bad) or text!r}; choose from {', '.join(POLICY_CHOICES)}"
        )
    return names


def _parser():
    p = config.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--inventory",
        default="41",
        help="41 or 5k (the inventories shipped in powerpolicy/data/) or a file "
        "in their YAML format (41)",
    )
    p.add_argument("--hours", type=float, default=24.0, help="simulated hours (24)")
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the workload and the scheduler's random picks (1)",
    )
    p.add_argument(
        "--trace",
        help="replay this JSON-lines trace instead of generating (format: simulator/workload.py)",
    )
    p.add_argument("--write-trace", metavar="FILE", help="write the workload as a trace")
    p.add_argument(
        "--policies",
        type=_policies,
        default=list(POLICY_CHOICES),
        help="comma-separated, from: none (every node performance), "
        "static_partition, queue_aware_v1 (all three)",
    )
    p.add_argument(
        "--static-hp-frac",
        type=_fractions,
        default=[0.2],
        help="static_partition's STATIC_HP_FRAC, one run per value: 0.1,0.2 (0.2)",
    )
    p.add_argument(
        "--queue-hp-base-frac",
        type=float,
        default=0.05,
        help="queue_aware_v1 base fraction (0.05, Joulie's exp02)",
    )
    p.add_argument(
        "--queue-hp-min",
        type=int,
        default=None,
        help="queue_aware_v1 minimum performance nodes (1%% of the nodes, 50 of 5,000 as in exp02)",
    )
    p.add_argument(
        "--queue-hp-max",
        type=int,
        default=None,
        help="queue_aware_v1 maximum performance nodes (80%% of the nodes, 4,000 "
        "of 5,000 as in exp02)",
    )
    p.add_argument(
        "--queue-perf-per-hp-node",
        type=int,
        default=3,
        help="queue_aware_v1 performance consumers per performance node (3)",
    )
    p.add_argument(
        "--cpu-eco-cap-pct",
        type=float,
        default=60.0,
        help="eco CPU cap, %% of the package maximum (60)",
    )
    p.add_argument(
        "--gpu-eco-cap-pct",
        type=float,
        default=60.0,
        help="eco GPU cap, %% of the maximum cap (60)",
    )
    p.add_argument(
        "--pue",
        type=float,
        default=1.0,
        help="facility factor: facility energy = IT energy x PUE (1.0)",
    )
    p.add_argument(
        "--load",
        type=float,
        default=workload_mod.Mix.load,
        help="generated work: mean share of GPUs and CPU-node cores busy (0.9: a batch "
        "cluster with a queue; 0.6 leaves headroom)",
    )
    p.add_argument(
        "--performance-share",
        type=float,
        default=workload_mod.Mix.performance_share,
        help="generated work: share of performance jobs (0.3)",
    )
    p.add_argument(
        "--cold-start",
        action="store_true",
        help="generated work: start with an empty cluster at 0:00 instead of the "
        "jobs of the day before still running then (simulator/workload.py)",
    )
    p.add_argument(
        "--tick-minutes",
        type=float,
        default=15.0,
        help="simulated minutes between power-controller ticks (15)",
    )
    p.add_argument(
        "--sample-minutes",
        type=float,
        default=15.0,
        help="simulated minutes between samples of power and nodes (15)",
    )
    p.add_argument(
        "--max-placement-results",
        type=int,
        default=100,
        help="scheduler: candidate hosts read per request before it stops "
        "(100; 0 reads every page)",
    )
    p.add_argument(
        "--suspend",
        action="store_true",
        help="beside each managed policy, the same policy with idle nodes suspended and "
        "woken for waiting work ([power] suspend_enabled) and work packed onto busy "
        "nodes (the packing weigher): the '+suspend' columns",
    )
    p.add_argument(
        "--packing",
        choices=("efficient", "busy"),
        default="efficient",
        help="suspend columns: 'busy' packs work onto the nodes already running the "
        "most (the packing weigher); 'efficient' (the default) also starts new stacks "
        "on the hardware doing the most work per watt (the efficiency weigher)",
    )
    p.add_argument(
        "--suspend-after",
        type=_minutes_list,
        default=[30.0],
        metavar="MINUTES[,MINUTES...]",
        help="suspend columns: minutes a node stays idle before it is suspended "
        "([power] suspend_after; 30). Several values sweep it: one column each. "
        "Idleness is seen at the controller's ticks (--tick-minutes, 15), so every "
        "value up to one tick suspends at the tick after a node is first seen idle.",
    )
    p.add_argument(
        "--min-spare-nodes",
        type=int,
        default=1,
        help="suspend columns: idle nodes kept on per family and profile (1)",
    )
    p.add_argument(
        "--boot-minutes",
        type=float,
        default=3.0,
        help="suspend columns: minutes a CPU node takes to boot (3); GPU nodes "
        "--gpu-boot-minutes (5)",
    )
    p.add_argument("--gpu-boot-minutes", type=float, default=5.0, help=argparse.SUPPRESS)
    p.add_argument(
        "--off-watts",
        type=float,
        default=10.0,
        help="suspend columns: watts an off node draws (its BMC; 10)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as one JSON object on the last line",
    )
    p.add_argument("--plots", metavar="DIR", help="write PNG plots and DIR/index.html")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="policies run at once, each in its own process on its own copy of the "
        "database (default: every policy at once, at most two per CPU, so that "
        "three policies on two CPUs share both to the end; 1 runs them one "
        "after the other in this process). The results do not depend on it.",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="OUTPUT",
        help="simulate nothing: combine the --json outputs (files whose last line "
        "is the JSON object) of earlier runs of the same workload into one "
        "comparison, savings against their none run (a sweep run a few "
        "policies at a time); with --plots, every plot but the slowdown "
        "distributions",
    )
    return p


def _check(args):
    if not args.hours > 0:
        raise config.ConfigError("--hours must be > 0")
    if not 0 < args.tick_minutes <= 24 * 60 or not 0 < args.sample_minutes <= 24 * 60:
        raise config.ConfigError("--tick-minutes and --sample-minutes must be within (0, 1440]")
    if not 0 < args.load <= 1 or not 0 <= args.performance_share <= 1:
        raise config.ConfigError(
            "--load must be within (0, 1] and --performance-share within [0, 1]"
        )
    for name in ("cpu_eco_cap_pct", "gpu_eco_cap_pct"):
        if not 1 <= getattr(args, name) <= 100:
            raise config.ConfigError(f"--{name.replace('_', '-')} must be within [1, 100]")
    if args.pue < 1:
        raise config.ConfigError("--pue must be >= 1")
    if args.workers is not None and args.workers < 1:
        raise config.ConfigError("--workers must be >= 1")
    if (
        not 0 <= args.queue_hp_base_frac <= 1
        or args.queue_perf_per_hp_node < 1
        or args.max_placement_results < 0
    ):
        raise config.ConfigError(
            "--queue-hp-base-frac must be within [0, 1], "
            "--queue-perf-per-hp-node >= 1, --max-placement-results >= 0"
        )


def inventory_path(name):
    return os.path.join(DATA, INVENTORIES[name]) if name in INVENTORIES else name


def policy_specs(args, nodes):
    specs = []
    for name in args.policies:
        if name == NONE:
            # No management: every node performance, through the same controller.
            specs.append(
                engine.PolicySpec(NONE, policies.STATIC_PARTITION, {"static_hp_frac": 1.0})
            )
        elif name == policies.STATIC_PARTITION:
            for frac in args.static_hp_frac:
                specs.append(
                    engine.PolicySpec(f"static_partition@{frac:g}", name, {"static_hp_frac": frac})
                )
        else:
            hp_min = (
                args.queue_hp_min if args.queue_hp_min is not None else max(1, round(nodes * 0.01))
            )
            hp_max = (
                args.queue_hp_max if args.queue_hp_max is not None else max(1, round(nodes * 0.8))
            )
            specs.append(
                engine.PolicySpec(
                    name,
                    name,
                    {
                        "queue_hp_base_frac": args.queue_hp_base_frac,
                        "queue_hp_min": hp_min,
                        "queue_hp_max": hp_max,
                        "queue_perf_per_hp_node": args.queue_perf_per_hp_node,
                    },
                )
            )
    if getattr(args, "suspend", False):
        specs += suspend_specs(args, specs)
    return specs


def suspend_specs(args, specs):
    """The '+suspend' column of each managed policy (one per suspend_after)."""
    out = []
    for spec in specs:
        if spec.label == NONE:
            continue
        for minutes in args.suspend_after:
            label = f"{spec.label}+suspend"
            if len(args.suspend_after) > 1:
                label += f"@{minutes:g}m"
            options = {
                **spec.options,
                "suspend_enabled": True,
                "suspend_after": int(round(minutes * 60)),
                "min_spare_nodes": args.min_spare_nodes,
            }
            out.append(
                engine.PolicySpec(
                    label,
                    spec.policy,
                    options,
                    packing=True,
                    efficiency=args.packing == "efficient",
                )
            )
    return out


class Progress:
    """A bar redrawn in place on a terminal; nothing when stderr is not one.

    With several policies at once the bar follows the slowest of them."""

    def __init__(self, enabled, total_runs):
        self.enabled = enabled
        self.total = total_runs
        self.done = set()
        self.started = time.monotonic()
        self.where = {}  # label -> simulated seconds, of the runs under way

    def __call__(self, label, t, horizon):
        if not self.enabled or label in self.done:
            return
        if t >= horizon:
            self.where.pop(label, None)
            self.done.add(label)
        else:
            self.where[label] = t
        if self.where:
            label, t = min(self.where.items(), key=lambda item: item[1])
        share = t / horizon if horizon else 1.0
        filled = int(30 * share)
        sys.stderr.write(
            f"\r[{len(self.done)}/{self.total} done] {label[:24]:<24} "
            f"[{'#' * filled}{'.' * (30 - filled)}] {t / 3600:5.1f} h "
            f"{time.monotonic() - self.started:6.0f} s"
        )
        if len(self.done) == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _simulate(template, tmpdir, hosts, jobs, spec, settings, index=0):
    """One policy on its own copy of the template database: its Outcome."""
    db_path = cluster.copy(template, tmpdir, f"{index}-{spec.label}")
    try:
        with cluster.serve(db_path) as (client, _url, _db):
            return engine.Simulation(client, hosts, jobs, spec, settings).run()
    finally:
        os.remove(db_path)


# A worker process's line back to the parent's progress bar.
_PROGRESS = None


class _QueueProgress:
    def __init__(self, queue):
        self.queue = queue

    def __call__(self, label, t, horizon):
        self.queue.put((label, t, horizon))


def _init_worker(progress_queue):
    global _PROGRESS
    logging.getLogger().setLevel(logging.WARNING)
    _PROGRESS = _QueueProgress(progress_queue) if progress_queue is not None else None


def _simulate_in_worker(template, tmpdir, hosts, jobs, spec, settings, index):
    settings = dataclasses.replace(settings, progress=_PROGRESS)
    return _simulate(template, tmpdir, hosts, jobs, spec, settings, index)


def _run_all(template, tmpdir, hosts, jobs, specs, settings, workers, progress):
    """Every spec's Outcome, in the order of ``specs`` whatever finishes first.

    Each policy is independent (its own database copy, its own services, the
    same workload): running them in separate processes changes when they
    finish, never what they compute. Processes are spawned, not forked, so no
    connection or thread of this process is shared with them.
    """
    if workers <= 1 or len(specs) <= 1:
        outcomes = []
        for index, spec in enumerate(specs):
            outcomes.append(_simulate(template, tmpdir, hosts, jobs, spec, settings, index))
        return outcomes
    ctx = multiprocessing.get_context("spawn")
    progress_queue = ctx.Queue() if progress.enabled else None
    local = dataclasses.replace(settings, progress=None)
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(progress_queue,)
    ) as pool:
        futures = [
            pool.submit(_simulate_in_worker, template, tmpdir, hosts, jobs, spec, local, index)
            for index, spec in enumerate(specs)
        ]
        pending = set(futures)
        while pending:
            _done, pending = concurrent.futures.wait(pending, timeout=0.5)
            while progress_queue is not None:
                try:
                    progress(*progress_queue.get_nowait())
                except queue_mod.Empty:
                    break
        return [f.result() for f in futures]


def run(args):
    """Run every policy; return (summary dict, outcomes, timings text)."""
    path = inventory_path(args.inventory)
    nodes = inventory_mod.load(path)
    if not nodes:
        raise inventory_mod.InventoryError(f"inventory {path} has no nodes")
    if args.trace:
        jobs = workload_mod.read_trace(args.trace)
    else:
        mix = workload_mod.Mix(
            load=args.load,
            performance_share=args.performance_share,
            warm_start=not args.cold_start,
        )
        jobs = workload_mod.generate(workload_mod.Capacity.of(nodes), args.hours, args.seed, mix)
    if args.write_trace:
        workload_mod.write_trace(args.write_trace, jobs)
    specs = policy_specs(args, len(nodes))
    progress = Progress(not args.no_progress and sys.stderr.isatty(), len(specs))
    settings = engine.Settings(
        hours=args.hours,
        tick_minutes=args.tick_minutes,
        sample_minutes=args.sample_minutes,
        max_placement_results=args.max_placement_results,
        seed=args.seed,
        cpu_eco_cap_pct=args.cpu_eco_cap_pct,
        gpu_eco_cap_pct=args.gpu_eco_cap_pct,
        pue=args.pue,
        off_watts=args.off_watts,
        boot_minutes=args.boot_minutes,
        gpu_boot_minutes=args.gpu_boot_minutes,
        progress=progress,
    )
    workers = args.workers if args.workers is not None else 2 * (os.cpu_count() or 1)
    workers = min(workers, len(specs))
    tmpdir = tempfile.mkdtemp(prefix="placement-sim-")
    started = time.perf_counter()
    try:
        template, hosts = cluster.template(nodes, tmpdir)
        load_seconds = time.perf_counter() - started
        outcomes = _run_all(template, tmpdir, hosts, jobs, specs, settings, workers, progress)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    meta = {
        "inventory": args.inventory,
        "nodes": len(nodes),
        "hours": args.hours,
        "seed": args.seed,
        "jobs": sum(1 for j in jobs if j.arrival < args.hours * 3600),
        "trace": args.trace,
        "warm_start": None if args.trace else not args.cold_start,
        "tick_minutes": args.tick_minutes,
        "cpu_eco_cap_pct": args.cpu_eco_cap_pct,
        "gpu_eco_cap_pct": args.gpu_eco_cap_pct,
    }
    data = report.summary(outcomes, meta, args.pue)
    timings = report.format_timings(outcomes, load_seconds, time.perf_counter() - started)
    return data, outcomes, timings


def _merged(paths):
    outputs = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines() if line.strip()]
        try:
            outputs.append(json.loads(lines[-1]))
        except (IndexError, json.JSONDecodeError):
            raise report.MergeError(
                f"{path}: its last line is not the JSON object of placement-sim --json"
            ) from None
    return report.merge(outputs)


def main(argv=None):
    try:
        args, rest = _parser().parse_known_args(argv)
        config.load(PROG, "placement-sim", lambda conf: None, argv=rest, default_config_files=[])
        _check(args)
    except config.ConfigError as exc:
        return config.fail(PROG, exc)
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    try:
        if args.merge:
            data, outcomes, timings = _merged(args.merge), None, None
        else:
            data, outcomes, timings = run(args)
    except (
        inventory_mod.InventoryError,
        workload_mod.TraceError,
        placement_client.PlacementError,
        report.MergeError,
        OSError,
    ) as exc:
        return config.fail(PROG, exc)
    print(report.format_table(data))
    if timings:
        print(timings, file=sys.stderr)
    if args.plots:
        path = report.write_plots(data, outcomes, args.plots)
        print(f"report: {path}")
    if args.json:
        print(json.dumps(data, sort_keys=True))
    return 0 if all(p["performance_on_eco"] == 0 for p in data["policies"]) else 1


if __name__ == "__main__":
    sys.exit(main())
