"""Control groups of the instances an agent runs: one per instance, limits
equal to its claim.

Both layouts the kernel offers are handled, because hosts differ:

* cgroup v2 (unified): ``<root>/cgroup.controllers`` exists; an instance
  is ``<root>/<parent>/<name>`` with ``cpu.max`` ("<quota> <period>") and
  ``memory.max`` (and ``memory.swap.max`` 0, so the limit is not escaped
  into swap); the kill count is ``oom_kill`` in ``memory.events``.
* cgroup v1: one hierarchy per controller, ``<root>/cpu`` and
  ``<root>/memory``; an instance is ``<parent>/<name>`` in both, with
  ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` and
  ``memory.limit_in_bytes`` (``memory.memsw.limit_in_bytes`` the same where
  swap accounting is on); the kill count is ``oom_kill`` in
  ``memory.oom_control``.

A VCPU claim of N is a CPU quota of N periods per period (N cores' worth of
time, as Nomad's exec driver and Kubernetes' CPU limit give); a MEMORY_MB
claim of M is a hard limit of M MiB. Every path is under a configurable
root, so a test (or a container) gives the agent a tree of its own.
"""

import os
import signal

V1 = "v1"
V2 = "v2"
CPU_PERIOD_US = 100_000
MIB = 1024 * 1024


class CgroupError(Exception):
    """The cgroup tree is missing, of an unknown layout, or refused a write."""


def detect(root):
    """``V2`` or ``V1`` for the tree mounted at ``root``.

    :raise CgroupError: neither layout is there (with what was looked for).
    """
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        return V2
    if all(os.path.isdir(os.path.join(root, c)) for c in ("cpu", "memory")):
        return V1
    raise CgroupError(
        f"no cgroup tree at {root}: neither cgroup.controllers (v2) nor the cpu "
        "and memory hierarchies (v1) are there"
    )


def _write(path, value):
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(str(value))
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror}") from None


def _read(path):
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def _keyed(path, key):
    """The integer after ``key`` in a "key value" per line file, or 0."""
    try:
        for line in _read(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class Limits:
    """What a cgroup enforces, read back from its files."""

    def __init__(self, cpu_quota_us, cpu_period_us, memory_bytes):
        self.cpu_quota_us = cpu_quota_us
        self.cpu_period_us = cpu_period_us
        self.memory_bytes = memory_bytes

    @property
    def vcpus(self):
        """The quota in cores (None: unlimited)."""
        if self.cpu_quota_us is None:
            return None
        return self.cpu_quota_us / self.cpu_period_us

    @property
    def memory_mb(self):
        return None if self.memory_bytes is None else self.memory_bytes // MIB

    def __eq__(self, other):
        return isinstance(other, Limits) and vars(self) == vars(other)

    def __repr__(self):
        return f"Limits(vcpus={self.vcpus}, memory_mb={self.memory_mb})"


class Tree:
    """The instances' cgroups under ``<root>``'s ``<parent>`` group."""

    def __init__(self, root, parent):
        if not parent or parent.startswith("/") or ".." in parent.split("/"):
            raise CgroupError(f"cgroup parent must be a relative path, got {parent!r}")
        self.root = root
        self.parent = parent
        self.version = detect(root)
        self._ensure_parent()

    def _dirs(self, name=None):
        """The directories of group ``name`` (the parent's when None), one
        per hierarchy."""
        tail = self.parent if name is None else os.path.join(self.parent, name)
        if self.version == V2:
            return [os.path.join(self.root, tail)]
        return [os.path.join(self.root, c, tail) for c in ("cpu", "memory")]

    def _ensure_parent(self):
        try:
            for d in self._dirs():
                os.makedirs(d, exist_ok=True)
        except OSError as exc:
            raise CgroupError(f"cannot create the cgroup parent {self.parent}: {exc}") from None
        if self.version == V2:
            # Controllers reach a child only through every ancestor's
            # subtree_control: enable cpu and memory from the root down.
            path = self.root
            for part in self.parent.split("/"):
                _enable_controllers(path)
                path = os.path.join(path, part)
            _enable_controllers(path)

    def create(self, name, vcpus, memory_mb):
        """A new group ``name`` limited to ``vcpus`` cores and ``memory_mb``
        MiB (None: that limit is not set). An existing group of the name is
        refused: it belongs to another instance's life."""
        if not name or "/" in name or name in (".", ".."):
            raise CgroupError(f"bad cgroup name {name!r}")
        dirs = self._dirs(name)
        made = []
        try:
            for d in dirs:
                os.mkdir(d)
                made.append(d)
        except FileExistsError:
            for d in made:
                os.rmdir(d)
            raise CgroupError(f"cgroup {name} exists already") from None
        except OSError as exc:
            for d in made:
                os.rmdir(d)
            raise CgroupError(f"cannot create cgroup {name}: {exc}") from None
        group = Cgroup(self, name)
        try:
            group.set_limits(vcpus, memory_mb)
        except CgroupError:
            group.remove()
            raise
        return group

    def find(self, name):
        """The group ``name`` if it exists, else None."""
        if all(os.path.isdir(d) for d in self._dirs(name)):
            return Cgroup(self, name)
        return None

    def names(self):
        """Names of the groups under the parent."""
        first = self._dirs()[0]
        return sorted(e.name for e in os.scandir(first) if e.is_dir())


def _enable_controllers(path):
    wanted = {"cpu", "memory"}
    have = set(_read(os.path.join(path, "cgroup.controllers")).split())
    missing = wanted - have
    if missing:
        raise CgroupError(f"{path}: controllers {sorted(missing)} are not available")
    enabled = set(_read(os.path.join(path, "cgroup.subtree_control")).split())
    for controller in sorted(wanted - enabled):
        _write(os.path.join(path, "cgroup.subtree_control"), f"+{controller}")


class Cgroup:
    """One instance's group."""

    def __init__(self, tree, name):
        self.tree = tree
        self.name = name
        self.dirs = tree._dirs(name)

    @property
    def _cpu(self):
        return self.dirs[0]

    @property
    def _memory(self):
        return self.dirs[-1]

    def procs_files(self):
        """The files a process writes its pid to, to join the group."""
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def set_limits(self, vcpus, memory_mb):
        v2 = self.tree.version == V2
        if vcpus is not None:
            quota = int(round(vcpus * CPU_PERIOD_US))
            if v2:
                _write(os.path.join(self._cpu, "cpu.max"), f"{quota} {CPU_PERIOD_US}")
            else:
                _write(os.path.join(self._cpu, "cpu.cfs_period_us"), CPU_PERIOD_US)
                _write(os.path.join(self._cpu, "cpu.cfs_quota_us"), quota)
        if memory_mb is not None:
            limit = int(memory_mb) * MIB
            if v2:
                _write(os.path.join(self._memory, "memory.max"), limit)
                swap = os.path.join(self._memory, "memory.swap.max")
                if os.path.exists(swap):
                    _write(swap, 0)
            else:
                _write(os.path.join(self._memory, "memory.limit_in_bytes"), limit)
                memsw = os.path.join(self._memory, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):
                    _write(memsw, limit)

    def limits(self):
        """The limits in force, read back from the files."""
        if self.tree.version == V2:
            quota, period = _read(os.path.join(self._cpu, "cpu.max")).split()
            memory = _read(os.path.join(self._memory, "memory.max"))
            return Limits(
                None if quota == "max" else int(quota),
                int(period),
                None if memory == "max" else int(memory),
            )
        quota = int(_read(os.path.join(self._cpu, "cpu.cfs_quota_us")))
        period = int(_read(os.path.join(self._cpu, "cpu.cfs_period_us")))
        memory = int(_read(os.path.join(self._memory, "memory.limit_in_bytes")))
        # v1 says "no limit" as -1 (CPU) and a page-rounded huge number (memory).
        return Limits(None if quota < 0 else quota, period, None if memory >= 1 << 62 else memory)

    def pids(self):
        """Processes in the group (any hierarchy)."""
        found = set()
        for path in self.procs_files():
            try:
                found.update(int(p) for p in _read(path).split())
            except OSError:
                pass
        return sorted(found)

    def oom_kills(self):
        """How many processes the kernel killed for the memory limit."""
        if self.tree.version == V2:
            return _keyed(os.path.join(self._memory, "memory.events"), "oom_kill")
        return _keyed(os.path.join(self._memory, "memory.oom_control"), "oom_kill")

    def signal_all(self, signum=signal.SIGKILL):
        """Send ``signum`` to every process of the group; how many got it."""
        sent = 0
        for pid in self.pids():
            try:
                os.kill(pid, signum)
                sent += 1
            except ProcessLookupError:
                pass
        return sent

    def remove(self):
        """Remove the group (it must hold no process); True when gone."""
        gone = True
        for d in self.dirs:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone
