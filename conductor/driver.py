"""Compute drivers: what actually builds an instance on a host.

The conductor only needs ``spawn(instance_uuid, selection)`` that returns on
success and raises ``BuildFailed`` with a reason otherwise. The shipped
``SimulatedDriver`` builds nothing; it fails on chosen hosts, at a rate, or
both, reproducibly from a seed, so tests and the demo exercise the reschedule
path.
"""

import random
import threading


class BuildFailed(Exception):
    """The build on this host failed; the conductor tries the next alternate."""


class ComputeDriver:
    name = "abstract"

    def spawn(self, instance_uuid, selection):  # pragma: no cover - interface
        raise NotImplementedError


class SimulatedDriver(ComputeDriver):
    """Builds succeed instantly unless a failure is injected.

    :param failure_rate: probability in [0, 1] that any build fails.
    :param failing_hosts: host uuids or names on which every build fails.
    :param seed: seed of the failure draws (same seed, same failures).
    """

    name = "simulated"

    def __init__(self, failure_rate=0.0, failing_hosts=(), seed=None):
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be within [0, 1], got {failure_rate}")
        self.failure_rate = failure_rate
        self.failing_hosts = set(failing_hosts)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.built = []  # (instance_uuid, host_uuid)
        self.failed = []

    def spawn(self, instance_uuid, selection):
        with self._lock:
            if selection.host_uuid in self.failing_hosts or \
                    selection.host_name in self.failing_hosts:
                self.failed.append((instance_uuid, selection.host_uuid))
                name = selection.host_name or selection.host_uuid
                raise BuildFailed(f"injected failure: host {name} fails every build")
            if self.failure_rate and self._rng.random() < self.failure_rate:
                self.failed.append((instance_uuid, selection.host_uuid))
                raise BuildFailed(f"injected failure at rate {self.failure_rate}")
            self.built.append((instance_uuid, selection.host_uuid))
