"""The request spec: what one scheduling request asks for, validated once.

A spec arrives as a JSON-like dict (from the conductor, a build request, a
worker's input file); ``RequestSpec.from_dict`` turns it into a frozen object
or raises ``InvalidRequestSpec`` listing every problem found, so a caller fixes
the spec in one go instead of one error at a time.
"""

import dataclasses
import re
import uuid as uuid_lib

from joule import vocabulary

GROUP_POLICIES = ("none", "isolate")

_RC_RE = re.compile(r"^[A-Z0-9_]+$")
_TRAIT_RE = re.compile(r"^[A-Z0-9_]+$")
_SUFFIX_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9_./-]{1,255}$")

# The one upper bound on instances per request: a request is one claim loop,
# and thousands of instances belong in several requests.
MAX_INSTANCES = 1000

_TOP_KEYS = {
    "request_id", "resources", "groups", "group_policy", "required", "forbidden",
    "member_of", "workload_class", "num_instances", "instance_uuids", "project_id",
    "user_id", "cell", "node_selector", "consumer_type",
}
_GROUP_KEYS = {"resources", "required", "forbidden", "member_of"}


class InvalidRequestSpec(ValueError):
    """The spec is malformed; ``problems`` lists each thing wrong."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("invalid request spec: " + "; ".join(self.problems))


@dataclasses.dataclass(frozen=True)
class Group:
    resources: dict
    required: tuple = ()
    forbidden: tuple = ()
    member_of: tuple = ()  # tuple of tuples: each inner tuple is "any of"


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    request_id: str
    project_id: str
    user_id: str
    workload_class: str
    instance_uuids: tuple
    unnumbered: Group
    groups: dict  # suffix -> Group
    group_policy: str | None = None
    cell: str | None = None
    node_selector: dict = dataclasses.field(default_factory=dict)
    consumer_type: str = "INSTANCE"

    @property
    def num_instances(self):
        return len(self.instance_uuids)

    @property
    def is_performance(self):
        return self.workload_class == vocabulary.PERFORMANCE

    def for_instances(self, instance_uuids):
        """The same spec for a subset of its instances (the conductor's resume)."""
        return dataclasses.replace(self, instance_uuids=tuple(instance_uuids))

    def to_dict(self):
        def group(g):
            out = {"resources": dict(g.resources)}
            if g.required:
                out["required"] = list(g.required)
            if g.forbidden:
                out["forbidden"] = list(g.forbidden)
            if g.member_of:
                out["member_of"] = [list(m) for m in g.member_of]
            return out

        out = {
            "request_id": self.request_id,
            "project_id": self.project_id,
            "user_id": self.user_id,
            "workload_class": self.workload_class,
            "num_instances": self.num_instances,
            "instance_uuids": list(self.instance_uuids),
            "consumer_type": self.consumer_type,
            **group(self.unnumbered),
        }
        if self.groups:
            out["groups"] = {k: group(g) for k, g in self.groups.items()}
        if self.group_policy:
            out["group_policy"] = self.group_policy
        if self.cell is not None:
            out["cell"] = self.cell
        if self.node_selector:
            out["node_selector"] = dict(self.node_selector)
        return out

    def candidate_query(self):
        """Query parameters of GET /allocation_candidates, as (key, value) pairs."""
        params = []

        def add_group(suffix, g):
            if g.resources:
                params.append((f"resources{suffix}", ",".join(
                    f"{rc}:{amount}" for rc, amount in sorted(g.resources.items()))))
            traits = list(g.required) + ["!" + t for t in g.forbidden]
            if traits:
                params.append((f"required{suffix}", ",".join(traits)))
            for any_of in g.member_of:
                params.append((f"member_of{suffix}", "in:" + ",".join(any_of)))

        add_group("", self.unnumbered)
        for suffix, g in sorted(self.groups.items()):
            add_group(suffix, g)
        if self.group_policy:
            params.append(("group_policy", self.group_policy))
        return params

    @classmethod
    def from_dict(cls, data):
        """Validate ``data``; raise InvalidRequestSpec with every problem found."""
        problems = []
        if not isinstance(data, dict):
            raise InvalidRequestSpec(["the spec must be a JSON object"])
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            problems.append(f"unknown keys {unknown}")

        unnumbered = _group(data, "", problems, require_resources=False)
        groups = {}
        raw_groups = data.get("groups", {})
        if not isinstance(raw_groups, dict):
            problems.append("groups must be an object of suffix -> group")
            raw_groups = {}
        for suffix, raw in raw_groups.items():
            if not isinstance(suffix, str) or not _SUFFIX_RE.match(suffix):
                problems.append(f"group suffix {suffix!r} must be 1-64 of [a-zA-Z0-9_-]")
                continue
            if not isinstance(raw, dict):
                problems.append(f"groups.{suffix} must be an object")
                continue
            extra = sorted(set(raw) - _GROUP_KEYS)
            if extra:
                problems.append(f"groups.{suffix}: unknown keys {extra}")
            groups[suffix] = _group(raw, f"groups.{suffix}.", problems, require_resources=True)
        if not unnumbered.resources and not groups:
            problems.append("resources: at least one resource class is required")

        group_policy = data.get("group_policy")
        if group_policy is not None and group_policy not in GROUP_POLICIES:
            problems.append(f"group_policy must be one of {list(GROUP_POLICIES)}")
        if len(groups) > 1 and group_policy is None:
            problems.append("group_policy is required with more than one numbered group")

        workload_class = data.get("workload_class", vocabulary.DEFAULT_WORKLOAD_CLASS)
        if workload_class not in vocabulary.WORKLOAD_CLASSES:
            problems.append(
                f"workload_class must be one of {list(vocabulary.WORKLOAD_CLASSES)}, "
                f"got {workload_class!r}")

        project_id = data.get("project_id")
        user_id = data.get("user_id")
        for name, value in (("project_id", project_id), ("user_id", user_id)):
            if not isinstance(value, str) or not value or len(value) > 255:
                problems.append(f"{name} is required (a string of 1-255 characters)")

        instance_uuids = _instances(data, problems)

        request_id = data.get("request_id") or f"req-{uuid_lib.uuid4()}"
        if not isinstance(request_id, str) or len(request_id) > 64:
            problems.append("request_id must be a string of at most 64 characters")

        cell = data.get("cell")
        if cell is not None and (not isinstance(cell, str) or not cell):
            problems.append("cell must be a non-empty string")

        selector = data.get("node_selector", {})
        if not isinstance(selector, dict):
            problems.append("node_selector must be an object of label -> value")
            selector = {}
        for key, value in selector.items():
            if not _LABEL_RE.match(str(key)) or not isinstance(value, str):
                problems.append(f"node_selector.{key}: labels and values must be strings")

        consumer_type = data.get("consumer_type", "INSTANCE")
        if not isinstance(consumer_type, str) or not _RC_RE.match(consumer_type):
            problems.append("consumer_type must match ^[A-Z0-9_]+$")

        if problems:
            raise InvalidRequestSpec(problems)
        return cls(
            request_id=request_id, project_id=project_id, user_id=user_id,
            workload_class=workload_class, instance_uuids=tuple(instance_uuids),
            unnumbered=unnumbered, groups=groups, group_policy=group_policy, cell=cell,
            node_selector=dict(selector), consumer_type=consumer_type)


def _group(raw, prefix, problems, require_resources):
    resources = raw.get("resources", {})
    if not isinstance(resources, dict):
        problems.append(f"{prefix}resources must be an object of class -> amount")
        resources = {}
    clean = {}
    for rc, amount in resources.items():
        if not isinstance(rc, str) or not _RC_RE.match(rc):
            problems.append(f"{prefix}resources: {rc!r} is not a resource class name")
        elif isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
            problems.append(f"{prefix}resources.{rc} must be a positive integer, got {amount!r}")
        else:
            clean[rc] = amount
    if require_resources and not resources:
        problems.append(f"{prefix}resources: a numbered group needs resources")
    traits = {}
    for key in ("required", "forbidden"):
        values = raw.get(key, [])
        if not isinstance(values, list) or not all(
                isinstance(t, str) and _TRAIT_RE.match(t) for t in values):
            problems.append(f"{prefix}{key} must be a list of trait names (^[A-Z0-9_]+$)")
            values = []
        traits[key] = tuple(values)
    both = set(traits["required"]) & set(traits["forbidden"])
    if both:
        problems.append(f"{prefix}traits both required and forbidden: {sorted(both)}")
    member_of = raw.get("member_of", [])
    clean_member = []
    if not isinstance(member_of, list):
        problems.append(f"{prefix}member_of must be a list of lists of aggregate uuids")
        member_of = []
    for any_of in member_of:
        if isinstance(any_of, str):
            any_of = [any_of]
        if not isinstance(any_of, list) or not any_of or not all(
                isinstance(u, str) and _UUID_RE.match(u) for u in any_of):
            problems.append(f"{prefix}member_of entries must be non-empty lists of uuids")
            continue
        clean_member.append(tuple(any_of))
    return Group(clean, traits["required"], traits["forbidden"], tuple(clean_member))


def _instances(data, problems):
    num = data.get("num_instances")
    uuids = data.get("instance_uuids")
    if uuids is not None:
        if not isinstance(uuids, list) or not uuids or not all(
                isinstance(u, str) and _UUID_RE.match(u) for u in uuids):
            problems.append("instance_uuids must be a non-empty list of uuids")
            return []
        uuids = [str(uuid_lib.UUID(u)) for u in uuids]
        if len(set(uuids)) != len(uuids):
            problems.append("instance_uuids must not repeat")
        if num is not None and num != len(uuids):
            problems.append(f"num_instances is {num} but {len(uuids)} instance_uuids are given")
        if len(uuids) > MAX_INSTANCES:
            problems.append(f"at most {MAX_INSTANCES} instances per request")
        return uuids
    if num is None:
        num = 1
    if isinstance(num, bool) or not isinstance(num, int) or not 1 <= num <= MAX_INSTANCES:
        problems.append(f"num_instances must be an integer from 1 to {MAX_INSTANCES}")
        return []
    return [str(uuid_lib.uuid4()) for _ in range(num)]
