"""The reconcile tick of the power controller, with placement as the store.

Each tick (Joulie's reconcile flow):

1. eligible nodes: node selector (``powerpolicy.selector``) over node
   labels, minus reserved and unschedulable nodes and nodes whose agent is
   silent past ``service_down_time`` (warned of once, counted in
   ``joulie_policy_down_nodes``);
2. hardware view: the node's hardware record, else its labels (Joulie's
   ``joulie.io/hw.*`` keys first), else the PGPU inventory of the provider
   (CPU model unknown then); a node nothing is known of is the ``unknown``
   family and is warned of once;
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

from joule import placement_client
from joule import vocabulary
from powerpolicy import caps
from powerpolicy import guard
from powerpolicy import policies
from powerpolicy import selection
from powerpolicy import selector as selector_mod

LOG = logging.getLogger(__name__)

# Label fallbacks of the hardware view, first match wins: Joulie's bootstrap
# labels (joulie.io/hw.*), then its older keys, node-feature-discovery's and
# the GPU device plugins'.
CPU_MODEL_LABELS = (
    "joulie.io/hw.cpu-model",
    "joulie.io/cpu.model",
    "feature.node.kubernetes.io/cpu-model.name",
)
CPU_SOCKETS_LABELS = ("joulie.io/hw.cpu-sockets", "feature.node.kubernetes.io/cpu-sockets")
GPU_PRODUCT_LABELS = (
    "joulie.io/hw.gpu-model",
    "joulie.io/gpu.product",
    "nvidia.com/gpu.product",
    "amd.com/gpu.product",
    "amd.com/gpu.family",
)
GPU_COUNT_LABELS = (
    "joulie.io/hw.gpu-count",
    "joulie.io/gpu.count",
    "nvidia.com/gpu.count",
    "amd.com/gpu.count",
)
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
    cpu_sockets: int | None = None
    # What was wrong with the labels read (the controller warns once per node).
    problems: tuple = dataclasses.field(default=(), compare=False)

    @property
    def family(self):
        return vocabulary.family_key(self.gpu_count, self.gpu_model, self.cpu_model)

    @property
    def known(self):
        """False when nothing identifies the hardware (the ``unknown`` family)."""
        return self.family != vocabulary.UNKNOWN_FAMILY

    @classmethod
    def from_record(cls, hw):
        return cls(
            hw.get("cpu_model"),
            hw.get("gpu_model"),
            hw.get("gpu_count") or 0,
            hw.get("cpu_min_cap_watts"),
            hw.get("cpu_max_cap_watts"),
            hw.get("gpu_min_cap_watts"),
            hw.get("gpu_max_cap_watts"),
            cpu_sockets=hw.get("cpu_sockets"),
        )


def _first_label(labels, keys):
    for key in keys:
        value = (labels.get(key) or "").strip()
        if value:
            return value
    return None


def _count_label(labels, keys, what, problems):
    """A non-negative integer label; None when absent or not one (noted in ``problems``)."""
    text = _first_label(labels, keys)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        problems.append(f"{what} label {text!r} is not a non-negative integer; ignored")
        return None
    return value


def hardware_view(node, inventories=None):
    """The node's hardware: its record, else labels, else provider inventory.

    A hardware record is the truth about GPUs; a record without a CPU model
    (or socket count) takes them from the labels. Without a record, the
    labels say it all, and when they do not say how many GPUs the node has,
    the provider's PGPU inventory does.

    :param inventories: a callable uuid -> {rc: inventory}, used only when
        neither the record nor the labels say how many GPUs the node has.
    """
    labels = node.get("labels") or {}
    problems = []
    if node.get("hardware"):
        view = HardwareView.from_record(node["hardware"])
        if view.cpu_model and view.cpu_sockets is not None:
            return view
        sockets = view.cpu_sockets
        if sockets is None:
            sockets = _count_label(labels, CPU_SOCKETS_LABELS, "CPU sockets", problems)
        return dataclasses.replace(
            view,
            cpu_model=view.cpu_model or _first_label(labels, CPU_MODEL_LABELS),
            cpu_sockets=sockets,
            problems=tuple(problems),
        )
    gpu_model = _first_label(labels, GPU_PRODUCT_LABELS)
    cpu_model = _first_label(labels, CPU_MODEL_LABELS)
    gpu_count = _count_label(labels, GPU_COUNT_LABELS, "GPU count", problems)
    if gpu_count is None and inventories is not None:
        inv = inventories(node["uuid"]).get(GPU_RESOURCE_CLASS)
        gpu_count = int(inv["total"]) if inv else 0
        source = "inventory"
    else:
        source = "labels"
    gpu_count = gpu_count or 0
    if gpu_count and not gpu_model:
        gpu_model = "unknown-gpu"
    sockets = _count_label(labels, CPU_SOCKETS_LABELS, "CPU sockets", problems)
    return HardwareView(
        cpu_model=cpu_model,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        source=source,
        cpu_sockets=sockets,
        problems=tuple(problems),
    )


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
    down: list = dataclasses.field(default_factory=list)  # names: agent silent, not managed
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
        now = set()
        for name, view in views.items():
            problems = list(view.problems)
            if not view.known:
                problems.append(
                    "no known hardware (no hardware record with a CPU or GPU model, no "
                    f"joulie.io/hw.cpu-model or GPU labels, no {GPU_RESOURCE_CLASS} "
                    f"inventory); it is planned in the {vocabulary.UNKNOWN_FAMILY!r} family"
                )
            now.update((name, problem) for problem in problems)
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
        """Read placement and decide; nothing is written. Returns (TickResult, writes)."""
        opts = self.conf.power
        nodes = self.client.list_nodes()
        down = self._down(nodes)
        eligible = [
            n
            for n in nodes
            if not n["reserved"]
            and not n["unschedulable"]
            and n["name"] not in down
            and self.selector.matches(n.get("labels") or {})
        ]
        views = {n["name"]: hardware_view(n, self.client.provider_inventories) for n in eligible}
        self._warn_hardware(views)
        candidates = [
            selection.Candidate(
                n["name"], views[n["name"]].family, (n.get("twin") or {}).get("profile")
            )
            for n in eligible
        ]
        # The guard always needs running consumers, whatever the policy.
        usages = self.client.workload_usages()
        running_by_name = {
            n["name"]: int(usages.get(n["uuid"], {}).get("performance", 0)) for n in eligible
        }
        running = sum(int(u.get("performance", 0)) for u in usages.values())
        pending = self._pending()
        plan = policies.plan_from_conf(opts, candidates, demand=running + pending, now=self.clock())
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
            desired = {
                "profile": decision.profile,
                "schedulable_class": decision.schedulable_class,
                "cpu_cap_watts": cpu_cap,
                "gpu_cap_watts": gpu_cap,
                "managed_by": managed_by,
            }
            twin = node.get("twin")
            node_plans.append(
                NodePlan(
                    decision.name,
                    views[decision.name],
                    twin,
                    desired,
                    decision,
                    running_by_name[decision.name],
                )
            )
            traits = node.get("profile_traits")
            if twin is None or any(twin.get(k) != v for k, v in desired.items()):
                pass  # the twin changes; placement sets the trait with it
            elif traits is None:
                self._traits_unreported()
                continue
            elif traits == [vocabulary.PROFILE_TRAITS[twin["profile"]]]:
                continue  # twin and trait agree: nothing to write
            else:
                repaired.append(decision.name)
            writes.append(
                {
                    "uuid": node["uuid"],
                    "generation": twin["generation"] if twin else None,
                    **desired,
                }
            )
        result = TickResult(
            policy=plan.policy,
            hp_count=plan.hp_count,
            requested_hp_count=plan.requested_hp_count,
            running=running,
            pending=pending,
            families=dict(sorted(fams.items())),
            decisions=decisions,
            written=len(writes),
            draining=sum(d.schedulable_class == vocabulary.DRAINING for d in decisions),
            repaired=repaired,
            nodes=node_plans,
            down=sorted(down),
        )
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
