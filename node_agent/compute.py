"""The agent's compute service: the instances of this node, built, watched
and deleted through its driver, served on the bus as ``compute.<host>``.

This is to the agent what nova-compute's manager is to nova: a cell
conductor casts nothing at it, it calls ``build_instance`` with the
instance's claim on this host and its workload and waits (within its
deadline) for the answer, ``running`` or ``failed`` with why; a failed
build moves the claim to the next alternate on the conductor's side. The
agent never writes allocations: an instance that ends is reported to the
conductors of its cell (``instances_ended``), which release its claim in
a write guarded by the consumer generation.

Every instance has a record on disk (node_agent.instance_store) from the
moment its start is asked, so an agent restarted while its instances run
finds them again: those still running are watched on, those that ended
meanwhile are reported with how they ended (the exec driver's supervisor
kept the exit status), and a record whose instance cannot be told about
(its process is gone and left no status) is reported ``errored`` with that
reason. An ended instance's record is kept until its end is acknowledged,
so a report lost with a conductor is sent again.
"""

import logging
import re
import threading
import time

from joule import request_spec as spec_mod
from joule import rpc
from node_agent import instance_store
from node_agent.drivers import StartFailed

LOG = logging.getLogger(__name__)


class Compute:
    """The instances of one node."""

    def __init__(self, store, driver, gpu_indices=(), delete_grace=10.0):
        self.store = store
        self.driver = driver
        self.gpu_indices = list(gpu_indices)
        self.delete_grace = delete_grace
        self._lock = threading.Lock()
        self._instances = {}
        self._starting = {}  # uuid -> GPU indices reserved for it
        self._doomed = set()  # deleted while starting
        # One lock per instance: a delete and the watch never end it both.
        self._busy = {}

    # -- start-up --------------------------------------------------------------

    def recover(self):
        """Read the records left by an earlier run of the agent: (running
        again, ended meanwhile) uuids; records that cannot be read are named
        in the log and left on disk for an operator."""
        found, broken = self.store.load_all()
        for name in broken:
            LOG.error("instance record %s cannot be read; left as it is", name)
        running, ended = [], []
        for instance in found:
            if not instance.ended:
                try:
                    alive = self.driver.recover(instance)
                except Exception as exc:  # a driver's failure must not lose the record
                    LOG.exception("%s: cannot be recovered", instance.uuid)
                    alive = False
                    instance.state, instance.reason = instance_store.LOST, f"not recovered: {exc}"
                    instance.ended_at = time.time()
                if not alive:
                    self.store.save(instance)
            self._instances[instance.uuid] = instance
            (ended if instance.ended else running).append(instance.uuid)
        if found:
            LOG.info(
                "found %d instance record(s): %d running, %d ended",
                len(found),
                len(running),
                len(ended),
            )
        return running, ended

    # -- the calls -------------------------------------------------------------

    def build(self, uuid, resources, workload=None, workload_class=None):
        """Start instance ``uuid`` with ``resources`` (its claim on this
        host: resource class -> amount) running ``workload`` (a dict, or
        None for a driver that needs none). Returns its public record; a
        failed start is ``{"state": "failed", "reason": ...}`` and leaves
        nothing behind. A second build of an instance this node has is
        answered with what it is: never started twice. A delete that came
        while it was starting ends it as soon as it runs (answered failed:
        the build was given up)."""
        with self._lock:
            known = self._instances.get(uuid)
            if known is not None:
                return known.public()
            if uuid in self._starting:
                return {"instance_uuid": uuid, "state": "starting"}
            gpus = self._take_gpus(int(resources.get("PGPU", 0)))
            if gpus is None:
                return _failed(uuid, f"asks for {resources.get('PGPU')} GPU(s), none free here")
            self._starting[uuid] = gpus  # the devices are reserved from now
        instance = instance_store.Instance(
            uuid,
            dict(resources),
            instance_store.Workload.from_dict(workload),
            workload_class,
            gpus,
        )
        started = False
        try:
            self.store.save(instance)
            self.driver.start(instance)
            self.store.save(instance)
            started = True
        except StartFailed as exc:
            self.store.forget(uuid)
            LOG.info("%s: start failed: %s", uuid, exc)
            return _failed(uuid, str(exc))
        except Exception:
            # Whatever the driver started must not run on unwatched.
            LOG.exception("%s: start broke; ending what it started", uuid)
            self._end_quietly(instance)
            self.store.forget(uuid)
            raise
        finally:
            with self._lock:
                self._starting.pop(uuid, None)
                doomed = uuid in self._doomed
                self._doomed.discard(uuid)
                if started:
                    self._instances[uuid] = instance
        if doomed and started:
            self.delete(uuid, 0)
            return _failed(uuid, "deleted while it was starting (its build was given up)")
        LOG.info("%s: %s", uuid, instance.state)
        return instance.public()

    def _end_quietly(self, instance):
        try:
            self.driver.stop(instance, 0)
        except Exception:  # noqa: BLE001 - best effort after a failure already raised
            LOG.exception("%s: could not be ended", instance.uuid)

    def _take_gpus(self, count):
        """``count`` device indices no running or starting instance has, or None."""
        if count <= 0:
            return []
        used = {g for i in self._instances.values() if not i.ended for g in i.gpus}
        used.update(g for gpus in self._starting.values() for g in gpus)
        free = [g for g in self.gpu_indices if g not in used]
        return free[:count] if len(free) >= count else None

    def delete(self, uuid, grace=None):
        """End instance ``uuid`` (SIGTERM, SIGKILL after ``grace`` seconds);
        its public record, or None when this node does not have it."""
        with self._lock:
            instance = self._instances.get(uuid)
            if instance is None and uuid in self._starting:
                self._doomed.add(uuid)  # ended by its build once it runs
                return {"instance_uuid": uuid, "state": "deleted", "reason": "while starting"}
        if instance is None:
            return None
        with self._lock_of(uuid):
            if not instance.ended:
                self.driver.stop(instance, self.delete_grace if grace is None else grace)
                if instance.ended_at is None:
                    instance.ended_at = time.time()
                self.store.save(instance)
        return instance.public()

    def _lock_of(self, uuid):
        with self._lock:
            return self._busy.setdefault(uuid, threading.Lock())

    def show(self, uuid):
        with self._lock:
            instance = self._instances.get(uuid)
        return None if instance is None else instance.public()

    def list(self):
        with self._lock:
            return [i.public() for i in self._instances.values()]

    def limits(self, uuid):
        with self._lock:
            instance = self._instances.get(uuid)
        return None if instance is None else self.driver.limits(instance)

    def counts(self):
        """What the agent's heartbeat says of its instances (the power
        controller's downgrade guard reads ``running_performance``): the
        running ones, and those of them that are performance work."""
        with self._lock:
            running = [i for i in self._instances.values() if not i.ended]
        return {
            "running": len(running),
            "running_performance": sum(1 for i in running if i.workload_class == "performance"),
        }

    # -- watching --------------------------------------------------------------

    def watch_once(self):
        """Poll every running instance; the public records of those that
        ended now or earlier and whose end is not acknowledged yet."""
        with self._lock:
            instances = list(self._instances.values())
        ended = []
        for instance in instances:
            lock = self._lock_of(instance.uuid)
            if not lock.acquire(blocking=False):
                continue  # being deleted: it is looked at once that is done
            try:
                if not instance.ended and not self._poll(instance):
                    continue
            finally:
                lock.release()
            ended.append(instance.public())
        return ended

    def _poll(self, instance):
        """Whether ``instance`` ended now (its record saved if so)."""
        try:
            if not self.driver.poll(instance):
                return False
        except Exception:  # one broken poll must not stop the watch
            LOG.exception("%s: poll failed", instance.uuid)
            return False
        if instance.ended_at is None:
            instance.ended_at = time.time()
        self.store.save(instance)
        LOG.info("%s: %s (%s)", instance.uuid, instance.state, instance.reason)
        return True

    def acknowledge(self, uuids):
        """Forget ended instances whose end was recorded by a conductor."""
        with self._lock:
            for uuid in uuids:
                instance = self._instances.get(uuid)
                if instance is not None and instance.ended:
                    del self._instances[uuid]
                    self._busy.pop(uuid, None)
                    self.store.forget(uuid)


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def build_problem(instance_uuid, resources, workload, workload_class):
    """What is wrong with a build message, or None. The conductor sends
    what the request spec's contract checked; this keeps a message from
    anything else from breaking the agent or leaving a record behind."""
    if not isinstance(instance_uuid, str) or not _UUID.match(instance_uuid):
        return "instance_uuid must be a lower-case uuid"
    if not isinstance(resources, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in resources.items()
    ):
        return "resources must map resource classes to amounts"
    if workload_class not in (None, "performance", "standard"):
        return f"unknown workload class {workload_class!r}"
    if workload is None:
        return None
    if not isinstance(workload, dict) or set(workload) - {"command", "env", "cwd"}:
        return "workload must be an object of command, env and cwd"
    # The request spec's own bounds (joule.request_spec, WorkloadSchema).
    command, env, cwd = workload.get("command"), workload.get("env") or {}, workload.get("cwd")
    if (
        not isinstance(command, list)
        or not 1 <= len(command) <= spec_mod.MAX_WORKLOAD_ARGS
        or not all(_text_ok(a) for a in command)
    ):
        return (
            f"workload.command must be 1 to {spec_mod.MAX_WORKLOAD_ARGS} strings "
            f"of at most {spec_mod.MAX_WORKLOAD_TEXT} characters, no NUL"
        )
    if (
        not isinstance(env, dict)
        or len(env) > spec_mod.MAX_WORKLOAD_ENV
        or not all(
            isinstance(k, str) and spec_mod.ENV_NAME_PATTERN.match(k) and _text_ok(v)
            for k, v in env.items()
        )
    ):
        return "workload.env must map names matching [A-Za-z_][A-Za-z0-9_]* to strings"
    if cwd is not None and not (_text_ok(cwd) and cwd.startswith("/")):
        return "workload.cwd must be an absolute path"
    return None


def _text_ok(value):
    """A string the kernel can take: no NUL, encodable, not too long."""
    if not isinstance(value, str) or "\0" in value or len(value) > spec_mod.MAX_WORKLOAD_TEXT:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _failed(uuid, reason):
    return {"instance_uuid": uuid, "state": "failed", "reason": reason}


class ComputeEndpoint:
    """``compute.<host>`` on the bus."""

    def __init__(self, compute):
        import oslo_messaging

        # 1.0: build_instance, delete_instance, show_instance, list_instances.
        self.target = oslo_messaging.Target(version=rpc.COMPUTE_RPC_VERSION)
        self.compute = compute

    def build_instance(self, ctxt, instance_uuid, resources, workload=None, workload_class=None):
        problem = build_problem(instance_uuid, resources, workload, workload_class)
        if problem is not None:
            LOG.warning("build of %r refused: %s", instance_uuid, problem)
            return _failed(instance_uuid, f"bad build message: {problem}")
        return self.compute.build(instance_uuid, resources, workload, workload_class)

    def delete_instance(self, ctxt, instance_uuid, grace=None):
        return self.compute.delete(instance_uuid, grace)

    def show_instance(self, ctxt, instance_uuid):
        return self.compute.show(instance_uuid)

    def list_instances(self, ctxt):
        return self.compute.list()
