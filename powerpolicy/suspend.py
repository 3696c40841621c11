"""Suspend idle nodes, wake them for held work: the power state beside the profile.

With ``[power] suspend_enabled`` each reconcile tick, after the profile
twins are written, moves nodes through ``on -> suspending -> off ->
waking -> on`` (``joule.vocabulary`` POWER_*), one step per tick and node:

- ``on -> suspending``: the node held no allocation (and its agent ran no
  instance) for ``suspend_after`` seconds, and suspending it still leaves
  ``min_spare_nodes`` idle nodes on in its family and profile, and at least
  one performance node on in its family (the seed's one-per-family rule
  holds for awake capacity too). The twin is written first (placement
  refuses it for a node that holds allocations: a claim that raced the
  tick), then the power driver is asked to power the node off.
- ``suspending -> off``: the driver reads the node back as off.
- ``off -> waking``: held work needs it. Pending build requests are grouped
  by shape; placement is asked how many instances of each the nodes that
  are on (and those already waking) can take, and nodes that are off and
  fit the rest are woken, those that take the most instances first.
- ``waking -> on``: the driver reads the node back as on and its agent, if
  it has one, has reported since the wake was asked.

``suspend_rate`` and ``resume_rate`` (nodes per minute, as Slurm's
SuspendRate and ResumeRate) bound each direction; a driver that fails or
times out leaves the node where it was (suspending or waking: never
schedulable), and the next tick asks again. Every transition is logged with
its reason and counted (``joulie_power_transitions_total``).
"""

import collections
import dataclasses
import json
import logging

from joule import placement_client
from joule import vocabulary

LOG = logging.getLogger(__name__)

# A power change the BMC took but has not applied after this long is asked
# again (a BMC that accepted and then lost it).
ASK_AGAIN_SECONDS = 300

_ASLEEP_TRAITS = [vocabulary.POWER_STATE_TRAITS[s] for s in sorted(vocabulary.NOT_ON)]


@dataclasses.dataclass(frozen=True)
class SuspendOptions:
    suspend_enabled: bool
    suspend_after: int
    min_spare_nodes: int
    suspend_rate: float
    resume_rate: float

    @classmethod
    def from_conf(cls, power_conf):
        return cls(**{f.name: power_conf[f.name] for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class Transition:
    name: str
    uuid: str
    before: str
    after: str
    reason: str


class DriverError(Exception):
    """The power driver could not do or read what was asked (BMC down, timeout)."""


def state_of(node):
    """A node's power state (a twin without one is on)."""
    return (node.get("twin") or {}).get("power_state") or vocabulary.POWER_ON


class _Budget:
    """Nodes per minute in one direction, as a token bucket on the clock."""

    def __init__(self, per_minute):
        self.per_minute = float(per_minute)
        self.tokens = None
        self.last = None

    def take(self, now, wanted):
        if self.per_minute <= 0:
            return wanted  # 0: unbounded
        if self.tokens is None:
            self.tokens = max(1.0, self.per_minute)
        else:
            elapsed = max(0.0, now - self.last)
            refill = elapsed * self.per_minute / 60
            self.tokens = min(max(1.0, self.per_minute), self.tokens + refill)
        self.last = now
        granted = min(wanted, int(self.tokens))
        self.tokens -= granted
        return granted


class PowerStates:
    """The power-state step of the controller's tick (module docstring)."""

    def __init__(self, options, client, driver, clock, metrics=None):
        self.options = options
        self.client = client
        self.driver = driver
        self.clock = clock
        self.metrics = metrics
        self._idle_since = {}  # name -> when the tick first saw it idle
        self._wake_asked = {}  # name -> when its wake was asked
        self._asked = {}  # name -> (driver action, when, whether it was taken)
        self._suspend_budget = _Budget(options.suspend_rate)
        self._resume_budget = _Budget(options.resume_rate)
        self.failures = []  # (name, what failed) of the last step
        self.needed_awake = set()  # uuids of nodes on that pending work fits

    # -- reading -------------------------------------------------------------

    def _idle(self, node, usages):
        counts = usages.get(node["uuid"]) or {}
        if any(int(v) for v in counts.values()):
            return False
        status = (node.get("twin") or {}).get("status") or {}
        try:
            return not int((status.get("instances") or {}).get("running", 0))
        except (TypeError, ValueError, AttributeError):
            return True

    def wanted_wakes(self, nodes_by_uuid, limit=1000):
        """{uuid: reason} of off nodes that held work needs (and, in
        ``needed_awake``, the nodes on that can take some of it)."""
        self.needed_awake = set()
        try:
            pending = self.client.list_build_requests(status="pending", limit=str(limit))
        except placement_client.PlacementError as exc:
            LOG.warning("pending build requests unavailable, no node woken for them: %s", exc)
            return {}
        shapes = collections.Counter()
        for record in pending[:limit]:
            shape = _shape(record)
            if shape is not None:
                shapes[shape] += 1
        wakes = {}
        for (resources, klass), count in sorted(shapes.items()):
            need = count
            awake = self._fits_by_root(resources, klass, [f"!{t}" for t in _ASLEEP_TRAITS])
            # Nodes that are on and can take pending work are not suspended
            # while it waits: suspending one would only wake another.
            self.needed_awake.update(awake)
            need -= sum(awake.values())
            waking = vocabulary.POWER_STATE_TRAITS[vocabulary.POWER_WAKING]
            need -= self._fits(resources, klass, [waking], count)
            if need <= 0:
                continue
            off = vocabulary.POWER_STATE_TRAITS[vocabulary.POWER_OFF]
            fits = self._fits_by_root(resources, klass, [off])
            chosen = []
            # Most instances first, then by node name: a provider uuid is
            # random per deployment (and per simulator run), so ties broken
            # by it woke different nodes in two runs of one simulated day.
            for root, n in sorted(
                fits.items(),
                key=lambda item: (
                    -item[1],
                    (nodes_by_uuid.get(item[0]) or {}).get("name", ""),
                    item[0],
                ),
            ):
                if need <= 0:
                    break
                if root in wakes or root not in nodes_by_uuid:
                    continue
                chosen.append(root)
                need -= n
            by_family = collections.Counter(_family(nodes_by_uuid[r]) for r in chosen)
            for root in chosen:
                family = _family(nodes_by_uuid[root])
                wakes[root] = (
                    f"{count} pending {klass} instance(s) of {_shape_text(resources)}: waking "
                    f"{by_family[family]} host(s) of family {family}"
                )
        return wakes

    def _query(self, resources, klass, root_required):
        query = [("resources", ",".join(f"{rc}:{n}" for rc, n in resources))]
        required = list(root_required)
        if klass == vocabulary.PERFORMANCE:
            required.append("!" + vocabulary.PROFILE_TRAITS[vocabulary.ECO])
        query.append(("root_required", ",".join(required)))
        return query

    def _fits_by_root(self, resources, klass, root_required):
        """{root uuid: instances of the shape it can take} of the candidates."""
        out = {}
        amounts = dict(resources)
        try:
            for page in self.client.candidate_pages(
                self._query(resources, klass, root_required), 1000, node_data=False
            ):
                free = {}
                for rp, summary in (page.get("provider_summaries") or {}).items():
                    root = summary.get("root_provider_uuid") or rp
                    for rc, entry in (summary.get("resources") or {}).items():
                        left = entry["capacity"] - entry["used"]
                        free.setdefault(root, collections.Counter())[rc] += left
                for root, left in free.items():
                    n = min((left[rc] // amount for rc, amount in amounts.items()), default=0)
                    if n > 0:
                        out[root] = max(out.get(root, 0), int(n))
        except placement_client.PlacementError as exc:
            if exc.status == 400 and "No such trait" in (exc.detail or ""):
                # No node was ever in that state, so none is in it now.
                return {}
            raise
        return out

    def _fits(self, resources, klass, root_required, enough):
        total = 0
        for n in self._fits_by_root(resources, klass, root_required).values():
            total += n
            if total >= enough:
                break
        return total

    # -- the step ------------------------------------------------------------

    def step(self, nodes, usages, profiles, families):
        """Plan and carry out this tick's transitions; return them.

        :param nodes: the eligible nodes (GET /nodes items).
        :param profiles: {name: the profile this tick planned}.
        :param families: {name: hardware family}.
        """
        now = self.clock()
        self.failures = []
        by_uuid = {n["uuid"]: {**n, "family": families.get(n["name"])} for n in nodes}
        states = {n["name"]: state_of(n) for n in nodes}
        idle = {n["name"]: self._idle(n, usages) for n in nodes}
        for name, is_idle in idle.items():
            if is_idle and states[name] == vocabulary.POWER_ON:
                self._idle_since.setdefault(name, now)
            else:
                self._idle_since.pop(name, None)
        transitions = []
        transitions += self._settle(nodes, states, now)
        transitions += self._wake(by_uuid, states, now)
        transitions += self._suspend(nodes, states, idle, profiles, families, now)
        return transitions

    def _settle(self, nodes, states, now):
        """suspending -> off and waking -> on, as the driver reads them back;
        a request that failed is asked again."""
        out = []
        for node in nodes:
            name, state = node["name"], states[node["name"]]
            if state not in (vocabulary.POWER_SUSPENDING, vocabulary.POWER_WAKING):
                continue
            try:
                actual = self.driver.power_state(node)
            except DriverError as exc:
                self._failed(name, f"power state not read: {exc}")
                continue
            if state == vocabulary.POWER_SUSPENDING:
                if actual == vocabulary.POWER_OFF:
                    out.append(self._to(node, state, vocabulary.POWER_OFF, "the BMC reads it off"))
                else:
                    self._ask(node, "power_off", again=True)
            else:
                if actual != vocabulary.POWER_ON:
                    self._ask(node, "power_on", again=True)
                    continue
                asked = self._wake_asked.get(name)
                age = node.get("heartbeat_age_seconds")
                if age is not None and asked is not None and now - age < asked:
                    continue  # on, but its agent has not reported since: not yet
                self._wake_asked.pop(name, None)
                out.append(self._to(node, state, vocabulary.POWER_ON, "the BMC reads it on"))
        for t in out:
            states[t.name] = t.after
        return out

    def _wake(self, by_uuid, states, now):
        wanted = {
            uuid: reason
            for uuid, reason in self.wanted_wakes(by_uuid).items()
            if states.get(by_uuid[uuid]["name"]) == vocabulary.POWER_OFF
        }
        granted = self._resume_budget.take(now, len(wanted))
        out = []
        for uuid in list(wanted)[:granted]:
            node = by_uuid[uuid]
            out.append(self._to(node, vocabulary.POWER_OFF, vocabulary.POWER_WAKING, wanted[uuid]))
            states[node["name"]] = vocabulary.POWER_WAKING
            self._wake_asked[node["name"]] = now
        return out

    def _suspend(self, nodes, states, idle, profiles, families, now):
        opts = self.options
        spare = collections.Counter()  # (family, profile) -> idle nodes on
        awake_perf = collections.Counter()  # family -> performance nodes on
        for node in nodes:
            name = node["name"]
            if states[name] != vocabulary.POWER_ON:
                continue
            if profiles.get(name) == vocabulary.PERFORMANCE:
                awake_perf[families[name]] += 1
            if idle[name]:
                spare[families[name], profiles.get(name)] += 1
        due = sorted(
            (n for n in nodes if states[n["name"]] == vocabulary.POWER_ON and idle[n["name"]]),
            key=lambda n: (self._idle_since.get(n["name"], now), n["name"]),
        )
        chosen = []
        for node in due:
            name = node["name"]
            idle_for = now - self._idle_since.get(name, now)
            if idle_for < opts.suspend_after or node["uuid"] in self.needed_awake:
                continue
            family, profile = families[name], profiles.get(name)
            if spare[family, profile] <= opts.min_spare_nodes:
                continue
            if profile == vocabulary.PERFORMANCE and awake_perf[family] <= 1:
                continue
            spare[family, profile] -= 1
            if profile == vocabulary.PERFORMANCE:
                awake_perf[family] -= 1
            chosen.append((node, idle_for))
        granted = self._suspend_budget.take(now, len(chosen))
        out = []
        for node, idle_for in chosen[:granted]:
            out.append(
                self._to(
                    node,
                    vocabulary.POWER_ON,
                    vocabulary.POWER_SUSPENDING,
                    f"idle for {idle_for:.0f} s (suspend_after {opts.suspend_after} s)",
                )
            )
            states[node["name"]] = vocabulary.POWER_SUSPENDING
        return out

    # -- acting --------------------------------------------------------------

    def _to(self, node, before, after, reason):
        return Transition(node["name"], node["uuid"], before, after, reason)

    def _ask(self, node, action, again=False):
        """Ask the driver; ``again``: a re-ask from a later tick, sent only
        when the last ask of this action failed or is older than
        ASK_AGAIN_SECONDS (a BMC applies a power change seconds after it
        took it: asking again every tick would restart it every tick)."""
        name, now = node["name"], self.clock()
        if again:
            last = self._asked.get(name)
            if last is not None and last[0] == action and last[2]:
                if now - last[1] < ASK_AGAIN_SECONDS:
                    return
        try:
            getattr(self.driver, action)(node)
        except DriverError as exc:
            self._asked[name] = (action, now, False)
            self._failed(name, f"{action} failed: {exc}")
        else:
            self._asked[name] = (action, now, True)

    def _failed(self, name, what):
        self.failures.append((name, what))
        LOG.warning("node %s: %s; asked again next tick", name, what)
        if self.metrics is not None:
            self.metrics.record_power_failure()

    def apply(self, transitions, twins_by_uuid):
        """Write the transitions' twins (one bulk write), then ask the driver:
        power off after ``suspending`` is stored, power on after ``waking``."""
        if not transitions:
            return
        writes = []
        for t in transitions:
            twin = twins_by_uuid[t.uuid]
            writes.append(
                {
                    "uuid": t.uuid,
                    "generation": twin["generation"],
                    **{k: twin[k] for k in _TWIN_KEYS if k in twin},
                    "power_state": t.after,
                }
            )
        self.client.write_twins(writes)
        for t in transitions:
            LOG.info("node %s: power %s -> %s: %s", t.name, t.before, t.after, t.reason)
            if self.metrics is not None:
                self.metrics.record_power_transition(t.before, t.after)
            node = {"name": t.name, "uuid": t.uuid}
            if t.after == vocabulary.POWER_SUSPENDING:
                self._ask(node, "power_off")
            elif t.after == vocabulary.POWER_WAKING:
                self._ask(node, "power_on")


_TWIN_KEYS = ("profile", "schedulable_class", "cpu_cap_watts", "gpu_cap_watts", "managed_by")


def _family(node):
    return node.get("family") or vocabulary.UNKNOWN_FAMILY


def _shape(record):
    """((resource, amount) pairs, workload class) of a pending record's spec."""
    spec = record.get("spec")
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            return None
    if not isinstance(spec, dict):
        return None
    resources = spec.get("resources") or {}
    try:
        pairs = tuple(sorted((str(rc), int(n)) for rc, n in resources.items() if int(n) > 0))
    except (TypeError, ValueError, AttributeError):
        return None
    if not pairs:
        return None
    klass = record.get("workload_class") or spec.get("workload_class")
    return pairs, klass or vocabulary.DEFAULT_WORKLOAD_CLASS


def _shape_text(resources):
    return ",".join(f"{rc}:{n}" for rc, n in resources)
