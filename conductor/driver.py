"""Compute drivers: what actually builds an instance on a host.

The conductor needs ``spawn(instance_uuid, selection, spec)`` that returns
on success and raises ``BuildFailed`` with a reason otherwise, and
``host_of(instance_uuid, hosts)``: where the instance runs, or None. The
latter is what a conductor taking over a dead one's build asks the
hypervisors: did the build it was doing complete?

``SimulatedDriver`` builds nothing; it fails on chosen hosts, at a rate, or
both, reproducibly from a seed, so tests and the demo exercise the
reschedule path. ``AgentDriver`` sends the build to the selected host's node
agent (``compute.<host>``) and waits for its answer, as nova's conductor
hands a build to the host's nova-compute.
"""

import os
import random
import threading

from joule import rpc


class BuildFailed(Exception):
    """The build on this host failed; the conductor tries the next alternate."""


class AlreadyBuilt(Exception):
    """The instance runs already (on ``host_uuid``): a second build is refused."""

    def __init__(self, instance_uuid, host_uuid):
        super().__init__(f"instance {instance_uuid} already runs on {host_uuid}")
        self.host_uuid = host_uuid


class HostsUnknown(Exception):
    """Where the instance runs cannot be told now: an agent that may have it
    did not answer. A takeover waits rather than build it a second time."""


class ComputeDriver:
    name = "abstract"

    def spawn(self, instance_uuid, selection, spec=None):  # pragma: no cover - interface
        raise NotImplementedError

    def host_of(self, instance_uuid, hosts=()):  # pragma: no cover - interface
        """Where the instance runs, or None; ``hosts`` (uuids): where it may
        (its claim's hosts), for a driver that has to ask each host."""
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

    def spawn(self, instance_uuid, selection, spec=None):
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

    def host_of(self, instance_uuid, hosts=()):
        if not self.state_dir:
            with self._lock:
                return self._running.get(instance_uuid)
        try:
            with open(os.path.join(self.state_dir, instance_uuid), encoding="utf-8") as f:
                return f.read().strip() or None
        except FileNotFoundError:
            return None


class AgentDriver(ComputeDriver):
    """Builds through the node agents (joule.rpc.ComputeAPI).

    The agent is addressed by its host's name (its provider name), which a
    selection carries; a selection without one (a record taken over, known
    by its claim's provider only) has its name read from placement once.
    A build the agent did not answer within ``timeout`` seconds failed; the
    agent is told to delete it (it may have started it late), so the claim
    can move to an alternate with nothing left running behind it.
    """

    name = "agent"

    def __init__(self, api, placement, timeout, ask_timeout=10.0):
        self.api = api
        self.placement = placement
        self.timeout = timeout
        self.ask_timeout = ask_timeout
        self._names = {}
        self._lock = threading.Lock()

    def _host_name(self, host_uuid, known=None):
        return known or self._root(host_uuid)[1]

    def _root(self, provider_uuid):
        """(uuid, name) of the root of ``provider_uuid``'s tree: the host
        (a child provider, a GPU say, is on its root's host)."""
        with self._lock:
            root = self._names.get(provider_uuid)
        if root is None:
            provider = self.placement.get_provider(provider_uuid)
            root_uuid = provider.get("root_provider_uuid") or provider_uuid
            if root_uuid != provider_uuid:
                provider = self.placement.get_provider(root_uuid)
            root = (root_uuid, provider["name"])
            with self._lock:
                self._names[provider_uuid] = root
        return root

    def spawn(self, instance_uuid, selection, spec=None):
        host = self._host_name(selection.host_uuid, selection.host_name)
        resources = claimed_resources(selection.allocation_request)
        workload = spec.workload.to_agent() if spec is not None and spec.workload else None
        try:
            answer = self.api.build_instance(
                host,
                instance_uuid,
                resources,
                workload,
                self.timeout,
                workload_class=spec.workload_class if spec is not None else None,
            )
        except (rpc.Unanswered, rpc.AgentFailed) as exc:
            # It may have started it all the same (late, or before failing).
            self._forget_late_start(host, instance_uuid)
            raise BuildFailed(str(exc)) from None
        if answer.get("state") == "failed":
            raise BuildFailed(answer.get("reason") or "the agent refused the build")

    def _forget_late_start(self, host, instance_uuid):
        try:
            self.api.delete_instance(host, instance_uuid, self.ask_timeout, grace=0)
        except (rpc.Unanswered, rpc.AgentFailed):
            pass  # the agent is away; what it runs is reported when it is back

    def host_of(self, instance_uuid, hosts=()):
        """The host (root provider uuid) among ``hosts``' whose agent has
        the instance (built there: running, or ended and not yet reported),
        or None when every one answered that it does not.

        :raise HostsUnknown: none has it, and an agent did not answer.
        """
        asked, silent = set(), []
        for provider_uuid in hosts:
            root_uuid, name = self._root(provider_uuid)
            if root_uuid in asked:
                continue
            asked.add(root_uuid)
            try:
                record = self.api.show_instance(name, instance_uuid, self.ask_timeout)
            except (rpc.Unanswered, rpc.AgentFailed) as exc:
                silent.append(str(exc))
                continue
            if record is not None:
                return root_uuid
        if silent:
            raise HostsUnknown("; ".join(silent))
        return None


def claimed_resources(allocation_request):
    """Resource class -> amount over every provider of an allocation
    request (the host's root and its children are all on the host)."""
    total = {}
    for entry in allocation_request["allocations"].values():
        for rc, amount in entry["resources"].items():
            total[rc] = total.get(rc, 0) + amount
    return total
