"""What an agent knows of its instances, kept on disk so a restarted agent
finds them again.

One JSON file per instance under ``[agent] state_dir``, replaced whole
(written aside, then renamed: a reader never sees half a record, and a
crash leaves the old one). The record is the agent's side of an instance:
its claim on this host, its workload, and what its driver needs to find
it again (a pid and its start time, a cgroup); the driver owns the fields
it adds.
"""

import dataclasses
import json
import os
import threading
import time

from joule import vocabulary

RUNNING = "running"
FINISHED, ERRORED, DELETED, LOST = vocabulary.INSTANCE_ENDS
# An instance in one of these states has ended: its claim can go.
ENDED = vocabulary.INSTANCE_ENDS
STATES = (RUNNING, *ENDED)


@dataclasses.dataclass
class Workload:
    """What an exec instance runs: ``command`` an argv list, ``env`` added
    to the agent's base environment, ``cwd`` its working directory."""

    command: list
    env: dict = dataclasses.field(default_factory=dict)
    cwd: str | None = None

    @classmethod
    def from_dict(cls, data):
        if not data:
            return None
        return cls(list(data["command"]), dict(data.get("env") or {}), data.get("cwd"))


@dataclasses.dataclass
class Instance:
    """One instance on this node."""

    uuid: str
    resources: dict  # resource class -> amount claimed on this host
    workload: Workload | None = None
    workload_class: str | None = None  # performance | standard, as the spec said
    gpus: list = dataclasses.field(default_factory=list)  # device indices
    state: str = RUNNING
    exit_status: int | None = None
    reason: str | None = None
    started_at: float = dataclasses.field(default_factory=time.time)
    ended_at: float | None = None
    deleting: bool = False
    # Driver fields: how to find the instance again after a restart.
    pid: int | None = None
    pid_start: int | None = None
    log_path: str | None = None

    @property
    def ended(self):
        return self.state in ENDED

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        data = dict(data)
        data["workload"] = Workload.from_dict(data.get("workload"))
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def public(self):
        """What a caller is told (no driver internals)."""
        return {
            "instance_uuid": self.uuid,
            "state": self.state,
            "workload_class": self.workload_class,
            "exit_status": self.exit_status,
            "reason": self.reason,
            "resources": dict(self.resources),
            "gpus": list(self.gpus),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "log_path": self.log_path,
        }


class Store:
    """The instance records of one agent."""

    def __init__(self, state_dir):
        self.dir = os.path.join(state_dir, "instances")
        os.makedirs(self.dir, exist_ok=True)
        self._lock = threading.Lock()

    def path(self, uuid, suffix=".json"):
        return os.path.join(self.dir, uuid + suffix)

    def save(self, instance):
        path = self.path(instance.uuid)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        text = json.dumps(instance.to_dict(), sort_keys=True)  # fails before any write
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def load_all(self):
        """Every record on disk; an unreadable one is skipped (and named)."""
        found, broken = [], []
        for entry in sorted(os.listdir(self.dir)):
            if not entry.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.dir, entry), encoding="utf-8") as handle:
                    found.append(Instance.from_dict(json.load(handle)))
            except (OSError, ValueError, TypeError, KeyError):
                broken.append(entry)
        return found, broken

    def forget(self, uuid):
        for suffix in (".json", ".exit"):
            try:
                os.unlink(self.path(uuid, suffix))
            except FileNotFoundError:
                pass
