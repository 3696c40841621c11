"""The hardware view of a node: what the power controller knows of its parts.

A node's hardware record (written by its node agent) is the truth; without
one, its labels say it (Joulie's ``joulie.io/hw.*`` keys first, then older
and other projects' keys); when they do not say how many GPUs it has, the
PGPU inventory of its provider does (CPU model unknown then). The view's
family (``joule.vocabulary.family_key``) is what the policies split their
performance slots by; a node nothing is known of is the ``unknown`` family.
"""

import dataclasses

from joule import vocabulary

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


def view_of(node, inventories=None):
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


def problems_of(hardware):
    """What is wrong with a view, in words (the controller warns of each once):
    labels that are not counts, and a node of unknown hardware."""
    found = list(hardware.problems)
    if not hardware.known:
        found.append(
            "no known hardware (no hardware record with a CPU or GPU model, no "
            f"joulie.io/hw.cpu-model or GPU labels, no {GPU_RESOURCE_CLASS} "
            f"inventory); it is planned in the {vocabulary.UNKNOWN_FAMILY!r} family"
        )
    return found
