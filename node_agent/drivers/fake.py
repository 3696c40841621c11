"""The ``fake`` driver: instances that run nothing, with failure injection.

The simulated hypervisor of the demo, the simulator and the tests that need
no real processes, on the agent's side: a start fails at ``[agent]
fake_failure_rate`` (drawn from ``fake_seed``, so a seed gives the same
failures) or always when ``fake_fails`` is set; a started instance runs
until it is deleted, or for the workload's ``JOULE_FAKE_SECONDS``
environment value when it says one, then finishes with exit status 0.
A restarted agent finds its fake instances running again (they live in
the records).
"""

import random
import threading
import time

from node_agent import instance_store
from node_agent.drivers import Driver
from node_agent.drivers import StartFailed


class FakeDriver(Driver):
    name = "fake"

    def __init__(self, conf, store):
        opts = conf.agent
        self.failure_rate = opts.fake_failure_rate
        self.fails = opts.fake_fails
        self._rng = random.Random(opts.fake_seed)
        self._lock = threading.Lock()

    def start(self, instance):
        with self._lock:
            if self.fails:
                raise StartFailed("injected failure: this node fails every build")
            if self.failure_rate and self._rng.random() < self.failure_rate:
                raise StartFailed(f"injected failure at rate {self.failure_rate}")

    def poll(self, instance):
        seconds = _fake_seconds(instance)
        if seconds is None or time.time() < instance.started_at + seconds:
            return False
        instance.state, instance.exit_status = instance_store.FINISHED, 0
        return True

    def stop(self, instance, grace):
        instance.state = instance_store.DELETED

    def recover(self, instance):
        return not self.poll(instance)


def _fake_seconds(instance):
    if instance.workload is None:
        return None
    try:
        return float(instance.workload.env.get("JOULE_FAKE_SECONDS"))
    except (TypeError, ValueError):
        return None
