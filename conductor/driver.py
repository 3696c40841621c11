"""Compute drivers: what actually builds an instance on a host.

The conductor needs ``spawn(instance_uuid, selection)`` that returns on
success and raises ``BuildFailed`` with a reason otherwise, and
``host_of(instance_uuid)``: where the instance runs, or None. The latter is
what a conductor taking over a dead one's build asks the hypervisors: did
the build it was doing complete? The shipped ``SimulatedDriver`` builds
nothing; it fails on chosen hosts, at a rate, or both, reproducibly from a
seed, so tests and the demo exercise the reschedule path.
"""

import os
import random
import threading


class BuildFailed(Exception):
    """The build on this host failed; the conductor tries the next alternate."""


class AlreadyBuilt(Exception):
    """The instance runs already (on ``host_uuid``): a second build is refused."""

    def __init__(self, instance_uuid, host_uuid):
        super().__init__(f"instance {instance_uuid} already runs on {host_uuid}")
        self.host_uuid = host_uuid


class ComputeDriver:
    name = "abstract"

    def spawn(self, instance_uuid, selection):  # pragma: no cover - interface
        raise NotImplementedError

    def host_of(self, instance_uuid):  # pragma: no cover - interface
        raise NotImplementedError


class SimulatedDriver(ComputeDriver):
    """Builds succeed instantly unless a failure is injected.

    :param failure_rate: probability in [0, 1] that any build fails.
    :param failing_hosts: host uuids or names on which every build fails.
    :param seed: seed of the failure draws (same seed, same failures).
    :param state_dir: where the simulated hypervisors keep what runs: one
        file per instance holding its host, created exclusively, shared by
        every conductor process of a deployment (as real hypervisors are).
        Without it, the state lives in this process.
    """

    name = "simulated"

    def __init__(self, failure_rate=0.0, failing_hosts=(), seed=None, state_dir=None):
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be within [0, 1], got {failure_rate}")
        self.failure_rate = failure_rate
        self.failing_hosts = set(failing_hosts)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.built = []  # (instance_uuid, host_uuid)
        self.failed = []
        self.state_dir = state_dir
        self._running = {}
        if state_dir:
            os.makedirs(state_dir, exist_ok=True)

    def spawn(self, instance_uuid, selection):
        with self._lock:
            if (
                selection.host_uuid in self.failing_hosts
                or selection.host_name in self.failing_hosts
            ):
                self.failed.append((instance_uuid, selection.host_uuid))
                name = selection.host_name or selection.host_uuid
                raise BuildFailed(f"injected failure: host {name} fails every build")
            if self.failure_rate and self._rng.random() < self.failure_rate:
                self.failed.append((instance_uuid, selection.host_uuid))
                raise BuildFailed(f"injected failure at rate {self.failure_rate}")
            self._record(instance_uuid, selection.host_uuid)
            self.built.append((instance_uuid, selection.host_uuid))

    def _record(self, instance_uuid, host_uuid):
        """Mark the instance running on ``host_uuid``; never twice."""
        if not self.state_dir:
            if instance_uuid in self._running:
                raise AlreadyBuilt(instance_uuid, self._running[instance_uuid])
            self._running[instance_uuid] = host_uuid
            return
        path = os.path.join(self.state_dir, instance_uuid)
        # Written aside, then linked into place: the link is atomic and fails
        # when the name exists, so a reader never sees a half-written record
        # and two builders never both succeed.
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(host_uuid)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise AlreadyBuilt(instance_uuid, self.host_of(instance_uuid)) from None
        finally:
            os.unlink(tmp)

    def host_of(self, instance_uuid):
        if not self.state_dir:
            with self._lock:
                return self._running.get(instance_uuid)
        try:
            with open(os.path.join(self.state_dir, instance_uuid), encoding="utf-8") as f:
                return f.read().strip() or None
        except FileNotFoundError:
            return None
