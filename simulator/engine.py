"""The simulated clock: one policy, one workload, through the real services.

Events (arrivals, job ends, power-controller ticks, samples) are taken in
time order from a heap; nothing sleeps. Each event calls the services as a
real cluster would:

- an arrival queues the job; queued jobs are handed, oldest first, to the
  conductor (``simulator.services``: ``conductor.service.Conductor`` with
  the scheduler's ``select_destinations`` called directly instead of over
  the bus: build requests, the scheduler's walk, filters, weighers and
  claims, then the build with alternates) against placement in-process;
- a job end releases its instances' allocations in placement;
- a tick runs ``powerpolicy.controller.Controller.tick`` (the real
  PerformanceSet, policy and guard), whose twins set each node's caps;
- a sample records power, queue and performance nodes per family.

Between events every node's power and every job's speed are constant
(``simulator.power``), so IT energy is integrated exactly. A job that does
not fit waits in the queue (and, under queue_aware_v1, is a pending build
request in placement, so it counts as demand) until capacity frees or a
tick changes the profiles; the simulator skips a scheduler call only when
its own exact mirror of free capacity and node classes says no node can take
the job.
"""

import dataclasses
import heapq
import logging
import time
import uuid

from joule import placement_client
from joule import request_spec as spec_mod
from joule import vocabulary
from powerpolicy import conf as power_conf
from powerpolicy import controller as power_controller
from powerpolicy import policies
from scheduler import claim as claim_mod
from simulator import ceiling as ceiling_mod
from simulator import power as power_mod
from simulator import services
from simulator import workload as workload_mod

LOG = logging.getLogger(__name__)
NAMESPACE = uuid.UUID("5d3c9a52-7c1e-4b0a-9e57-9a2f3c1d0e11")

# Event kinds, in the order they are taken at the same instant: the
# controller plans first, then work ends, then new work arrives.
TICK, END, ARRIVAL, SAMPLE = 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """One column of the comparison."""

    label: str  # "none", "static_partition@0.20", "queue_aware_v1", "...+suspend"
    policy: str
    options: dict
    # The scheduler packs work onto busy nodes (PackingWeigher), so that
    # the rest can sleep: the suspend columns turn it on.
    packing: bool = False
    # ... and starts new stacks on the family doing the most work per watt
    # (EfficiencyWeigher): the suspend columns with --packing efficient.
    efficiency: bool = False

    def conf_overrides(self):
        return {"policy": self.policy, **self.options}


@dataclasses.dataclass
class Settings:
    hours: float = 24.0
    tick_minutes: float = 5.0
    sample_minutes: float = 15.0
    max_placement_results: int = 100
    max_attempts: int = 3
    seed: int = 1
    cpu_eco_cap_pct: float = 60.0
    gpu_eco_cap_pct: float = 60.0
    pue: float = 1.0
    # Suspended nodes ([power] suspend_enabled): what an off node draws
    # (its BMC), how long a node takes to power off, and to boot by kind.
    off_watts: float = 10.0
    shutdown_minutes: float = 1.0
    boot_minutes: float = 3.0
    gpu_boot_minutes: float = 5.0
    progress: object = None  # callable(label, sim_seconds, horizon) or None


class _Node:
    __slots__ = (
        "name",
        "uuid",
        "family",
        "kind",
        "model",
        "free",
        "klass",
        "cpu_cap",
        "gpu_cap",
        "instances",
        "watts",
        "counted_idle",
        "power",
        "switch_at",
    )

    def __init__(self, name, node_uuid, family, hardware):
        self.name = name
        self.uuid = node_uuid
        self.family = family
        self.kind = workload_mod.GPU if hardware.get("gpu_count") else workload_mod.CPU
        self.model = power_mod.NodeModel.of(hardware)
        self.free = {
            "VCPU": hardware.get("cpu_cores") or 1,
            "MEMORY_MB": (hardware.get("memory_gib") or 1) * 1024,
            "PGPU": hardware.get("gpu_count") or 0,
        }
        self.klass = None  # schedulable class from the twin; None before the first tick
        self.cpu_cap = None
        self.gpu_cap = None
        self.instances = []  # _Running entries on this node, in start order
        self.watts = self.model.idle_watts
        self.counted_idle = True  # in the engine's idle_watts (no instance on it)
        self.power = vocabulary.POWER_ON  # the twin's power state, as the last tick wrote it
        self.switch_at = None  # when the BMC reads a pending off or on (SimulatedPower)


@dataclasses.dataclass
class _Running:
    job: workload_mod.Job
    nodes: list
    instances: list
    start: float
    remaining: float  # seconds of work at full speed
    rate: float = 1.0
    last: float = 0.0
    version: int = 0
    eco_seconds: float = 0.0  # seconds a performance job ran under eco caps


@dataclasses.dataclass
class Outcome:
    """What one policy did to the workload (the raw material of the report)."""

    label: str
    policy: str
    options: dict
    it_kwh: float
    facility_kwh: float
    submitted: int
    completed: int
    started: int
    slowdowns: dict  # class -> [slowdown of each completed job]
    waits: dict  # class -> [seconds queued of each started job]
    performance_on_eco: int  # performance jobs that ran any time under eco caps
    performance_on_eco_seconds: float
    samples: list  # {"t", "watts", "running", "queued", "performance_nodes": {family: n}}
    families: dict  # family -> nodes
    wall: dict  # seconds of wall time by stage
    scheduler_calls: int
    no_valid_host: int
    wakeups: int = 0  # nodes woken in the day (suspend columns)
    idle_kwh: float = 0.0  # drawn by nodes holding no work (the bound on suspend's saving)
    sleepable_kwh: float = 0.0  # idle floor of awake nodes no placement needed (simulator.ceiling)
    held_share: dict = dataclasses.field(default_factory=dict)  # resource class -> share held
    suspends: int = 0  # nodes suspended in the day


class Simulation:
    def __init__(self, client, hosts, jobs, spec, settings):
        """:param hosts: [(uuid, InventoryNode)] as loaded into placement."""
        self.client = client
        self.jobs = jobs
        self.spec = spec
        self.s = settings
        self.nodes = {}
        for node_uuid, node in hosts:
            self.nodes[node.name] = _Node(node.name, node_uuid, node.family, node.hardware)
        self.by_uuid = {n.uuid: n for n in self.nodes.values()}
        # GPU work can only fit on these; the set never changes.
        self._gpu_nodes = [n for n in self.nodes.values() if n.free["PGPU"]]
        self.families = {}
        for n in self.nodes.values():
            self.families[n.family] = self.families.get(n.family, 0) + 1
        overrides = {
            "cpu_eco_cap_pct_of_max": settings.cpu_eco_cap_pct,
            "gpu_eco_cap_pct_of_max": settings.gpu_eco_cap_pct,
            "reconcile_interval": max(1, int(settings.tick_minutes * 60)),
            **spec.conf_overrides(),
        }
        self.now = 0.0
        self.suspending = bool(spec.options.get("suspend_enabled"))
        self.controller = power_controller.Controller(
            power_conf.make_conf(overrides=overrides),
            client,
            clock=lambda: self.now,
            power_driver=SimulatedPower(self) if self.suspending else None,
        )
        self.deployment = services.Deployment(
            client,
            settings.seed,
            settings.max_attempts,
            settings.max_placement_results,
            packing=spec.packing,
            efficiency=spec.efficiency,
        )
        # Waiting work is demand the controller reads as pending build
        # requests: queue_aware_v1's performance slots, and the wakes.
        self.record_pending = spec.policy == policies.QUEUE_AWARE_V1 or self.suspending
        self.wakeups = 0
        self.suspends = 0
        self.events = []
        self._seq = 0
        self.queue = []  # jobs waiting, arrival order
        self.running = {}  # job id -> _Running
        self.total_watts = sum(n.watts for n in self.nodes.values())
        self.energy_j = 0.0
        # What the nodes that hold no work draw (on, waking or off alike):
        # the most that suspending idle nodes could save, whatever the
        # policy that decides it. Kept beside the total, never in it.
        self.idle_watts = sum(n.watts for n in self.nodes.values() if not n.instances)
        self.idle_energy_j = 0.0
        # The most packing and suspending could take from this day's work
        # (simulator.ceiling): measured beside the energy, never in it.
        self.ceiling = ceiling_mod.PackingCeiling(settings.off_watts)
        for n in self.nodes.values():
            self.ceiling.add_node(n.family, n.free, n.model.idle_watts)
        self._last = 0.0
        self._interval_j = 0.0
        self.epoch = 0
        self._refused = {}  # job shape -> epoch at which the mirror said no
        self.slowdowns = {c: [] for c in vocabulary.WORKLOAD_CLASSES}
        self.waits = {c: [] for c in vocabulary.WORKLOAD_CLASSES}
        self.completed = 0
        self.started = 0
        self.perf_on_eco = set()
        self.perf_on_eco_seconds = 0.0
        self.samples = []
        self.family_perf = {}
        self.wall = {"schedule": 0.0, "release": 0.0, "tick": 0.0, "model": 0.0}
        self.calls = 0
        self._attempts = {}
        self.nvh = 0

    # -- the clock -----------------------------------------------------------

    def _push(self, t, kind, payload=None):
        self._seq += 1
        heapq.heappush(self.events, (t, kind, self._seq, payload))

    def _advance(self, t):
        if t > self._last:
            joules = self.total_watts * (t - self._last)
            self.energy_j += joules
            self.idle_energy_j += self.idle_watts * (t - self._last)
            self.ceiling.advance(t - self._last)
            self._interval_j += joules
            self._last = t
        self.now = t

    def run(self):
        horizon = self.s.hours * 3600.0
        tick = self.s.tick_minutes * 60.0
        sample = self.s.sample_minutes * 60.0
        t = 0.0
        while t < horizon:
            self._push(t, TICK)
            t += tick
        t = sample
        while t <= horizon + 1e-9:
            self._push(t, SAMPLE)
            t += sample
        for job in self.jobs:
            if job.arrival < horizon:
                self._push(job.arrival, ARRIVAL, job)
        progress = self.s.progress
        shown = -1
        while self.events:
            t, kind, _seq, payload = heapq.heappop(self.events)
            if t > horizon:
                break
            self._advance(t)
            if kind == TICK:
                self._tick()
                self._schedule()
            elif kind == END:
                run, version = payload
                if run.version == version and run.job.id in self.running:
                    self._finish(run)
                    self._schedule()
            elif kind == ARRIVAL:
                self._arrive(payload)
                self._schedule()
            else:
                self._sample(t, sample)
            if progress is not None and int(t // 600) != shown:
                shown = int(t // 600)
                progress(self.spec.label, t, horizon)
        self._advance(horizon)
        if progress is not None:
            progress(self.spec.label, horizon, horizon)
        return self._outcome()

    # -- events --------------------------------------------------------------

    def _arrive(self, job):
        self.queue.append(job)
        if self.record_pending:
            # The job's pending records in one bulk POST /build_requests.
            records = [
                {
                    "instance_uuid": inst,
                    "request_id": f"req-{job.id}",
                    "workload_class": job.workload_class,
                    "spec": self._spec(job, [inst]),
                }
                for inst in self._instance_uuids(job)
            ]
            self.client.request(
                "POST",
                placement_client.url_path("build_requests"),
                json={"build_requests": records},
                ok=(201,),
            )

    def _instance_uuids(self, job, attempt=None):
        """The job's instances at scheduling ``attempt`` (each attempt is a new
        request: the conductor records its instances), or its queued records."""
        tag = "queued" if attempt is None else attempt
        return [str(uuid.uuid5(NAMESPACE, f"{job.id}/{tag}/{i}")) for i in range(job.instances)]

    def _spec(self, job, instances):
        resources = {"VCPU": job.vcpus, "MEMORY_MB": job.memory_mb}
        if job.gpus:
            resources["PGPU"] = job.gpus
        return {
            "version": spec_mod.REQUEST_SPEC_VERSION,
            "request_id": f"req-{job.id}",
            "project_id": "sim",
            "user_id": "sim",
            "workload_class": job.workload_class,
            "resources": resources,
            "instance_uuids": list(instances),
        }

    def _mirror_allows(self, job):
        """Whether, by the simulator's exact mirror, ``job.instances`` nodes can take it."""
        # Called for every queued shape after every job end: on a busy day
        # that is thousands of passes over 5,000 nodes, so the loop reads
        # the job once and skips the CPU-only nodes for GPU work (CPU work
        # may run on a GPU node's host CPUs, as placement allows).
        need = job.instances
        blocked = vocabulary.BLOCKED_FOR_PERFORMANCE if job.is_performance else ()
        vcpus, memory_mb, gpus = job.vcpus, job.memory_mb, job.gpus
        for node in self._gpu_nodes if gpus else self.nodes.values():
            if node.klass in blocked or node.power != vocabulary.POWER_ON:
                continue
            free = node.free
            if free["VCPU"] >= vcpus and free["MEMORY_MB"] >= memory_mb and free["PGPU"] >= gpus:
                need -= 1
                if need == 0:
                    return True
        return False

    def _schedule(self):
        """Hand the queued jobs, oldest first, to the conductor (backfilling)."""
        if not self.queue:
            return
        waiting = []
        for job in self.queue:
            shape = (
                job.kind,
                job.is_performance,
                job.instances,
                job.vcpus,
                job.memory_mb,
                job.gpus,
            )
            if self._refused.get(shape) == self.epoch:
                waiting.append(job)
                continue
            start = time.perf_counter()
            fits = self._mirror_allows(job)
            self.wall["model"] += time.perf_counter() - start
            if not fits or not self._place(job):
                self._refused[shape] = self.epoch
                waiting.append(job)
        self.queue = waiting

    def _place(self, job):
        attempt = self._attempts.get(job.id, 0)
        self._attempts[job.id] = attempt + 1
        instances = self._instance_uuids(job, attempt)
        start = time.perf_counter()
        self.calls += 1
        spec = self._spec(job, instances)
        spec["request_id"] = f"req-{job.id}-{attempt}"
        results = self.deployment.build(spec)
        self.wall["schedule"] += time.perf_counter() - start
        if len(results) != job.instances or any(r["status"] != services.PLACED for r in results):
            # NoValidHost: the scheduler released every claim of the request
            # and the conductor failed its build requests.
            self.nvh += 1
            LOG.debug("%s waits: %s", job.id, results[0].get("reason") if results else "")
            return False
        by_instance = {r["instance_uuid"]: r["host_uuid"] for r in results}
        nodes = [self.by_uuid[by_instance[i]] for i in instances]
        run = _Running(job, nodes, instances, self.now, job.duration, last=self.now)
        amounts = _amounts(job)
        for node in nodes:
            for rc, amount in amounts.items():
                node.free[rc] -= amount
            node.instances.append(run)
            self.ceiling.allocate(node.family, amounts)
        self.running[job.id] = run
        self.started += 1
        self.waits[job.workload_class].append(self.now - job.arrival)
        if self.record_pending:
            # Its queued records finished in one bulk PUT /build_requests.
            finished = [
                {"instance_uuid": queued, "status": services.PLACED, "host_uuid": by_instance[inst]}
                for queued, inst in zip(self._instance_uuids(job), instances, strict=True)
            ]
            self.client.request(
                "PUT",
                placement_client.url_path("build_requests"),
                json={"build_requests": finished},
                retry=True,
            )
        self._recompute(nodes)
        return True

    def _finish(self, run):
        start = time.perf_counter()
        for inst in run.instances:
            claim_mod.unclaim(self.client, inst)
        self.wall["release"] += time.perf_counter() - start
        self._progress(run)
        del self.running[run.job.id]
        amounts = _amounts(run.job)
        for node in run.nodes:
            for rc, amount in amounts.items():
                node.free[rc] += amount
            node.instances.remove(run)
            self.ceiling.allocate(node.family, amounts, sign=-1)
        self.completed += 1
        self.slowdowns[run.job.workload_class].append((self.now - run.start) / run.job.duration)
        self.epoch += 1
        self._recompute(run.nodes)

    def _tick(self):
        start = time.perf_counter()
        result = self.controller.tick()
        self.wall["tick"] += time.perf_counter() - start
        changed = []
        for plan in result.nodes:
            node = self.nodes.get(plan.name)
            if node is None:
                continue
            desired = plan.desired
            caps = (desired["cpu_cap_watts"], desired["gpu_cap_watts"])
            klass = desired["schedulable_class"]
            if klass != node.klass:
                self.epoch += 1
            if caps != (node.cpu_cap, node.gpu_cap) or klass != node.klass:
                node.klass = klass
                node.cpu_cap, node.gpu_cap = caps
                changed.append(node)
        for transition in result.power_transitions:
            node = self.nodes.get(transition.name)
            if node is None:
                continue
            self.ceiling.power_changed(
                node.family,
                node.power == vocabulary.POWER_OFF,
                transition.after == vocabulary.POWER_OFF,
            )
            node.power = transition.after
            if transition.after == vocabulary.POWER_WAKING:
                self.wakeups += 1
            elif transition.after == vocabulary.POWER_SUSPENDING:
                self.suspends += 1
            elif transition.after == vocabulary.POWER_ON:
                self.epoch += 1  # capacity came back: retry what waits
            if node not in changed:
                changed.append(node)
        self.family_perf = {f: e["performance"] for f, e in result.families.items()}
        if changed:
            self._recompute(changed)

    def _sample(self, t, interval):
        self.samples.append(
            {
                "t": round(t, 3),
                "watts": round(self._interval_j / interval, 1),
                "running": len(self.running),
                "queued": len(self.queue),
                "performance_nodes": dict(sorted(self.family_perf.items())),
            }
        )
        self._interval_j = 0.0

    # -- the power model -----------------------------------------------------

    def _progress(self, run):
        elapsed = self.now - run.last
        if elapsed > 0:
            run.remaining = max(0.0, run.remaining - run.rate * elapsed)
            if run.job.is_performance and any(n.klass == vocabulary.ECO for n in run.nodes):
                run.eco_seconds += elapsed
                self.perf_on_eco_seconds += elapsed
                self.perf_on_eco.add(run.job.id)
        run.last = self.now

    def _recompute(self, nodes):
        start = time.perf_counter()
        touched = {}
        for node in nodes:
            loads = [
                power_mod.Load(r.job.vcpus, r.job.gpus, r.job.utilisation, r.job.sensitivity)
                for r in node.instances
            ]
            watts, speeds = power_mod.node_state(node.model, loads, node.cpu_cap, node.gpu_cap)
            if node.power == vocabulary.POWER_OFF:
                watts = self.s.off_watts  # nothing runs; the BMC draws
            self.total_watts += watts - node.watts
            if node.counted_idle:
                self.idle_watts -= node.watts
            node.counted_idle = not node.instances
            if node.counted_idle:
                self.idle_watts += watts
            node.watts = watts
            for run, speed in zip(node.instances, speeds, strict=True):
                entry = touched.setdefault(id(run), [run, {}])
                entry[1][node.name] = speed
        for run, speeds in touched.values():
            if run.job.id not in self.running:
                continue
            self._progress(run)
            # A job is as fast as its slowest instance; nodes not touched now
            # keep the speed they gave it.
            rate = min(speeds.get(n.name, _speed_on(n, run)) for n in run.nodes)
            if run.job.is_performance and any(n.klass == vocabulary.ECO for n in run.nodes):
                self.perf_on_eco.add(run.job.id)
            run.rate = rate
            run.version += 1
            self._push(self.now + run.remaining / rate, END, (run, run.version))
        self.wall["model"] += time.perf_counter() - start

    def _outcome(self):
        submitted = sum(1 for j in self.jobs if j.arrival < self.s.hours * 3600.0)
        it_kwh = self.energy_j / 3.6e6
        return Outcome(
            label=self.spec.label,
            policy=self.spec.policy,
            options=dict(self.spec.options),
            it_kwh=it_kwh,
            facility_kwh=it_kwh * self.s.pue,
            idle_kwh=self.idle_energy_j / 3.6e6,
            sleepable_kwh=self.ceiling.energy_j / 3.6e6,
            held_share=self.ceiling.held_share(),
            submitted=submitted,
            completed=self.completed,
            started=self.started,
            slowdowns=self.slowdowns,
            waits=self.waits,
            performance_on_eco=len(self.perf_on_eco),
            performance_on_eco_seconds=self.perf_on_eco_seconds,
            samples=self.samples,
            families=dict(sorted(self.families.items())),
            wall=self.wall,
            scheduler_calls=self.calls,
            no_valid_host=self.nvh,
            wakeups=self.wakeups,
            suspends=self.suspends,
        )


def _amounts(job):
    """What one instance of ``job`` holds on its node, by resource class."""
    return {"VCPU": job.vcpus, "MEMORY_MB": job.memory_mb, "PGPU": job.gpus}


def _speed_on(node, run):
    loads = [
        power_mod.Load(r.job.vcpus, r.job.gpus, r.job.utilisation, r.job.sensitivity)
        for r in node.instances
    ]
    _watts, speeds = power_mod.node_state(node.model, loads, node.cpu_cap, node.gpu_cap)
    return speeds[node.instances.index(run)]


class SimulatedPower:
    """The power driver of the simulated cluster: a node reads off
    ``shutdown_minutes`` after it was asked to power off, and on its boot
    time after it was asked to power on (GPU nodes boot slower), on the
    simulated clock. A suspending or waking node draws its idle power; an
    off one ``off_watts``."""

    def __init__(self, sim):
        self.sim = sim

    def _node(self, node):
        return self.sim.nodes[node["name"]]

    def power_off(self, node):
        n = self._node(node)
        n.switch_at = (vocabulary.POWER_OFF, self.sim.now + self.sim.s.shutdown_minutes * 60)

    def power_on(self, node):
        n = self._node(node)
        settings = self.sim.s
        minutes = settings.gpu_boot_minutes if n.kind == workload_mod.GPU else settings.boot_minutes
        n.switch_at = (vocabulary.POWER_ON, self.sim.now + minutes * 60)

    def power_state(self, node):
        n = self._node(node)
        if n.switch_at is None:
            return vocabulary.POWER_ON
        target, when = n.switch_at
        if self.sim.now >= when:
            return target
        return vocabulary.POWER_OFF if target == vocabulary.POWER_ON else vocabulary.POWER_ON
