"""``conductor-worker``: a super conductor, or the conductor of one cell.

    conductor-worker --config-file etc/scheduler/conductor.conf            # super
    conductor-worker --config-file etc/scheduler/conductor.conf --cell cell1

A long-running RPC server: without ``--cell`` on topic ``conductor``
(``build_instances``), with ``--cell NAME`` on topic ``conductor.NAME``
(``build_instance``). Both take over the build requests of conductors that
died (conductor.service). Run as many of each as you like. It takes off the
bus no more messages than it has RPC threads, and acknowledges each once its
work is owned (joule.rpc_server). SIGTERM stops taking messages (the rest
stay on the queue), finishes those in hand within ``[rpc] stop_timeout``
and exits 0; a bad configuration is one line on stderr
and exit status 2, an unreachable bus or placement at start-up one line and
exit status 3.
"""

import logging
import sys

from oslo_config import cfg

from conductor import conf as conf_mod
from conductor import driver as driver_mod
from conductor import service as cond_service
from joule import config
from joule import request_spec as spec_mod
from joule import rpc
from joule import service as service_mod
from joule import startup
from scheduler import cli
from scheduler import conf as sconf

LOG = logging.getLogger("conductor-worker")
PROG = "conductor-worker"

cli_opts = [
    cfg.StrOpt(
        "cell",
        default=None,
        help="Serve this cell's topic (conductor.<cell>) and build there; without "
        "it, serve the super conductor's topic (conductor).",
    ),
]


def make_driver(conf, transport=None, client=None):
    """The compute driver of ``[conductor] compute_driver``."""
    c = conf.conductor
    if c.compute_driver == "agent":
        return driver_mod.AgentDriver(rpc.ComputeAPI(conf, transport), client, c.build_timeout)
    return driver_mod.SimulatedDriver(
        c.simulated_failure_rate,
        c.simulated_failing_hosts,
        c.simulated_seed,
        state_dir=c.simulated_state_dir,
    )


def build_service(conf, transport, cell, name, client=None, driver=None):
    """The Service of one conductor process (its RPC server and its sweep)."""
    if cell is None:
        # Its messages in hand follow its request threads (unless set).
        rpc.derive_executor_threads(conf, conf_mod.super_executor_threads(conf))
    svc = service_mod.Service(conf, transport, name)
    client = client or sconf.placement_client_of(conf)
    conductor = cond_service.Conductor(
        conf, client, transport, driver or make_driver(conf, transport, client), name
    )
    # A message is acknowledged once its endpoint returned: by then its
    # requests are recorded under this conductor's lease (and scheduled,
    # handed off), or its builds finished, or it was answered; before, a
    # conductor that dies leaves it on the queue for another one, which
    # takes a message it finds recorded as the no-op it is (joule.rpc_server).
    if cell is None:
        svc.add_server(
            rpc.topic(conf, rpc.CONDUCTOR_TOPIC),
            [cond_service.SuperConductorEndpoint(conductor)],
            ack_when_done=True,
        )
    else:
        svc.add_server(
            rpc.cell_topic(conf, cell),
            [cond_service.CellConductorEndpoint(conductor)],
            ack_when_done=True,
        )
    conductor.start_sweeping()
    svc.stop_hooks.append(conductor.stop_sweeping)
    svc.conductor = conductor
    return svc


def main(argv=None):
    return startup.run(PROG, lambda: _serve(argv))


def _serve(argv):
    conf = cli.load_conf(argv, PROG, "conductor", conf_mod.register_opts, cli_opts)
    cell = conf.cell
    if cell is not None and not spec_mod.is_safe_id(cell):
        raise config.ConfigError(f"--cell {cell!r} is not a cell name")
    topic = rpc.cell_topic(conf, cell) if cell else rpc.topic(conf, rpc.CONDUCTOR_TOPIC)

    def build(transport):
        return build_service(conf, transport, cell, service_mod.process_name(topic))

    return rpc.run_service(PROG, conf, sconf.placement_client_of(conf), topic, build)


if __name__ == "__main__":
    sys.exit(main())
