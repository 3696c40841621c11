"""The reconcile tick of the power controller, with placement as the store.

Each tick (Joulie's reconcile flow) is these steps, one function each, in
the order ``Controller.plan`` calls them:

1. eligible nodes (``Controller.eligible_nodes``): node selector
   (``powerpolicy.selector``) over node labels, minus reserved and
   unschedulable nodes and nodes whose agent is silent past
   ``service_down_time`` (warned of once, counted in
   ``joulie_policy_down_nodes``);
2. hardware view (``Controller.hardware_views``, ``powerpolicy.hardware``):
   the node's hardware record, else its labels (Joulie's ``joulie.io/hw.*``
   keys first), else the PGPU inventory of the provider (CPU model unknown
   then); a node nothing is known of is the ``unknown`` family and is warned
   of once;
3. plan (``Controller.demand``, ``Controller.policy_plan``): the running and
   pending performance consumers, and the configured policy with its options
   (``policies.PolicyOptions``; ``performance_set`` picks the nodes);
4. downgrade guard (``guard.apply``): running performance consumers keep a
   node planned eco in ``draining`` with performance caps;
5. writes (``planned_twins``, ``Controller.twin_writes``): the twin each node
   should have (its caps from ``caps.caps_for``), then the twins (and, in the
   same transaction, profile traits) written in one ``POST /nodes/twins``:
   the nodes whose twin would change, and the nodes whose profile trait
   disagrees with their twin (a trait changed behind the controller's back),
   and only those. The twin is the truth: rewriting it makes placement put
   back the trait of its profile, so every client filtering on
   ``CUSTOM_POWER_PROFILE_*`` sees the profile the controller set, one tick
   after anyone changed it.

``Controller.tick`` writes what ``plan`` decided; metrics are published only
after the write succeeded, so they always describe what placement stores.
"""

import collections
import dataclasses
import logging
import time

from joule import placement_client
from joule import vocabulary
from powerpolicy import caps
from powerpolicy import guard
from powerpolicy import hardware as hardware_mod
from powerpolicy import policies
from powerpolicy import power_drivers
from powerpolicy import selection
from powerpolicy import selector as selector_mod
from powerpolicy import suspend

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """One eligible node as a tick sees it: what placement stores, what it wants."""

    name: str
    hardware: hardware_mod.HardwareView
    twin: dict | None  # the stored twin (None: never planned)
    desired: dict  # the twin fields the tick wants (written when they differ)
    decision: guard.Decision
    running_performance: int  # performance consumers running on it now


@dataclasses.dataclass
class TickResult:
    policy: str
    hp_count: int
    requested_hp_count: int
    running: int
    pending: int
    families: dict  # family -> {"nodes": n, "performance": k} after the guard
    decisions: list
    written: int
    draining: int
    repaired: list = dataclasses.field(default_factory=list)  # names: trait put back
    down: list = dataclasses.field(default_factory=list)  # names: agent silent, not managed
    nodes: list = dataclasses.field(default_factory=list)  # NodePlan, by name
    # [power] suspend_enabled: this tick's power transitions (suspend.Transition)
    # and {state: eligible nodes} after it; empty with the feature off.
    power_transitions: list = dataclasses.field(default_factory=list)
    power_states: dict = dataclasses.field(default_factory=dict)
    # What the tick read and the power step works on: the eligible nodes
    # (GET /nodes items) and the workload usages.
    eligible: list = dataclasses.field(default_factory=list, repr=False)
    usages: dict = dataclasses.field(default_factory=dict, repr=False)
    seconds: float = 0.0

    @property
    def transitions(self):
        return [d for d in self.decisions if d.changed]


def _names(names, shown=10):
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


@dataclasses.dataclass(frozen=True)
class Demand:
    """The performance consumers of a tick: running on each eligible node (what
    the guard holds), running in all, and pending (queue_aware_v1 only)."""

    running_by_node: dict
    running: int
    pending: int
    # {root uuid: {workload class: consumers}} as read (the power step's
    # idleness reads the same listing, not a second one).
    usages: dict = dataclasses.field(default_factory=dict)

    @property
    def total(self):
        """Demand P of queue_aware_v1: running plus pending."""
        return self.running + self.pending


def current_classes(nodes):
    """{name: the schedulable class its twin stores} of the nodes that have a twin."""
    return {n["name"]: n["twin"]["schedulable_class"] for n in nodes if n.get("twin")}


def planned_twins(nodes, views, decisions, demand, power_opts, policy):
    """A NodePlan per guard decision: the twin the tick wants for its node
    (profile, schedulable class, the caps of that profile on its hardware,
    the policy that manages it) beside the twin placement stores."""
    stored = {n["name"]: n.get("twin") for n in nodes}
    managed_by = policies.MANAGED_BY[policy]
    node_plans = []
    for decision in decisions:
        view = views[decision.name]
        cpu_cap, gpu_cap = caps.caps_for(view, decision.caps_profile, power_opts)
        desired = {
            "profile": decision.profile,
            "schedulable_class": decision.schedulable_class,
            "cpu_cap_watts": cpu_cap,
            "gpu_cap_watts": gpu_cap,
            "managed_by": managed_by,
        }
        node_plans.append(
            NodePlan(
                decision.name,
                view,
                stored[decision.name],
                desired,
                decision,
                demand.running_by_node[decision.name],
            )
        )
    return node_plans


def family_counts(node_plans):
    """{family: {"nodes": n, "performance": k}} after the guard, sorted by family."""
    families = {}
    for planned in node_plans:
        entry = families.setdefault(planned.hardware.family, {"nodes": 0, "performance": 0})
        entry["nodes"] += 1
        if planned.decision.schedulable_class == vocabulary.PERFORMANCE:
            entry["performance"] += 1
    return dict(sorted(families.items()))


def tick_result(plan, demand, node_plans, writes, repaired, down):
    """The TickResult of a planned tick (``seconds`` is set once it is written)."""
    decisions = [planned.decision for planned in node_plans]
    return TickResult(
        policy=plan.policy,
        hp_count=plan.hp_count,
        requested_hp_count=plan.requested_hp_count,
        running=demand.running,
        pending=demand.pending,
        families=family_counts(node_plans),
        decisions=decisions,
        written=len(writes),
        draining=sum(d.schedulable_class == vocabulary.DRAINING for d in decisions),
        repaired=repaired,
        nodes=node_plans,
        down=sorted(down),
    )


class Controller:
    def __init__(self, conf, client, metrics=None, clock=time.time, power_driver=None):
        """:param conf: a ConfigOpts with [power] registered (powerpolicy.conf).
        :param power_driver: what powers nodes off and on with
            [power] suspend_enabled (default: the [power] power_driver entry point)."""
        self.conf = conf
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.power = None
        if conf.power.suspend_enabled:
            if power_driver is None:
                power_driver = power_drivers.load(conf)
            self.power = suspend.PowerStates(
                suspend.SuspendOptions.from_conf(conf.power), client, power_driver, clock, metrics
            )
        self.selector = selector_mod.Selector(conf.power.node_selector)
        self._warned = set()  # (node, problem) pairs already warned of
        self._traits_warned = False
        self._down_warned = set()
        if metrics is not None:
            metrics.reconcile_interval.set(conf.power.reconcile_interval)

    def _pending(self):
        if self.conf.power.policy != policies.QUEUE_AWARE_V1:
            return 0
        try:
            return self.client.count_build_requests(
                status="pending", workload_class=vocabulary.PERFORMANCE
            )
        except placement_client.PlacementError as exc:
            if not exc.route_missing:
                raise
            # Without the build request queue, demand is the running work only;
            # it undercounts, it never throttles anything that runs.
            LOG.warning(
                "pending build requests unavailable, demand counts running work only: %s", exc
            )
            return 0

    def _warn_hardware(self, views):
        """Warn once per node and problem of its hardware view, not every tick: an
        unknown family, a label that is not a count. A problem that goes away and
        comes back is warned of again."""
        now = {
            (name, problem)
            for name, view in views.items()
            for problem in hardware_mod.problems_of(view)
        }
        for name, problem in sorted(now - self._warned):
            LOG.warning("node %s: %s", name, problem)
        self._warned = now

    def _traits_unreported(self):
        # A placement whose node list does not report profile traits: the
        # controller cannot see a trait changed behind its back, and must not
        # rewrite every twin on every tick to find out.
        if not self._traits_warned:
            LOG.warning(
                "placement's GET /nodes does not report profile_traits; profile "
                "traits changed behind the controller's back are not repaired"
            )
            self._traits_warned = True

    def _down(self, nodes):
        """Names of the nodes whose agent is silent past service_down_time (warned
        of once each, again after they came back in between)."""
        limit = self.conf.power.service_down_time
        down = {}
        for n in nodes:
            age = n.get("heartbeat_age_seconds")
            if age is not None and age > limit:
                down[n["name"]] = age
        for name in sorted(set(down) - self._down_warned):
            LOG.warning(
                "node %s: no heartbeat from its node agent for %.0f s (service_down_time "
                "%d s): not managed until it reports again",
                name,
                down[name],
                limit,
            )
        self._down_warned = set(down)
        return set(down)

    def plan(self):
        """Read placement and decide; nothing is written. Returns (TickResult, writes).

        The tick's steps, in order (the module's docstring says each)."""
        nodes = self.client.list_nodes()
        eligible, down = self.eligible_nodes(nodes)
        views = self.hardware_views(eligible)
        demand = self.demand(eligible)
        plan = self.policy_plan(eligible, views, demand)
        decisions = guard.apply(plan, demand.running_by_node, current_classes(eligible))
        node_plans = planned_twins(eligible, views, decisions, demand, self.conf.power, plan.policy)
        writes, repaired = self.twin_writes(eligible, node_plans)
        result = tick_result(plan, demand, node_plans, writes, repaired, down)
        result.eligible, result.usages = eligible, demand.usages
        return result, writes

    def eligible_nodes(self, nodes):
        """(the nodes this tick manages, the names of the down nodes it leaves out)."""
        down = self._down(nodes)
        eligible = [
            n
            for n in nodes
            if not n["reserved"]
            and not n["unschedulable"]
            and n["name"] not in down
            and self.selector.matches(n.get("labels") or {})
        ]
        return eligible, down

    def hardware_views(self, nodes):
        """{name: HardwareView} of ``nodes``; their problems warned of once."""
        views = {
            n["name"]: hardware_mod.view_of(n, self.client.provider_inventories) for n in nodes
        }
        self._warn_hardware(views)
        return views

    def demand(self, nodes):
        """The performance consumers running (on each of ``nodes``, and in all)
        and pending."""
        # The guard always needs running consumers, whatever the policy.
        usages = self.client.workload_usages()
        running_by_node = {
            n["name"]: max(int(usages.get(n["uuid"], {}).get("performance", 0)), _agent_running(n))
            for n in nodes
        }
        running = sum(int(u.get("performance", 0)) for u in usages.values())
        return Demand(running_by_node, running, self._pending(), usages)

    def policy_plan(self, nodes, views, demand):
        """The configured policy's plan of ``nodes`` (by family, current profile)."""
        suspending = self.conf.power.suspend_enabled
        candidates = [
            selection.Candidate(
                n["name"],
                views[n["name"]].family,
                (n.get("twin") or {}).get("profile"),
                readiness(n, demand) if suspending else 0,
            )
            for n in nodes
        ]
        options = policies.PolicyOptions.from_conf(self.conf.power)
        return policies.build_plan(options, candidates, demand=demand.total, now=self.clock())

    def twin_writes(self, nodes, node_plans):
        """(writes, repaired): the twins to write, those of the nodes whose twin
        changes and of those whose profile trait disagrees with it (repaired,
        by name), and only those."""
        by_name = {n["name"]: n for n in nodes}
        writes, repaired = [], []
        for planned in node_plans:
            node, twin = by_name[planned.name], planned.twin
            traits = node.get("profile_traits")
            if twin is None or any(twin.get(k) != v for k, v in planned.desired.items()):
                pass  # the twin changes; placement sets the trait with it
            elif traits is None:
                self._traits_unreported()
                continue
            elif traits == [vocabulary.PROFILE_TRAITS[twin["profile"]]]:
                continue  # twin and trait agree: nothing to write
            else:
                repaired.append(planned.name)
            generation = twin["generation"] if twin else None
            writes.append({"uuid": node["uuid"], "generation": generation, **planned.desired})
        return writes, repaired

    def tick(self):
        """One reconcile: read, plan, guard, write the changed twins, publish metrics."""
        start = time.perf_counter()
        try:
            result, writes = self.plan()
            stored = self.client.write_twins(writes)
            if self.power is not None:
                self._power_step(result, stored)
        except Exception:
            if self.metrics is not None:
                self.metrics.record_failure()
            raise
        result.seconds = time.perf_counter() - start
        if result.repaired:
            LOG.warning(
                "put back the profile trait of %d node(s) whose trait disagreed with "
                "their twin: %s",
                len(result.repaired),
                _names(result.repaired),
            )
        if self.metrics is not None:
            self.metrics.record_tick(result)
        LOG.info(
            "reconcile: policy=%s hp_count=%d demand=%d+%d wrote=%d (traits repaired "
            "%d) draining=%d down=%d in %.3fs",
            result.policy,
            result.hp_count,
            result.running,
            result.pending,
            result.written,
            len(result.repaired),
            result.draining,
            len(result.down),
            result.seconds,
        )
        return result

    def _power_step(self, result, stored):
        """Suspend and wake (powerpolicy.suspend), after the profile twins are
        written: the twins it writes carry the generations just stored."""
        eligible = result.eligible
        twins = {n["uuid"]: n.get("twin") for n in eligible}
        twins.update({t["uuid"]: t for t in stored or ()})
        profiles = {p.name: p.desired["profile"] for p in result.nodes}
        families = {p.name: p.hardware.family for p in result.nodes}
        transitions = self.power.step(eligible, result.usages, profiles, families)
        self.power.apply(transitions, twins)
        result.power_transitions = transitions
        states = {n["name"]: suspend.state_of(n) for n in eligible}
        states.update({t.name: t.after for t in transitions})
        result.power_states = dict(collections.Counter(states.values()))

    def run_forever(self, stop_event):
        """Tick every reconcile_interval until stop_event is set; a failed tick is logged."""
        interval = self.conf.power.reconcile_interval
        while not stop_event.is_set():
            try:
                self.tick()
            except placement_client.PlacementError as exc:
                LOG.error("reconcile failed, retrying in %ss: %s", interval, exc)
            except Exception:  # keep the service alive; the next tick starts afresh
                LOG.exception("reconcile failed, retrying in %ss", interval)
            stop_event.wait(interval)


def readiness(node, demand):
    """How soon ``node`` could take performance work (selection.READY_*),
    from its twin's power state and the consumers placement counts on it.

    With idle nodes suspended, the nodes left on are packed with standard
    work: chosen by name alone, a family's new performance slots went to
    such nodes, where performance work waits for hours of standard work to
    end, while the empty ones slept as eco and were never woken for it
    (issue 26: queue_aware_v1 +suspend made performance work wait 383
    minutes at p95 on the default day, against 303 without suspend)."""
    if demand.running_by_node.get(node["name"], 0) > 0:
        return selection.READY_RUNNING_PERFORMANCE
    state = (node.get("twin") or {}).get("power_state") or vocabulary.POWER_ON
    if state == vocabulary.POWER_WAKING:
        return selection.READY_WAKING
    if state in vocabulary.NOT_ON:
        return selection.READY_ASLEEP
    held = demand.usages.get(node["uuid"]) or {}
    if any(int(count or 0) > 0 for count in held.values()):
        return selection.READY_BUSY_STANDARD
    return selection.READY_ON_IDLE


def _agent_running(node):
    """Performance instances the node's agent says run there (its twin
    status, when the agent runs its compute service), or 0: an instance
    that still runs after its claim went, or before placement shows it,
    is held by the guard as much as a consumer with an allocation."""
    status = (node.get("twin") or {}).get("status") or {}
    try:
        return int((status.get("instances") or {}).get("running_performance", 0))
    except (TypeError, ValueError, AttributeError):
        return 0
