"""The reconcile tick of the power controller, with placement as the store.

Each tick (the power seed's shared reconcile flow):

1. eligible nodes: node selector (``powerpolicy.selector``) over node labels, minus reserved and
   unschedulable nodes;
2. hardware view: the node's hardware record, else its labels, else the
   PGPU inventory of the provider (CPU model unknown then);
3. plan with the configured policy (``performance_set`` picks the nodes);
4. downgrade guard (``guard.apply``): running performance consumers keep a
   node planned eco in ``draining`` with performance caps;
5. write twins (and, in the same transaction, profile traits) in one
   ``POST /nodes/twins``: the nodes whose twin would change, and the nodes
   whose profile trait disagrees with their twin (a trait changed behind
   the controller's back), and only those. The twin is the truth: rewriting
   it makes placement put back the trait of its profile, so every client
   filtering on ``CUSTOM_POWER_PROFILE_*`` sees the profile the controller
   set, one tick after anyone changed it.

Metrics are published only after the write succeeded, so they always describe
what placement stores.
"""

import dataclasses
import logging
import time

from joule import vocabulary
from powerpolicy import caps
from powerpolicy import client as client_mod
from powerpolicy import guard
from powerpolicy import policies
from powerpolicy import selection
from powerpolicy import selector as selector_mod

LOG = logging.getLogger(__name__)

# Label fallbacks of the hardware view (Joulie's and the device plugins' keys).
GPU_PRODUCT_LABELS = ("joulie.io/gpu.product", "nvidia.com/gpu.product", "amd.com/gpu.product",
                      "amd.com/gpu.family")
GPU_COUNT_LABELS = ("joulie.io/gpu.count", "nvidia.com/gpu.count", "amd.com/gpu.count")
CPU_MODEL_LABELS = ("joulie.io/cpu.model",)
GPU_RESOURCE_CLASS = "PGPU"


@dataclasses.dataclass(frozen=True)
class HardwareView:
    cpu_model: str | None = None
    gpu_model: str | None = None
    gpu_count: int = 0
    cpu_min_cap_watts: float | None = None
    cpu_max_cap_watts: float | None = None
    gpu_min_cap_watts: float | None = None
    gpu_max_cap_watts: float | None = None
    source: str = "hardware"

    @property
    def family(self):
        return vocabulary.family_key(self.gpu_count, self.gpu_model, self.cpu_model)

    @classmethod
    def from_record(cls, hw):
        return cls(hw.get("cpu_model"), hw.get("gpu_model"), hw.get("gpu_count") or 0,
                   hw.get("cpu_min_cap_watts"), hw.get("cpu_max_cap_watts"),
                   hw.get("gpu_min_cap_watts"), hw.get("gpu_max_cap_watts"))


def _first_label(labels, keys):
    for key in keys:
        value = (labels.get(key) or "").strip()
        if value:
            return value
    return None


def hardware_view(node, inventories=None):
    """The node's hardware: its record, else labels, else provider inventory.

    :param inventories: a callable uuid -> {rc: inventory}, used only when
        neither the record nor the labels say how many GPUs the node has.
    """
    if node.get("hardware"):
        return HardwareView.from_record(node["hardware"])
    labels = node.get("labels") or {}
    gpu_model = _first_label(labels, GPU_PRODUCT_LABELS)
    cpu_model = _first_label(labels, CPU_MODEL_LABELS)
    count_label = _first_label(labels, GPU_COUNT_LABELS)
    gpu_count = None
    if count_label is not None:
        try:
            gpu_count = max(0, int(count_label))
        except ValueError:
            LOG.warning("node %s: GPU count label %r is not an integer", node["name"],
                        count_label)
    if gpu_count is None and inventories is not None:
        inv = inventories(node["uuid"]).get(GPU_RESOURCE_CLASS)
        gpu_count = int(inv["total"]) if inv else 0
        source = "inventory"
    else:
        source = "labels"
    gpu_count = gpu_count or 0
    if gpu_count and not gpu_model:
        gpu_model = "unknown-gpu"
    return HardwareView(cpu_model=cpu_model, gpu_model=gpu_model, gpu_count=gpu_count,
                        source=source)


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """One eligible node as a tick sees it: what placement stores, what it wants."""

    name: str
    hardware: HardwareView
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
    nodes: list = dataclasses.field(default_factory=list)  # NodePlan, by name
    seconds: float = 0.0

    @property
    def transitions(self):
        return [d for d in self.decisions if d.changed]


def _names(names, shown=10):
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


class Controller:
    def __init__(self, conf, client, metrics=None, clock=time.time):
        """:param conf: a ConfigOpts with [power] registered (powerpolicy.conf)."""
        self.conf = conf
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.selector = selector_mod.Selector(conf.power.node_selector)

    def _pending(self):
        if self.conf.power.policy != policies.QUEUE_AWARE_V1:
            return 0
        try:
            return self.client.pending_performance_builds()
        except client_mod.FeatureMissing as exc:
            # Without the build request queue, demand is the running work only;
            # it undercounts, it never throttles anything that runs.
            LOG.warning("pending build requests unavailable, demand counts running work "
                        "only: %s", exc)
            return 0

    def plan(self):
        """Read placement and decide; nothing is written. Returns (TickResult, writes)."""
        opts = self.conf.power
        nodes = self.client.list_nodes()
        eligible = [n for n in nodes
                    if not n["reserved"] and not n["unschedulable"]
                    and self.selector.matches(n.get("labels") or {})]
        views = {n["name"]: hardware_view(n, self.client.provider_inventories) for n in eligible}
        candidates = [
            selection.Candidate(n["name"], views[n["name"]].family,
                                (n.get("twin") or {}).get("profile"))
            for n in eligible
        ]
        # The guard always needs running consumers, whatever the policy.
        usages = self.client.workload_usages()
        running_by_name = {n["name"]: int(usages.get(n["uuid"], {}).get("performance", 0))
                           for n in eligible}
        running = sum(int(u.get("performance", 0)) for u in usages.values())
        pending = self._pending()
        plan = policies.plan_from_conf(opts, candidates, demand=running + pending,
                                       now=self.clock())
        current = {n["name"]: n["twin"]["schedulable_class"] for n in eligible if n.get("twin")}
        decisions = guard.apply(plan, running_by_name, current)

        by_name = {n["name"]: n for n in eligible}
        fams = {}
        writes = []
        repaired = []
        node_plans = []
        managed_by = policies.MANAGED_BY[plan.policy]
        for decision in decisions:
            node = by_name[decision.name]
            family = views[decision.name].family
            entry = fams.setdefault(family, {"nodes": 0, "performance": 0})
            entry["nodes"] += 1
            if decision.schedulable_class == vocabulary.PERFORMANCE:
                entry["performance"] += 1
            cpu_cap, gpu_cap = caps.caps_for(views[decision.name], decision.caps_profile, opts)
            desired = {"profile": decision.profile,
                       "schedulable_class": decision.schedulable_class,
                       "cpu_cap_watts": cpu_cap, "gpu_cap_watts": gpu_cap,
                       "managed_by": managed_by}
            twin = node.get("twin")
            node_plans.append(NodePlan(decision.name, views[decision.name], twin, desired,
                                       decision, running_by_name[decision.name]))
            if twin is None or any(twin.get(k) != v for k, v in desired.items()):
                pass  # the twin changes; placement sets the trait with it
            elif node.get("profile_traits") == [vocabulary.PROFILE_TRAITS[twin["profile"]]]:
                continue  # twin and trait agree: nothing to write
            else:
                repaired.append(decision.name)
            writes.append({"uuid": node["uuid"],
                           "generation": twin["generation"] if twin else None, **desired})
        result = TickResult(
            policy=plan.policy, hp_count=plan.hp_count,
            requested_hp_count=plan.requested_hp_count, running=running, pending=pending,
            families=dict(sorted(fams.items())), decisions=decisions, written=len(writes),
            draining=sum(d.schedulable_class == vocabulary.DRAINING for d in decisions),
            repaired=repaired, nodes=node_plans)
        return result, writes

    def tick(self):
        """One reconcile: read, plan, guard, write the changed twins, publish metrics."""
        start = time.perf_counter()
        try:
            result, writes = self.plan()
            self.client.write_twins(writes)
        except Exception:
            if self.metrics is not None:
                self.metrics.record_failure()
            raise
        result.seconds = time.perf_counter() - start
        if result.repaired:
            LOG.warning("put back the profile trait of %d node(s) whose trait disagreed with "
                        "their twin: %s", len(result.repaired), _names(result.repaired))
        if self.metrics is not None:
            self.metrics.record_tick(result)
        LOG.info("reconcile: policy=%s hp_count=%d demand=%d+%d wrote=%d (traits repaired "
                 "%d) draining=%d in %.3fs", result.policy, result.hp_count, result.running,
                 result.pending, result.written, len(result.repaired), result.draining,
                 result.seconds)
        return result

    def run_forever(self, stop_event):
        """Tick every reconcile_interval until stop_event is set; a failed tick is logged."""
        interval = self.conf.power.reconcile_interval
        while not stop_event.is_set():
            try:
                self.tick()
            except client_mod.PlacementError as exc:
                LOG.error("reconcile failed, retrying in %ss: %s", interval, exc)
            except Exception:  # keep the service alive; the next tick starts afresh
                LOG.exception("reconcile failed, retrying in %ss", interval)
            stop_event.wait(interval)
