"""``power-controller``: the power policy controller's command line.

::

    power-controller [--config-file power.conf]            # service: tick every
                                                           # reconcile_interval, serve metrics
    power-controller --once                                # one tick, then exit
    power-controller --dry-run [--json]                    # what the next tick would do
                                                           # against placement; writes nothing
    power-controller --dry-run --inventory nodes.yaml [--json] [--demand P]
                                                           # plan an inventory file, no placement

Options come from the ``[power]`` group of the config files and from
``OS_POWER__<OPTION>`` environment variables (e.g. ``OS_POWER__STATIC_HP_FRAC=0.2``).
"""

import json
import logging
import signal
import sys
import threading

from joule import config
from joule import inventory as inventory_mod
from joule import metrics_http
from joule import placement_client
from joule import startup
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from powerpolicy import metrics as metrics_mod
from powerpolicy import policies
from powerpolicy import preview as preview_mod
from powerpolicy import selection
from powerpolicy import selector as selector_mod

LOG = logging.getLogger("powerpolicy")
PROG = "power-controller"


def _parser():
    parser = config.ArgumentParser(
        prog=PROG,
        description="Keep only as many nodes in the performance power profile as demand "
        "needs, split fairly across hardware families. Other arguments (--config-file, "
        "--config-dir) go to oslo.config.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--once", action="store_true", help="run one reconcile tick against placement and exit"
    )
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="read placement (current profiles, running and pending work) and "
        "print what the next tick would do: nodes that would move to "
        "performance, eco or draining, and the watts the caps hold per family; "
        "nothing is written. With --inventory, plan an inventory file instead, "
        "without placement",
    )
    parser.add_argument(
        "--inventory",
        metavar="FILE",
        help="dry run: cluster inventory YAML (the format of "
        "cluster-nodes-5k.yaml) to plan instead of placement's nodes",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the plan (or the tick) as one JSON object"
    )
    parser.add_argument(
        "--demand",
        type=int,
        default=None,
        metavar="P",
        help="dry run of --inventory: performance demand P for queue_aware_v1 "
        "(default 0; against placement the demand is what placement holds)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    return parser


def dry_run_plan(power_conf, nodes, demand=0):
    """The dry-run JSON object for inventory nodes (no current profiles)."""
    candidates = [selection.Candidate(n.name, n.family) for n in nodes]
    options = policies.PolicyOptions.from_conf(power_conf)
    plan = policies.build_plan(options, candidates, demand=demand)
    return {
        "policy": plan.policy,
        "hp_count": plan.hp_count,
        "families": plan.families(candidates),
        "performance_nodes": sorted(plan.performance),
    }


def _print_plan(out, as_json):
    if as_json:
        print(json.dumps(out))
        return
    print(f"policy {out['policy']}: {out['hp_count']} performance nodes")
    width = max((len(f) for f in out["families"]), default=6)
    print(f"{'family':<{width}}  {'nodes':>6}  {'performance':>11}")
    for family, counts in out["families"].items():
        print(f"{family:<{width}}  {counts['nodes']:>6}  {counts['performance']:>11}")


def _tick_json(result):
    return {
        "policy": result.policy,
        "hp_count": result.hp_count,
        "demand": {"running": result.running, "pending": result.pending},
        "families": result.families,
        "written": result.written,
        "draining": result.draining,
        "repaired_traits": sorted(result.repaired),
        "transitions": [
            {"node": d.name, "from": d.from_state, "to": d.to_state, "result": d.result}
            for d in result.transitions
        ],
        "seconds": round(result.seconds, 3),
    }


def _check_selector(conf):
    # A selector that cannot be read stops the service now, in every mode,
    # rather than quietly managing no node.
    try:
        selector_mod.Selector(conf.power.node_selector)
    except selector_mod.SelectorError as exc:
        raise config.ConfigError(f"bad configuration: {exc}") from None


def main(argv=None):
    return startup.run(PROG, lambda: _run(argv))


def _run(argv):
    checks = [_check_selector, placement_client.check_conf]
    args, conf = startup.load_with_arguments(_parser(), argv, conf_mod.register_opts, checks)
    _check_modes(args)
    if args.dry_run and args.inventory:
        return _dry_run_inventory(conf, args)
    client = placement_client.PlacementClient.from_conf(conf, conf_mod.power_group.name)
    if args.dry_run:
        return _dry_run(conf, client, args)
    metrics = metrics_mod.Metrics()
    controller = controller_mod.Controller(conf, client, metrics)
    if args.once:
        return _once(controller, args)
    return _serve(conf, controller, metrics)


def _check_modes(args):
    if args.inventory and not args.dry_run:
        raise config.ConfigError("--inventory needs --dry-run")
    if args.demand is not None and not args.inventory:
        raise config.ConfigError(
            "--demand needs --dry-run --inventory FILE (against "
            "placement the demand is the running and pending work it holds)"
        )


def _dry_run_inventory(conf, args):
    try:
        nodes = inventory_mod.load(args.inventory)
    except inventory_mod.InventoryError as exc:
        raise config.ConfigError(str(exc)) from None
    _print_plan(dry_run_plan(conf.power, nodes, demand=max(0, args.demand or 0)), args.json)
    return 0


def _dry_run(conf, client, args):
    try:
        result, _ = controller_mod.Controller(conf, client).plan()  # the tick without its write
    except placement_client.PlacementError as exc:
        raise startup.failed("dry run failed", exc) from None
    out = preview_mod.build(result)
    print(json.dumps(out) if args.json else "\n".join(preview_mod.format_text(out)))
    return 0


def _once(controller, args):
    try:
        result = controller.tick()
    except placement_client.PlacementError as exc:
        # As the service and --dry-run: placement unreachable is 3.
        raise startup.failed("reconcile failed", exc) from None
    if args.json:
        print(json.dumps(_tick_json(result)))
    return 0


def _serve(conf, controller, metrics):
    """Tick every reconcile_interval (serving metrics) until SIGTERM or SIGINT."""
    # The service starts only against a placement that answers and takes
    # its credentials; later outages are retried every tick.
    controller.client.check()
    if conf.power.metrics_port:
        metrics_http.start(conf.power.metrics_host, conf.power.metrics_port, metrics.registry)
        LOG.info(
            "metrics on http://%s:%d/metrics", conf.power.metrics_host, conf.power.metrics_port
        )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    LOG.info(
        "power controller running policy %s every %ss against %s",
        conf.power.policy,
        conf.power.reconcile_interval,
        controller.client.endpoint,
    )
    controller.run_forever(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
