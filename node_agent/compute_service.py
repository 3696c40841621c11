"""The agent's compute service on the bus (``[agent] compute = true``).

Serves ``compute.<host>`` (node_agent.compute.ComputeEndpoint) beside the
agent's passes, and watches the running instances every ``[agent]
instance_poll_interval``: an instance that ended is reported to the
conductors of the node's cell (``instances_ended``, a call, at most
REPORT_CHUNK per message, only once the agent knows its provider uuid:
the records are forgotten once a conductor answered that it dealt with
them, and reported again at the next look otherwise), which release its
claim.
"""

import logging
import threading

from joule import rpc
from joule import service as service_mod
from node_agent import compute as compute_mod
from node_agent import drivers
from node_agent import instance_store

LOG = logging.getLogger(__name__)
PROG = "node-agent"
# Seconds a report of ended instances waits for a conductor.
REPORT_TIMEOUT = 30.0
# Ends per report (a conductor refuses more than 1,000 in one message).
REPORT_CHUNK = 200


def make_compute(conf, node=None):
    """The node's Compute, its records read back (node_agent.compute)."""
    opts = conf.agent
    store = instance_store.Store(opts.state_dir)
    driver = drivers.load(opts.driver, conf, store)
    gpus = [g.index for g in node.gpus] if node is not None else []
    compute = compute_mod.Compute(store, driver, gpus, opts.delete_grace)
    compute.recover()
    return compute


class ComputeService:
    """The RPC server of ``compute.<host>`` and the watch of the instances."""

    def __init__(self, conf, transport, compute, host_uuid=lambda: None):
        self.conf = conf
        self.compute = compute
        # The node's provider uuid once the agent registered it (a callable).
        self.host_uuid = host_uuid
        self.service = service_mod.Service(conf, transport, service_mod.process_name(PROG))
        self.topic = rpc.compute_topic(conf, conf.agent.host)
        self.service.add_server(self.topic, [compute_mod.ComputeEndpoint(compute)])
        self.conductors = rpc.ConductorAPI(conf, transport)
        self._stop = threading.Event()
        self._thread = None
        self._failing = None

    def start(self):
        self.service.start()
        self._thread = threading.Thread(target=self._watch, name="instances", daemon=True)
        self._thread.start()
        LOG.info("serving %s with the %s driver", self.topic, self.conf.agent.driver)

    def stop(self):
        """Stop taking builds and watching; the instances run on."""
        self._stop.set()
        finished = self.service.stop(self.conf.rpc.stop_timeout)
        if self._thread is not None:
            self._thread.join(self.conf.agent.instance_poll_interval + REPORT_TIMEOUT)
        return finished

    def _watch(self):
        while not self._stop.wait(self.conf.agent.instance_poll_interval):
            try:
                self.report_once()
            except Exception:  # the watch goes on; the next look reports again
                LOG.exception("reporting ended instances failed")

    def report_once(self):
        """Report the ended instances not acknowledged yet; how many were."""
        ended = self.compute.watch_once()
        host_uuid = self.host_uuid()
        if not ended or host_uuid is None:
            return 0  # (not registered yet: the conductors could not judge them)
        recorded = []
        for start in range(0, len(ended), REPORT_CHUNK):
            chunk = ended[start : start + REPORT_CHUNK]
            try:
                done = self.conductors.instances_ended(
                    self.conf.agent.cell, self.conf.agent.host, host_uuid, chunk, REPORT_TIMEOUT
                )
            except (rpc.Unanswered, rpc.oslo_messaging.MessagingException) as exc:
                if str(exc) != self._failing:
                    LOG.warning("%d ended instance(s) not reported: %s", len(ended), exc)
                self._failing = str(exc)
                break
            self._failing = None
            self.compute.acknowledge(done)
            recorded += done
        return len(recorded)
