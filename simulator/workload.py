"""The simulated workload: a seeded generator and a JSON-lines trace format.

A job is one request to the conductor (``num_instances`` instances of the
same size) that runs for ``duration`` seconds at full speed once placed. The
trace format, one JSON object per line, in arrival order::

    {"id": "job-000001", "arrival": 312.5, "workload_class": "performance",
     "kind": "gpu", "instances": 2, "vcpus": 32, "memory_mb": 262144,
     "gpus": 8, "duration": 7200.0, "utilisation": 0.85, "sensitivity": 0.4}

- ``arrival``: seconds from the start of the run;
- ``workload_class``: ``performance`` or ``standard`` (the request spec's);
- ``kind``: ``gpu`` (needs ``gpus`` >= 1 per instance, on GPU nodes) or
  ``cpu`` (``gpus`` 0, on CPU-only nodes);
- ``vcpus``, ``memory_mb``, ``gpus``: the resources of each instance;
- ``duration``: seconds of work at uncapped speed;
- ``utilisation``: 0-1, the share of its devices' dynamic power range
  the job draws when it runs uncapped;
- ``sensitivity``: 0-1, how much a power cap slows it: 0 memory or I/O
  bound (never slowed), 1 compute bound (speed proportional to the dynamic
  power it gets).

A line may carry more keys (ignored); a missing or invalid key is an error
that names the line.
"""

import dataclasses
import json
import math
import random

from joule import vocabulary

CPU = "cpu"
GPU = "gpu"
KINDS = (CPU, GPU)
DAY = 86400.0


class TraceError(ValueError):
    """A trace file cannot be used; the message names the line."""


@dataclasses.dataclass(frozen=True)
class Job:
    id: str
    arrival: float
    workload_class: str
    kind: str
    instances: int
    vcpus: int
    memory_mb: int
    gpus: int
    duration: float
    utilisation: float
    sensitivity: float

    @property
    def is_performance(self):
        return self.workload_class == vocabulary.PERFORMANCE

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data, where="trace"):
        if not isinstance(data, dict):
            raise TraceError(f"{where}: a job must be a JSON object")
        values = {}
        for field in dataclasses.fields(cls):
            if field.name not in data:
                raise TraceError(f"{where}: missing key {field.name!r}")
            values[field.name] = data[field.name]
        try:
            job = cls(
                id=str(values["id"]),
                arrival=float(values["arrival"]),
                workload_class=values["workload_class"],
                kind=values["kind"],
                instances=_int(values["instances"]),
                vcpus=_int(values["vcpus"]),
                memory_mb=_int(values["memory_mb"]),
                gpus=_int(values["gpus"]),
                duration=float(values["duration"]),
                utilisation=float(values["utilisation"]),
                sensitivity=float(values["sensitivity"]),
            )
        except (TypeError, ValueError) as exc:
            raise TraceError(f"{where}: {exc}") from None
        problems = []
        if job.workload_class not in vocabulary.WORKLOAD_CLASSES:
            problems.append(f"workload_class must be one of {vocabulary.WORKLOAD_CLASSES}")
        if job.kind not in KINDS:
            problems.append(f"kind must be one of {KINDS}")
        if job.kind == GPU and job.gpus < 1:
            problems.append("a gpu job needs gpus >= 1")
        if job.kind == CPU and job.gpus != 0:
            problems.append("a cpu job has gpus 0")
        if job.instances < 1 or job.vcpus < 1 or job.memory_mb < 1:
            problems.append("instances, vcpus and memory_mb must be >= 1")
        if not (math.isfinite(job.arrival) and job.arrival >= 0):
            problems.append("arrival must be a finite number >= 0")
        if not (math.isfinite(job.duration) and job.duration > 0):
            problems.append("duration must be > 0")
        for name in ("utilisation", "sensitivity"):
            if not 0.0 <= getattr(job, name) <= 1.0:
                problems.append(f"{name} must be within [0, 1]")
        if problems:
            raise TraceError(f"{where}: job {job.id}: " + "; ".join(problems))
        return job


def _int(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value


def read_trace(path):
    """The jobs of a JSON-lines trace, sorted by arrival (stable)."""
    jobs = []
    seen = set()
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TraceError(f"{where}: not JSON: {exc.msg}") from None
                job = Job.from_dict(data, where)
                if job.id in seen:
                    raise TraceError(f"{where}: job id {job.id!r} repeats")
                seen.add(job.id)
                jobs.append(job)
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror}") from None
    jobs.sort(key=lambda j: j.arrival)
    return jobs


def write_trace(path, jobs):
    with open(path, "w", encoding="utf-8") as handle:
        for job in jobs:
            handle.write(job.to_json() + "\n")


@dataclasses.dataclass(frozen=True)
class Capacity:
    """What the generator sizes the load against."""

    gpus: int  # GPUs in the cluster
    cpu_cores: int  # cores of the CPU-only nodes
    max_gpus_per_node: int
    max_cores_per_cpu_node: int
    memory_mb_per_gpu: int  # smallest memory per GPU of a GPU node
    memory_mb_per_core: int  # smallest memory per core of a CPU node
    gpu_nodes: int = 0
    cpu_nodes: int = 0

    @property
    def gpu_job_scale(self):
        """Multi-node jobs grow with the cluster: x1 up to 1,500 GPU nodes, x4 at 4,000."""
        return max(1, round(self.gpu_nodes / 1000))

    @property
    def cpu_job_scale(self):
        return max(1, round(self.cpu_nodes / 250))

    @classmethod
    def of(cls, nodes):
        gpu_nodes = [n.hardware for n in nodes if n.hardware.get("gpu_count")]
        cpu_nodes = [n.hardware for n in nodes if not n.hardware.get("gpu_count")]
        return cls(
            gpus=sum(h["gpu_count"] for h in gpu_nodes),
            cpu_cores=sum(h.get("cpu_cores") or 1 for h in cpu_nodes),
            max_gpus_per_node=min((h["gpu_count"] for h in gpu_nodes), default=0),
            max_cores_per_cpu_node=min((h.get("cpu_cores") or 1 for h in cpu_nodes), default=0),
            memory_mb_per_gpu=min(
                ((h.get("memory_gib") or 1) * 1024 // h["gpu_count"] for h in gpu_nodes), default=0
            ),
            memory_mb_per_core=min(
                ((h.get("memory_gib") or 1) * 1024 // (h.get("cpu_cores") or 1) for h in cpu_nodes),
                default=0,
            ),
            gpu_nodes=len(gpu_nodes),
            cpu_nodes=len(cpu_nodes),
        )


@dataclasses.dataclass(frozen=True)
class Mix:
    """The generator's knobs (the defaults are the ones docs/benchmarks.md uses)."""

    # Mean share of GPUs / CPU-node cores the day's work would keep busy. A
    # batch cluster in service runs with a queue: 0.9 with the diurnal swing
    # below peaks above capacity in the afternoon, the regime of Joulie's
    # exp02 that operators compare against (docs/decisions.md, "The
    # simulator's default day is a busy batch cluster"). 0.6 is a cluster
    # with headroom.
    load: float = 0.9
    performance_share: float = 0.3  # share of jobs in the performance class
    diurnal_amplitude: float = 0.5  # rate(t) = mean * (1 + A sin(2 pi (t - 6h) / 24h))
    median_duration: float = 6 * 3600.0
    max_duration: float = 24 * 3600.0
    # The cluster is in service when the run starts: the jobs of the day
    # before that are still running at 0:00 are there (see ``generate``).
    warm_start: bool = True


def diurnal_rate(t, amplitude):
    """Relative arrival rate at ``t`` seconds: low at night, peak at 12:00 (mean 1)."""
    return 1.0 + amplitude * math.sin(2 * math.pi * (t / DAY - 0.25))


def _duration(rng, mix):
    # Log-normal around the median, bounded: most jobs run hours, a few a day.
    return min(mix.max_duration, max(900.0, rng.lognormvariate(math.log(mix.median_duration), 0.8)))


def _gpu_job(rng, cap, mix):
    # Training and fine-tuning take whole nodes (the smallest GPU node's
    # count), often several; inference and notebooks take one or two GPUs.
    per_node = max(1, cap.max_gpus_per_node)
    gpus = rng.choices([min(1, per_node), min(2, per_node), per_node], (0.15, 0.15, 0.7))[0]
    instances = (
        rng.choices((1, 2, 4, 8), (0.3, 0.3, 0.25, 0.15))[0] * cap.gpu_job_scale
        if gpus == per_node
        else 1
    )
    return dict(
        kind=GPU,
        instances=instances,
        gpus=gpus,
        vcpus=8 * gpus,
        memory_mb=max(1024, cap.memory_mb_per_gpu * gpus // 2),
        utilisation=round(rng.uniform(0.6, 1.0), 3),
        sensitivity=round(rng.uniform(0.1, 0.7), 3),
    )


def _cpu_job(rng, cap, mix):
    per_node = max(1, cap.max_cores_per_cpu_node)
    vcpus = rng.choice([c for c in (32, 64) if c <= per_node] or [per_node])
    return dict(
        kind=CPU,
        instances=rng.choices((1, 2, 4, 8), (0.3, 0.3, 0.25, 0.15))[0] * cap.cpu_job_scale,
        gpus=0,
        vcpus=vcpus,
        memory_mb=max(1024, cap.memory_mb_per_core * vcpus // 2),
        utilisation=round(rng.uniform(0.5, 1.0), 3),
        sensitivity=round(rng.uniform(0.2, 0.9), 3),
    )


def _mean_device_seconds(sample, rng, cap, mix, device, n=4000):
    """Mean device-seconds of a job kind, by sampling the generator itself."""
    total = 0.0
    for _ in range(n):
        job = sample(rng, cap, mix)
        total += job[device] * job["instances"] * _duration(rng, mix)
    return total / n


def _pick(rates, draw):
    """The sampler whose share of the total rate ``draw`` (0-1) falls in."""
    pick = draw * sum(rate for _sampler, rate in rates)
    for sampler, rate in rates:
        if pick < rate:
            return sampler
        pick -= rate
    return rates[-1][0]


def _arrivals(rng, rates, horizon, mix, capacity, first=1, prefix="job"):
    """Poisson arrivals over [0, horizon) at the diurnal rate (thinning)."""
    peak = sum(r for _s, r in rates) * (1 + mix.diurnal_amplitude)
    jobs = []
    t = 0.0
    if peak <= 0:
        return jobs
    # Thinning: candidate arrivals at the peak rate, kept with rate(t)/peak.
    while True:
        t += rng.expovariate(peak)
        if t >= horizon:
            break
        if rng.random() * (1 + mix.diurnal_amplitude) > diurnal_rate(t, mix.diurnal_amplitude):
            continue
        fields = _pick(rates, rng.random())(rng, capacity, mix)
        wc = vocabulary.PERFORMANCE if rng.random() < mix.performance_share else vocabulary.STANDARD
        jobs.append(
            Job(
                id=f"{prefix}-{len(jobs) + first:06d}",
                arrival=round(t, 3),
                workload_class=wc,
                duration=round(_duration(rng, mix), 1),
                **fields,
            )
        )
    return jobs


def generate(capacity, hours, seed, mix=Mix()):
    """Jobs arriving over ``hours`` (Poisson, diurnal rate), sized so that
    GPU and CPU work each keep ``mix.load`` of their devices busy on average.

    With ``mix.warm_start`` the run starts in the steady state of a cluster
    in service rather than empty: the day before 0:00 is generated the same
    way (its own random stream, so the jobs arriving from 0:00 are the same
    with or without it) and each of its jobs still running at 0:00 is in
    the workload as a ``carry-`` job arriving at 0 with the work it has
    left. Without them a day starts with an empty cluster at midnight and,
    with jobs of about 6 hours, its mean load stays well under ``mix.load``
    (at load 0.6, 0.3 on average over the first 12 hours instead of 0.55
    for the 5,000 nodes): the cluster would be idle, and caps would bind
    on nothing, for a reason no cluster in service has. The start ignores
    what queued the day before; jobs that do not fit at 0:00 wait like any
    other.
    """
    rng = random.Random(f"placement-sim-workload-{seed}")
    horizon = hours * 3600.0
    rates = []  # (kind sampler, jobs per second)
    sizing = random.Random(f"placement-sim-sizing-{seed}")
    if capacity.gpus:
        mean = _mean_device_seconds(_gpu_job, sizing, capacity, mix, "gpus")
        rates.append((_gpu_job, mix.load * capacity.gpus / mean))
    if capacity.cpu_cores:
        mean = _mean_device_seconds(_cpu_job, sizing, capacity, mix, "vcpus")
        rates.append((_cpu_job, mix.load * capacity.cpu_cores / mean))
    carried = []
    if mix.warm_start:
        # Whole days (the diurnal phase of -before is that of 0:00), enough
        # to hold every job that can still run at 0:00.
        before = DAY * math.ceil(mix.max_duration / DAY)
        warm = random.Random(f"placement-sim-warm-start-{seed}")
        for job in _arrivals(warm, rates, before, mix, capacity, prefix="carry"):
            left = round(job.arrival + job.duration - before, 1)
            if left > 0:
                carried.append(dataclasses.replace(job, arrival=0.0, duration=left))
    return carried + _arrivals(rng, rates, horizon, mix, capacity)
