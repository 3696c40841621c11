"""``node-agent``: one per node.

::

    node-agent [--config-file node-agent.conf]   # service: register, then a pass
                                                 # every [agent] report_interval
    node-agent --once                            # register, one pass, exit
    node-agent --once --dry-run                  # print what it found and would
                                                 # register and apply; write nothing

Options come from the ``[agent]`` and ``[placement]`` groups of the config
files and from ``OS_AGENT__<OPTION>`` environment variables.

Exit statuses: 0 done (``--once``) or stopped by SIGTERM/SIGINT; 1
``--once`` and placement refused a write (an inventory below what is
allocated, the message says which) or a cap could not be applied; 2 the
configuration, the command line, the provider config file, or the node
cannot be read (no /proc/cpuinfo under procfs_root); 3 ``--once`` and
placement is unreachable or refuses our credentials. The service never
exits for placement: it retries every pass.
"""

import json
import logging
import signal
import sys
import threading

from joule import config
from joule import metrics_http
from joule import placement_client
from joule import rpc
from joule import startup
from node_agent import agent as agent_mod
from node_agent import cgroups
from node_agent import compute_service
from node_agent import conf as conf_mod
from node_agent import discovery
from node_agent import drivers
from node_agent import metrics as metrics_mod
from node_agent import power as power_mod
from node_agent import provider_config
from node_agent import register as register_mod

LOG = logging.getLogger("node_agent")
PROG = "node-agent"


def _parser():
    parser = config.ArgumentParser(
        prog=PROG,
        description="Register this node with placement (inventories, traits, node and "
        "hardware records), heartbeat, and apply the power caps of its twin. Other "
        "arguments (--config-file, --config-dir) go to oslo.config.",
    )
    parser.add_argument("--once", action="store_true", help="register, run one pass and exit")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what was discovered and what would be registered and applied; "
        "write nothing (to placement or to the node). Implies one pass.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    return parser


def _fmt_inventory(rc, inv):
    ratio = inv["allocation_ratio"]
    ratio = "placement's (or initial)" if ratio is None else f"{ratio:g}"
    return (
        f"  {rc}: total {inv['total']}, reserved {inv['reserved']}, max_unit "
        f"{inv['max_unit']}, allocation_ratio {ratio}"
    )


def _print_plan(plan):
    print(f"would register root provider {plan.name}:")
    for rc, inv in plan.inventories.items():
        print(_fmt_inventory(rc, inv))
    print(f"  traits: {', '.join(plan.traits) or '(none)'}")
    print(f"  node record: cell {plan.cell}, labels {json.dumps(plan.labels, sort_keys=True)}")
    print(f"  hardware: {json.dumps(plan.hardware, sort_keys=True)}")


def _dry_run_against_placement(conf, client, node, plan):
    """What would change in placement and on the node; reads only."""
    opts = conf.agent
    found = client.find_provider(plan.name)
    if found is None:
        print(f"placement: no provider {plan.name} yet: all of the above would be created")
        return
    uuid = found["uuid"]
    generation, have = client.get_inventories(uuid)
    want = register_mod.wanted_inventories(plan, have, opts)
    same = register_mod._same_inventories(want, have)
    print(f"placement: provider {plan.name} is {uuid}")
    print(f"  inventories: {'unchanged' if same else 'would be written: ' + json.dumps(want)}")
    _gen, traits = client.get_traits(uuid)
    want_traits = register_mod.wanted_traits(plan, traits)
    print(
        "  traits: "
        + ("unchanged" if want_traits == sorted(traits) else f"would be {', '.join(want_traits)}")
    )
    stored = client.get_node(uuid)
    cell, labels = register_mod.wanted_node(plan, stored)
    node_same = stored is not None and (stored.get("cell"), stored.get("labels")) == (cell, labels)
    print(f"  node record: {'unchanged' if node_same else 'would be written'}")
    hw_same = register_mod._same_hardware(plan.hardware, (stored or {}).get("hardware"))
    print(f"  hardware: {'unchanged' if hw_same else 'would be written'}")
    twin = (stored or {}).get("twin")
    if twin is None:
        print("  twin: none; no cap would be applied")
        return
    power = power_mod.Power(node, opts.cpu_nominal_watts, nvml=discovery.pynvml, dry_run=True)
    status = power.status(twin)
    print(
        f"  twin generation {twin.get('generation')}: profile {twin.get('profile')}, "
        f"CPU cap {twin.get('cpu_cap_watts')} W, GPU cap {twin.get('gpu_cap_watts')} W"
    )
    for part in ("cpu", "gpu"):
        info = status[part]
        why = f" ({info['reason']})" if info.get("reason") else ""
        print(f"  {part}: {info['method']} {info['result']}{why}")
    for path, value in power.planned:
        print(f"  would write {value} to {path}")


def _dry_run(conf):
    opts = conf.agent
    node = agent_mod.discover(opts)
    for line in discovery.describe(node, opts.cpu_nominal_watts):
        print(line)
    plan = agent_mod.load_plan(node, opts)
    _print_plan(plan)
    client = placement_client.PlacementClient.from_conf(conf)
    try:
        _dry_run_against_placement(conf, client, node, plan)
    except placement_client.NOT_THERE as exc:
        print(f"placement not read ({exc}): the lines above are what a first registration writes")
    return 0


def _check_provider_config(conf):
    if conf.agent.provider_config:
        try:
            provider_config.load(conf.agent.provider_config, conf.agent.host)
        except provider_config.ProviderConfigError as exc:
            raise config.ConfigError(str(exc)) from None


def _once(agent):
    try:
        agent.run_pass()
    except startup.UNAVAILABLE:
        raise
    except placement_client.PlacementError as exc:
        raise startup.StartupError(f"pass failed: {exc}") from None
    refused = agent.last_result.refused if agent.last_result else []
    failed = [
        part
        for part in ("cpu", "gpu")
        if agent.status
        and agent.status[part]["result"] in (power_mod.FAILED, power_mod.OUT_OF_RANGE)
    ]
    for line in refused:
        print(f"{PROG}: {line}", file=sys.stderr)
    for part in failed:
        print(f"{PROG}: {part} cap not applied: {agent.status[part]['reason']}", file=sys.stderr)
    return 1 if refused or failed else 0


def main(argv=None):
    return startup.run(PROG, lambda: _run(argv))


def _run(argv):
    checks = [placement_client.check_conf, _check_provider_config]
    args, conf = startup.load_with_arguments(_parser(), argv, conf_mod.register_opts, checks)
    try:
        if args.dry_run:
            return _dry_run(conf)
        metrics = metrics_mod.Metrics()
        agent = agent_mod.Agent(
            conf, placement_client.PlacementClient.from_conf(conf), metrics=metrics
        )
        if args.once:
            return _once(agent)
        metrics_http.start(conf.agent.metrics_host, conf.agent.metrics_port, metrics.registry)
        # The node must be readable before the service starts; placement may
        # come later (the passes retry).
        node = agent_mod.discover(conf.agent)
    except discovery.DiscoveryError as exc:
        raise config.ConfigError(f"cannot discover the node: {exc}") from None
    compute = _compute_service(conf, agent, node) if conf.agent.compute else None
    _serve(conf, agent, compute)
    return 0


def _compute_service(conf, agent, node):
    """The compute service of ``[agent] compute``: the bus checked (exit 3
    when unreachable), the driver loaded and the instance records read
    back (a driver that cannot work here is a configuration error)."""
    rpc.check_reachable(conf)
    try:
        compute = compute_service.make_compute(conf, node)
    except (drivers.UnknownDriver, cgroups.CgroupError, OSError) as exc:
        raise config.ConfigError(f"[agent] driver {conf.agent.driver}: {exc}") from None
    agent.instances = compute.counts
    # A build holds its executor thread while its command is watched
    # ([agent] start_grace): with the bus's default 8 threads a node took 8
    # builds per grace and a burst of a hundred outwaited the conductor.
    rpc.derive_executor_threads(conf, conf.agent.build_threads)
    return compute_service.ComputeService(conf, rpc.transport_of(conf), compute, lambda: agent.uuid)


def _serve(conf, agent, compute=None):
    """Pass every report_interval until SIGTERM or SIGINT; with ``compute``,
    serve the node's compute topic meanwhile (its instances run on after
    the agent stops: a restarted agent finds them again)."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    LOG.info(
        "node agent of %s reporting every %ss to %s",
        conf.agent.host,
        conf.agent.report_interval,
        agent.client.endpoint,
    )
    if compute is not None:
        compute.start()
        print(
            f"{PROG}: {compute.service.name} serving topic {compute.topic}",
            file=sys.stderr,
            flush=True,
        )
    try:
        agent.run_forever(stop)
    finally:
        if compute is not None:
            compute.stop()


if __name__ == "__main__":
    sys.exit(main())
