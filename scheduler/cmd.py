"""``scheduler-worker``: the scheduler service on topic ``scheduler``.

    scheduler-worker --config-file etc/scheduler/scheduler.conf

A long-running RPC server answering ``select_destinations`` (see
scheduler.service). Start as many as you like, on any machines that reach
the bus and placement: they share the topic. It takes off the bus no more
calls than it has threads (joule.rpc_server). SIGTERM stops taking calls
(the rest stay on the queue), finishes those in hand within ``[rpc]
stop_timeout`` and exits 0. A bad configuration or an unknown filter is one line
on stderr and exit status 2; a bus or a placement that cannot be reached at
start-up is one line and exit status 3.
"""

import logging
import sys

from joule import rpc
from joule import service as service_mod
from joule import startup
from scheduler import cli
from scheduler import conf as conf_mod
from scheduler import conf as sconf
from scheduler import service as sched_service

LOG = logging.getLogger("scheduler-worker")
PROG = "scheduler-worker"

cli_opts = []


def build_service(conf, transport, name):
    # Its RPC server's threads follow its batches (unless set).
    rpc.derive_executor_threads(conf, conf_mod.executor_threads(conf))
    svc = service_mod.Service(conf, transport, name)
    # Its claims go to the other workers over the bus (scheduler.claim_feed).
    peers = rpc.SchedulerAPI(conf, transport)
    endpoint = sched_service.SchedulerEndpoint(
        conf, lambda: sconf.placement_client_of(conf), publish_claims=peers.claims_made, name=name
    )
    svc.add_server(rpc.topic(conf, rpc.SCHEDULER_TOPIC), [endpoint])
    if endpoint.feed_endpoint is not None:
        # Its own server: read at once, whatever the scheduler calls hold.
        svc.add_server(rpc.topic(conf, rpc.CLAIMS_TOPIC), [endpoint.feed_endpoint])
    svc.stop_hooks.append(endpoint.stop)
    svc.endpoint = endpoint
    return svc


def main(argv=None):
    return startup.run(PROG, lambda: _serve(argv))


def _serve(argv):
    conf = cli.load_conf(argv, PROG, "scheduler", conf_mod.register_opts, cli_opts)
    topic = rpc.topic(conf, rpc.SCHEDULER_TOPIC)

    def build(transport):
        return build_service(conf, transport, service_mod.process_name(topic))

    return rpc.run_service(PROG, conf, sconf.placement_client_of(conf), topic, build)


if __name__ == "__main__":
    sys.exit(main())
