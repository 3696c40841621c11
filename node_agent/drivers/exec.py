"""The ``exec`` driver: the instance's command as a child of the agent, in a
cgroup of its own whose limits are the instance's claim.

As Nomad's exec driver: no image, the host's own binaries, isolation by
control groups. The command runs under a small ``/bin/sh`` supervisor that
first moves itself into the instance's cgroup (so the command never runs
outside it, and no ``preexec_fn`` runs in this threaded process), then runs
the command and writes its exit status to ``<uuid>.exit`` beside the
instance's record. The status file is what lets an agent restarted while
its instances ran still tell how each one ended: the processes are in a
session of their own and outlive the agent.

Standard output and error go to ``<log_dir>/<uuid>.log``. The command's
environment is a PATH, the workload's own variables, and
``JOULE_INSTANCE_UUID`` and ``JOULE_HOST`` (as Nomad sets ``NOMAD_*``); a
claim with PGPU gets ``CUDA_VISIBLE_DEVICES`` naming the devices the agent
gave it.

A start fails (the build moves to an alternate host) when the command or
its working directory is not there, or when the command exits non-zero
within ``[agent] start_grace`` seconds; one that exits 0 within it has run
and is finished. Later, an exit 0 is ``finished``, any other ``errored``
with its status, and an exit the kernel's OOM killer caused says so.
"""

import logging
import os
import shutil
import signal
import subprocess
import time

from node_agent import cgroups
from node_agent import instance_store
from node_agent.drivers import Driver
from node_agent.drivers import StartFailed

LOG = logging.getLogger(__name__)

# The supervisor: join the cgroup (every hierarchy), run the command, keep
# its exit status; the variables it reads are not passed on.
_SUPERVISOR = (
    'for p in $JOULE_CGROUP_PROCS; do echo $$ > "$p" || exit 126; done; '
    "f=$JOULE_EXIT_FILE; unset JOULE_CGROUP_PROCS JOULE_EXIT_FILE; "
    '"$@"; rc=$?; echo $rc > "$f.tmp" && mv "$f.tmp" "$f"; exit $rc'
)
# Seconds a SIGKILLed instance is waited for.
KILL_WAIT = 10.0
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LOG_TAIL_BYTES = 2048


def _pid_start(pid):
    """The start time of ``pid`` in clock ticks since boot, or None (no
    such process, or one that has exited): with the pid it names a process
    for good (a pid alone is reused)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: fields count after its ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None  # exited, not reaped yet: it runs no more
    return int(fields[19])


def _tail(path):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


class ExecDriver(Driver):
    name = "exec"

    def __init__(self, conf, store):
        opts = conf.agent
        self.store = store
        self.tree = cgroups.Tree(opts.cgroup_root, opts.cgroup_parent)
        self.log_dir = opts.instance_log_dir or os.path.join(opts.state_dir, "logs")
        os.makedirs(self.log_dir, exist_ok=True)
        self.start_grace = opts.start_grace
        self.host = opts.host
        self._children = {}  # uuid -> Popen, for the instances this process started

    def limits(self, instance):
        group = self.tree.find(instance.uuid)
        return None if group is None else group.limits()

    def start(self, instance):
        workload = instance.workload
        if workload is None or not workload.command:
            raise StartFailed("the exec driver needs a workload with a command")
        env = {
            "PATH": BASE_PATH,
            **workload.env,
            "JOULE_INSTANCE_UUID": instance.uuid,
            "JOULE_HOST": self.host,
        }
        if instance.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in instance.gpus)
        cwd = workload.cwd or "/"
        if not os.path.isdir(cwd):
            raise StartFailed(f"working directory {cwd} does not exist")
        program = workload.command[0]
        if shutil.which(program, path=env["PATH"]) is None:
            raise StartFailed(f"command {program!r} not found (PATH {env['PATH']})")
        resources = instance.resources
        try:
            group = self.tree.create(
                instance.uuid, resources.get("VCPU"), resources.get("MEMORY_MB")
            )
        except cgroups.CgroupError as exc:
            raise StartFailed(str(exc)) from None
        instance.log_path = os.path.join(self.log_dir, instance.uuid + ".log")
        env["JOULE_CGROUP_PROCS"] = " ".join(group.procs_files())
        env["JOULE_EXIT_FILE"] = self.store.path(instance.uuid, ".exit")
        try:
            with open(instance.log_path, "ab") as log:
                child = subprocess.Popen(
                    ["/bin/sh", "-c", _SUPERVISOR, "joule-exec", *workload.command],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                )
        except (OSError, ValueError, UnicodeError) as exc:
            # (ValueError, UnicodeError: an environment the kernel cannot take.)
            group.remove()
            raise StartFailed(f"cannot start {program!r}: {exc}") from None
        instance.pid, instance.pid_start = child.pid, _pid_start(child.pid)
        instance.started_at = time.time()
        self._children[instance.uuid] = child
        self.store.save(instance)
        try:
            status = child.wait(self.start_grace)
        except subprocess.TimeoutExpired:
            return  # runs
        if status == 0:
            self.poll(instance)
            return
        self._children.pop(instance.uuid, None)
        self._clean(instance)
        self.store.forget(instance.uuid)
        tail = _tail(instance.log_path)
        raise StartFailed(
            f"{_exit_text(status)} within {self.start_grace:g} s of its start"
            + (f": {tail[-300:]}" if tail else "")
        )

    def poll(self, instance):
        if instance.ended:
            return True
        status = self._exit_status(instance)
        if status is _RUNNING:
            return False
        self._end(instance, status)
        return True

    def _exit_status(self, instance):
        """The command's exit status, None (ended, status unknown) or _RUNNING."""
        child = self._children.get(instance.uuid)
        if child is not None:
            if child.poll() is None:
                return _RUNNING
            self._children.pop(instance.uuid, None)
        elif instance.pid_start and _pid_start(instance.pid) == instance.pid_start:
            return _RUNNING
        try:
            with open(self.store.path(instance.uuid, ".exit"), encoding="ascii") as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None if child is None else child.returncode

    def _end(self, instance, status):
        group = self.tree.find(instance.uuid)
        oom = group.oom_kills() if group is not None else 0
        instance.exit_status, instance.ended_at = status, time.time()
        memory = instance.resources.get("MEMORY_MB")
        if instance.deleting:
            instance.state, instance.reason = instance_store.DELETED, "deleted"
        elif oom:
            instance.state = instance_store.ERRORED
            instance.reason = f"killed by its memory limit ({memory} MiB): {oom} OOM kill(s)"
        elif status == 0:
            instance.state, instance.reason = instance_store.FINISHED, None
        elif status is None:
            instance.state = instance_store.ERRORED
            instance.reason = "ended while the agent was down; its exit status is unknown"
        else:
            instance.state, instance.reason = instance_store.ERRORED, _exit_text(status)
        self._clean(instance)

    def _clean(self, instance):
        """Kill what is left in the instance's cgroup, then remove it."""
        group = self.tree.find(instance.uuid)
        if group is None:
            return
        deadline = time.monotonic() + 5.0
        while group.signal_all(signal.SIGKILL) and time.monotonic() < deadline:
            time.sleep(0.02)
        while not group.remove() and time.monotonic() < deadline:
            time.sleep(0.02)
        if any(os.path.isdir(d) for d in group.dirs):
            LOG.error("%s: its cgroup could not be removed: %s", instance.uuid, group.dirs)

    def stop(self, instance, grace):
        if self.poll(instance):
            return  # it ended on its own before the delete: that is its end
        instance.deleting = True
        self.store.save(instance)
        group = self.tree.find(instance.uuid)
        self._signal(instance, group, signal.SIGTERM)
        # The grace runs until every process of the group is gone, not the
        # supervisor only: it dies of the SIGTERM at once, a command that
        # traps it may still be finishing.
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self._alive(instance, group):
            time.sleep(0.05)
        self._signal(instance, group, signal.SIGKILL)
        child = self._children.pop(instance.uuid, None)
        if child is not None:
            try:
                child.wait(KILL_WAIT)
            except subprocess.TimeoutExpired:
                LOG.error("%s: supervisor %d outlived SIGKILL", instance.uuid, child.pid)
            status = child.returncode
        else:
            deadline = time.monotonic() + KILL_WAIT
            while self._alive(instance, None) and time.monotonic() < deadline:
                time.sleep(0.02)
            status = self._exit_status(instance)
        self._end(instance, None if status is _RUNNING else status)

    def _alive(self, instance, group):
        """Whether a process of the instance is left (its group's, or, with
        no group to read, its supervisor)."""
        if group is not None and group.pids():
            return True
        return bool(instance.pid_start) and _pid_start(instance.pid) == instance.pid_start

    def _signal(self, instance, group, signum):
        """``signum`` to every process of the group; with none to read (it
        could not be found), to the supervisor's session."""
        if group is not None:
            group.signal_all(signum)
            return
        if self._alive(instance, None):
            try:
                os.killpg(instance.pid, signum)
            except ProcessLookupError:
                pass

    def recover(self, instance):
        if self._exit_status(instance) is _RUNNING:
            return True
        self.poll(instance)
        return False


_RUNNING = object()


def _exit_text(status):
    if status is None:
        return "ended with an unknown status"
    if status < 0:
        return f"killed by signal {signal.Signals(-status).name}"
    if status > 128 and status - 128 in signal.valid_signals():
        return f"exit status {status} (signal {signal.Signals(status - 128).name})"
    return f"exit status {status}"
