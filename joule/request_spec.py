"""The scheduler's wire contract: request spec, selections, build result.

Three messages travel between the services (and through the JSON-lines tools
and placement's build-request records):

* ``request_spec``: what one scheduling request asks for (the conductor, a
  ``--requests`` file or a build-request record hands it to the scheduler);
* ``selections``: the scheduler's answer, per instance the selected host and
  its same-cell alternates, each with the allocation request that claims it;
* ``build_result``: what became of one instance.

Each is defined once here as a marshmallow schema: ``load`` validates and
returns the domain object, ``dump`` serialises it. Every message carries
``"version": "MAJOR.MINOR"``. A receiver refuses a message of a newer MAJOR
(the meaning of a field changed), accepts any MINOR of its own MAJOR, and
refuses any field it does not know (``unknown = RAISE``): a sender that needs
a field added in minor 1.N must talk to a receiver of at least 1.N, and finds
out from a clear error instead of a silent drop. Adding an optional field with
a default is a minor version; renaming, removing or changing the meaning of
one is a major version.

Every value that can end up in a URL path (request id, instance and consumer
uuids, project and user ids, cell names) has a strict pattern: no ``/``,
``?``, ``#``, ``%``, whitespace or control character, and it cannot be ``.``
or ``..``. A spec saying ``"request_id": "../traits/CUSTOM_X"`` is refused
here, before anything is sent anywhere.
"""

import dataclasses
import json
import re
import uuid as uuid_lib

import marshmallow
from marshmallow import fields
from marshmallow import validate

from joule import message_fast_path as fast_path
from joule import vocabulary

# Versions of the messages this code speaks; bump MINOR when adding an
# optional field, MAJOR when changing what an existing field means.
REQUEST_SPEC_VERSION = "1.4"
SELECTIONS_VERSION = "1.0"
BUILD_RESULT_VERSION = "1.0"

WORKLOAD_CLASSES = vocabulary.WORKLOAD_CLASSES
GROUP_POLICIES = ("none", "isolate")
BUILD_STATUSES = ("placed", "failed", "skipped")

# The one upper bound on instances per request: a request is one claim loop,
# and thousands of instances belong in several requests.
MAX_INSTANCES = 1000

# Bounds on what one message may carry (docs/architecture.md, "The request
# spec"): a receiver refuses more, naming the field and the limit, before it
# does any work for it. Every spec list (``required``, ``forbidden``,
# ``member_of`` and each of its entries, ``groups``, ``node_selector``,
# ``force_hosts``, ``force_nodes``; a numbered group's lists too) holds at
# most MAX_SPEC_LIST entries; ``same_host`` / ``different_host`` name
# instances, at most MAX_INSTANCES.
MAX_SPEC_LIST = 100
# Request specs in one build_instances_many / select_destinations_many
# message (the largest [conductor] schedule_batch_size and build-submit
# --requests-per-message).
MAX_REQUESTS_PER_MESSAGE = 1000
# Builds in one build_many message (the largest [conductor] batch_size).
MAX_BUILDS_PER_MESSAGE = 10000
# A reply topic: what build-submit makes (``[rpc] topic_prefix`` +
# ``build-submit.<hex>``); a name safe for any broker, never a structure.
REPLY_TOPIC_MAX = 255
REPLY_TOPIC_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]*$"

# Ids: start with a letter or digit (so never "." or ".."), then letters,
# digits, "_", "." and "-" only: safe as a URL path segment as they are.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
REQUEST_ID_MAX = 64  # placement's build_requests/scheduling_reports column
ID_MAX = 255
UUID_PATTERN = (
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
    r"[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
NAME_PATTERN = r"^[A-Z0-9_]+$"  # resource classes, traits, consumer types
SUFFIX_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"  # upstream's request group suffix
LABEL_PATTERN = r"^[A-Za-z0-9_./-]{1,255}$"  # node labels: matched locally, never in a URL
LABEL_VALUE_PATTERN = r"^[^\x00-\x1f\x7f]{0,255}$"
VERSION_PATTERN = re.compile(r"^([0-9]{1,4})\.([0-9]{1,4})$")

_ID_RE = re.compile(ID_PATTERN)
_REPLY_TOPIC_RE = re.compile(REPLY_TOPIC_PATTERN)
UNKNOWN_FIELD = "unknown field: this receiver does not know it"


def is_safe_id(value, max_length=ID_MAX):
    """Whether ``value`` matches the id pattern (for receivers outside a schema)."""
    return isinstance(value, str) and len(value) <= max_length and bool(_ID_RE.match(value))


def reply_topic_problem(value):
    """What is wrong with a message's ``reply_topic``, or None when it is a
    topic this process may cast to (None itself: no submitter to answer)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        return f"reply_topic must be a non-empty string, got {type(value).__name__}"
    if len(value) > REPLY_TOPIC_MAX:
        return f"reply_topic is longer than {REPLY_TOPIC_MAX} characters"
    if not _REPLY_TOPIC_RE.match(value):
        return (
            f"reply_topic {value[:80]!r} is not a topic: letters, digits, "
            "'_', '.', ':', '@' and '-' only, starting with a letter or digit"
        )
    return None


def list_problem(field, value, limit):
    """What is wrong with a message's list ``field`` (not a list, or longer
    than ``limit``), or None."""
    if not isinstance(value, list):
        return f"{field} must be a list, got {type(value).__name__}"
    if len(value) > limit:
        return f"{field}: at most {limit} entries per message, got {len(value)}"
    return None


def _at_most(what="entries"):
    return validate.Length(max=MAX_SPEC_LIST, error=f"at most {{max}} {what}")


class InvalidMessage(ValueError):
    """A message failed to load; ``problems`` lists each thing wrong, as
    ``"field.path: what is wrong"``, so a sender fixes it in one go.
    ``unsupported_version`` is true when the message's MAJOR is not ours."""

    def __init__(self, message, problems, unsupported_version=False):
        self.message = message
        self.problems = list(problems)
        self.unsupported_version = unsupported_version
        super().__init__(f"invalid {message.replace('_', ' ')}: " + "; ".join(self.problems))


class InvalidRequestSpec(InvalidMessage):
    """The request spec is malformed or of a version this receiver refuses."""


# -- fields --------------------------------------------------------------------


def _id(max_length, what):
    return validate.And(
        validate.Length(
            min=1, max=max_length, error=f"must be a {what} of 1-{max_length} characters"
        ),
        validate.Regexp(
            ID_PATTERN,
            error=f"{{input!r}} is not a valid {what}: letters, "
            "digits, '_', '.' and '-' only, starting with a letter or digit",
        ),
    )


def _name(what):
    return validate.And(
        validate.Length(min=1, max=255, error=f"must be a {what} of 1-255 characters"),
        validate.Regexp(NAME_PATTERN, error=f"{{input!r}} is not a {what} ({NAME_PATTERN})"),
    )


class Uuid(fields.String):
    """A uuid string, with or without dashes; loads to the canonical lowercase
    dashed form (what placement stores and what goes into a path)."""

    default_error_messages = {"invalid_uuid": "{input!r} is not a uuid"}

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if not re.match(UUID_PATTERN, text):
            raise self.make_error("invalid_uuid", input=text)
        return str(uuid_lib.UUID(text))


class AnyOf(fields.List):
    """One ``member_of`` entry: a uuid, or a non-empty list of uuids meaning
    "in any of these aggregates"."""

    def __init__(self, **kwargs):
        super().__init__(
            Uuid(),
            validate=validate.And(
                validate.Length(min=1, error="must name at least one aggregate"),
                validate.Length(max=MAX_SPEC_LIST, error="at most {max} aggregates"),
            ),
            **kwargs,
        )

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            value = [value]
        return tuple(super()._deserialize(value, attr, data, **kwargs))


_NOT_AN_AMOUNT = {"invalid": "must be a positive integer", "strict": "must be a positive integer"}


def _positive_amounts():
    return fields.Dict(
        keys=fields.String(validate=_name("resource class name")),
        values=fields.Integer(
            strict=True,
            error_messages=_NOT_AN_AMOUNT,
            validate=validate.Range(min=1, error="must be a positive integer, got {input!r}"),
        ),
        load_default=dict,
    )


def _traits():
    return fields.List(
        fields.String(validate=_name("trait name")),
        load_default=list,
        validate=_at_most("traits"),
    )


def _member_of():
    return fields.List(AnyOf(), load_default=list, validate=_at_most("member_of entries"))


# -- schemas -------------------------------------------------------------------


class _Strict(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.RAISE

    error_messages = {"unknown": UNKNOWN_FIELD, "type": "must be a JSON object"}


class Message(_Strict):
    """A top-level message: carries ``version`` and is refused when its MAJOR
    is not the receiver's. Subclasses set ``MESSAGE`` and ``VERSION``.

    Adding a field: give it a default (``load_default``) and
    ``metadata={"since": "1.N"}``, and bump ``VERSION`` to ``1.N``; a message
    that says an older minor and still uses the field is refused, so the
    version a sender writes is the one it needs (a unit test checks the rule).
    """

    MESSAGE = "message"
    VERSION = "1.0"

    version = fields.String(required=True, metadata={"description": "MAJOR.MINOR"})

    def load(self, data, **kwargs):
        """Validate ``data``; return the domain object.

        :raise marshmallow.ValidationError: with every problem found; a
            version this receiver refuses is the only problem reported.
        """
        problem, _unsupported = self.version_problem(data)
        if problem is not None:
            raise marshmallow.ValidationError({"version": [problem]})
        too_new = self._fields_newer_than(data)
        try:
            result = super().load(data, **kwargs)
        except marshmallow.ValidationError as exc:
            raise marshmallow.ValidationError({**too_new, **exc.normalized_messages()})
        if too_new:
            raise marshmallow.ValidationError(too_new)
        return result

    def _fields_newer_than(self, data):
        """{field: [problem]} for fields ``data`` uses that its version lacks."""
        if not isinstance(data, dict):
            return {}
        said = _version_tuple(data["version"])
        out = {}
        for name in data:
            field = self.fields.get(name)
            since = field.metadata.get("since") if field is not None else None
            if since and _version_tuple(since) > said:
                out[name] = [
                    f"is new in {self.MESSAGE} {since}; the message says "
                    f"{data['version']} (say {since} or later to use it)"
                ]
        return out

    def dump(self, obj, **kwargs):
        out = super().dump(obj, **kwargs)
        out["version"] = self.VERSION
        return out

    def version_problem(self, data):
        """(what is wrong with ``data``'s version or None, whether it is a
        major version this receiver refuses)."""
        if not isinstance(data, dict):
            return None, False  # the schema says "must be a JSON object"
        version = data.get("version")
        if version is None:
            return (
                f"is required: every {self.MESSAGE} says which version of the "
                f"contract it follows (this receiver speaks {self.VERSION})"
            ), False
        match = VERSION_PATTERN.match(version) if isinstance(version, str) else None
        if match is None:
            return f'must be a string "MAJOR.MINOR", got {version!r}', False
        major = int(match.group(1))
        ours = int(self.VERSION.split(".")[0])
        if major > ours:
            return (
                f"{self.MESSAGE} {version} is newer than this receiver understands "
                f"(it speaks {self.VERSION}, any {ours}.x); upgrade the receiver or "
                f"send a {ours}.x message"
            ), True
        if major < ours:
            return (
                f"{self.MESSAGE} {version} is no longer understood (this receiver "
                f"speaks {self.VERSION}); resend it as a {ours}.x message"
            ), True
        return None, False


def _version_tuple(text):
    major, minor = VERSION_PATTERN.match(text).groups()
    return int(major), int(minor)


class GroupSchema(_Strict):
    """A numbered request group (``resources<suffix>`` and friends upstream)."""

    resources = _positive_amounts()
    required = _traits()
    forbidden = _traits()
    member_of = _member_of()

    @marshmallow.validates_schema
    def _check(self, data, **kwargs):
        _check_group(data, require_resources=True)

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        return Group(
            dict(data["resources"]),
            tuple(data["required"]),
            tuple(data["forbidden"]),
            tuple(data["member_of"]),
        )

    @marshmallow.pre_dump
    def _wire(self, group, **kwargs):
        return _group_dict(group)


# Namespace of the instance uuids derived from a request id (uuid5).
INSTANCE_NAMESPACE = uuid_lib.UUID("6a6f756c-6500-4000-8000-696e7374616e")


def instance_uuids_for(request_id, count):
    """Instance uuids of a spec that gives none: derived from its request id
    (uuid5 of ``<request_id>/<index>``), so the same spec sent again after a
    crash names the same instances, and placement (consumer generations,
    build-request records) refuses to do the work twice. A spec without a
    request id gets fresh random ones: only a request id makes a resubmission
    recognisable."""
    if request_id is None:
        return [str(uuid_lib.uuid4()) for _ in range(count)]
    return [str(uuid_lib.uuid5(INSTANCE_NAMESPACE, f"{request_id}/{i}")) for i in range(count)]


class SchedulerHintsSchema(_Strict):
    """Nova's scheduler hints of the same names. ``same_host`` /
    ``different_host``: instance uuids whose hosts the request must share /
    avoid; ``force_hosts`` / ``force_nodes``: host / node names the request is
    limited to (an admin's; every spec comes from a trusted service)."""

    same_host = fields.List(
        Uuid(),
        load_default=list,
        validate=validate.Length(max=MAX_INSTANCES, error="at most {max} instance uuids"),
    )
    different_host = fields.List(
        Uuid(),
        load_default=list,
        validate=validate.Length(max=MAX_INSTANCES, error="at most {max} instance uuids"),
    )
    force_hosts = fields.List(
        fields.String(validate=validate.Length(min=1, max=ID_MAX)),
        load_default=list,
        validate=_at_most("host names"),
    )
    force_nodes = fields.List(
        fields.String(validate=validate.Length(min=1, max=ID_MAX)),
        load_default=list,
        validate=_at_most("node names"),
    )

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        return SchedulerHints(**{k: tuple(v) for k, v in data.items()})

    @marshmallow.pre_dump
    def _wire(self, hints, **kwargs):
        return {k: list(v) for k, v in dataclasses.asdict(hints).items() if v}


# Bounds on a workload (what an exec instance runs): an argv, an
# environment and a working directory the agent passes to the kernel as
# they are, so no NUL anywhere and sizes a command line can hold.
MAX_WORKLOAD_ARGS = 256
MAX_WORKLOAD_ENV = 256
MAX_WORKLOAD_TEXT = 4096
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


def _no_nul(what):
    def check(value):
        if "\0" in value:
            raise marshmallow.ValidationError(f"{what} must not hold a NUL character")
        if len(value) > MAX_WORKLOAD_TEXT:
            raise marshmallow.ValidationError(
                f"{what} is at most {MAX_WORKLOAD_TEXT} characters, got {len(value)}"
            )

    return check


def _absolute(value):
    if not value.startswith("/"):
        raise marshmallow.ValidationError(f"must be an absolute path, got {value!r}")


class WorkloadSchema(_Strict):
    """What an instance runs where its driver runs commands (the node
    agent's exec driver): ``command`` an argv (the program is looked up in
    the environment's PATH), ``env`` added to the agent's base environment,
    ``cwd`` the working directory (default ``/``)."""

    command = fields.List(
        fields.String(validate=_no_nul("a command argument")),
        required=True,
        validate=validate.Length(
            min=1, max=MAX_WORKLOAD_ARGS, error="must list 1 to {max} arguments"
        ),
    )
    env = fields.Dict(
        keys=fields.String(
            validate=validate.Regexp(
                ENV_NAME_PATTERN,
                error="environment name {input!r} must match [A-Za-z_][A-Za-z0-9_]*",
            )
        ),
        values=fields.String(validate=_no_nul("an environment value")),
        load_default=dict,
        validate=validate.Length(max=MAX_WORKLOAD_ENV, error="at most {max} variables"),
    )
    cwd = fields.String(load_default=None, allow_none=True, validate=[_no_nul("cwd"), _absolute])

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        return Workload(tuple(data["command"]), dict(data["env"]), data["cwd"])

    @marshmallow.pre_dump
    def _wire(self, workload, **kwargs):
        out = {"command": list(workload.command)}
        if workload.env:
            out["env"] = dict(workload.env)
        if workload.cwd is not None:
            out["cwd"] = workload.cwd
        return out


class RequestSpecSchema(Message):
    """One scheduling request. Fields, types and defaults are documented in
    docs/architecture.md ("The request spec"); keep the two in step."""

    MESSAGE = "request_spec"
    VERSION = REQUEST_SPEC_VERSION

    request_id = fields.String(validate=_id(REQUEST_ID_MAX, "request id"))
    project_id = fields.String(required=True, validate=_id(ID_MAX, "project id"))
    user_id = fields.String(required=True, validate=_id(ID_MAX, "user id"))
    workload_class = fields.String(
        load_default=vocabulary.DEFAULT_WORKLOAD_CLASS,
        validate=validate.OneOf(WORKLOAD_CLASSES, error="must be one of {choices}, got {input!r}"),
    )
    num_instances = fields.Integer(
        strict=True,
        validate=validate.Range(
            min=1, max=MAX_INSTANCES, error="must be an integer from {min} to {max}"
        ),
    )
    instance_uuids = fields.List(
        Uuid(),
        validate=validate.Length(
            min=1, max=MAX_INSTANCES, error="must list 1 to {max} instance uuids"
        ),
    )
    # The unnumbered request group, at the top level as upstream's query has it.
    resources = _positive_amounts()
    required = _traits()
    forbidden = _traits()
    member_of = _member_of()
    groups = fields.Dict(
        keys=fields.String(
            validate=validate.Regexp(
                SUFFIX_PATTERN, error="group suffix {input!r} must be 1-64 of [a-zA-Z0-9_-]"
            )
        ),
        values=fields.Nested(GroupSchema),
        load_default=dict,
        validate=_at_most("numbered groups"),
    )
    group_policy = fields.String(
        load_default=None,
        allow_none=True,
        validate=validate.OneOf(GROUP_POLICIES, error="must be one of {choices}, got {input!r}"),
    )
    cell = fields.String(load_default=None, allow_none=True, validate=_id(ID_MAX, "cell name"))
    node_selector = fields.Dict(
        keys=fields.String(
            validate=validate.Regexp(
                LABEL_PATTERN, error="label {input!r} must be 1-255 of [A-Za-z0-9_./-]"
            )
        ),
        values=fields.String(
            validate=validate.Regexp(
                LABEL_VALUE_PATTERN,
                error="label values are at most 255 characters, no control characters",
            )
        ),
        load_default=dict,
        validate=_at_most("labels"),
    )
    consumer_type = fields.String(load_default="INSTANCE", validate=_name("consumer type"))
    server_group = Uuid(load_default=None, allow_none=True, metadata={"since": "1.1"})
    scheduler_hints = fields.Nested(
        SchedulerHintsSchema, load_default=None, allow_none=True, metadata={"since": "1.2"}
    )
    availability_zone = fields.String(
        load_default=None,
        allow_none=True,
        validate=_id(ID_MAX, "availability zone"),
        metadata={"since": "1.3"},
    )
    workload = fields.Nested(
        WorkloadSchema, load_default=None, allow_none=True, metadata={"since": "1.4"}
    )

    @marshmallow.validates_schema
    def _check(self, data, **kwargs):
        problems = {}
        try:
            _check_group(data, require_resources=False)
        except marshmallow.ValidationError as exc:
            problems.update(exc.normalized_messages())
        if not data.get("resources") and not data.get("groups"):
            problems.setdefault("resources", []).append(
                "at least one resource class is required (here or in a numbered group)"
            )
        if len(data.get("groups") or {}) > 1 and data.get("group_policy") is None:
            problems.setdefault("group_policy", []).append(
                "is required with more than one numbered group"
            )
        uuids = data.get("instance_uuids")
        num = data.get("num_instances")
        if uuids is not None:
            if len(set(uuids)) != len(uuids):
                problems.setdefault("instance_uuids", []).append("must not repeat")
            if num is not None and num != len(uuids):
                problems.setdefault("num_instances", []).append(
                    f"is {num} but {len(uuids)} instance_uuids are given"
                )
        if problems:
            raise marshmallow.ValidationError(problems)

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        request_id, uuids = _ids(
            data.get("request_id"), data.get("num_instances"), data.get("instance_uuids")
        )
        return RequestSpec(
            request_id=request_id,
            project_id=data["project_id"],
            user_id=data["user_id"],
            workload_class=data["workload_class"],
            instance_uuids=uuids,
            resources=dict(data["resources"]),
            required=tuple(data["required"]),
            forbidden=tuple(data["forbidden"]),
            member_of=tuple(data["member_of"]),
            groups=dict(data["groups"]),
            group_policy=data["group_policy"],
            cell=data["cell"],
            node_selector=dict(data["node_selector"]),
            consumer_type=data["consumer_type"],
            server_group=data["server_group"],
            scheduler_hints=data["scheduler_hints"] or SchedulerHints(),
            availability_zone=data["availability_zone"],
            workload=data["workload"],
        )

    @marshmallow.pre_dump
    def _wire(self, spec, **kwargs):
        out = {
            "request_id": spec.request_id,
            "project_id": spec.project_id,
            "user_id": spec.user_id,
            "workload_class": spec.workload_class,
            "num_instances": spec.num_instances,
            "instance_uuids": list(spec.instance_uuids),
            "consumer_type": spec.consumer_type,
            **_group_dict(spec.unnumbered),
        }
        if spec.groups:
            out["groups"] = spec.groups  # Nested dumps each Group
        if spec.group_policy is not None:
            out["group_policy"] = spec.group_policy
        if spec.cell is not None:
            out["cell"] = spec.cell
        if spec.node_selector:
            out["node_selector"] = dict(spec.node_selector)
        if spec.server_group is not None:
            out["server_group"] = spec.server_group
        if spec.scheduler_hints:
            out["scheduler_hints"] = spec.scheduler_hints  # Nested dumps it
        if spec.availability_zone is not None:
            out["availability_zone"] = spec.availability_zone
        if spec.workload is not None:
            out["workload"] = spec.workload  # Nested dumps it
        return out


class _ProviderAllocationSchema(_Strict):
    resources = _positive_amounts()


class AllocationRequestSchema(_Strict):
    """One allocation request as placement's candidates answer gives it: what
    a PUT /allocations/{consumer} body needs besides the consumer's ids."""

    allocations = fields.Dict(
        keys=Uuid(),
        values=fields.Nested(_ProviderAllocationSchema),
        required=True,
        validate=validate.Length(min=1, error="must name a provider"),
    )
    mappings = fields.Dict(keys=fields.String(), values=fields.List(Uuid()))


class SelectionSchema(_Strict):
    """One host for one instance. ``claimed`` is true for the selected host
    (the scheduler already holds its allocation) and false for alternates,
    which carry what claiming them later needs: the allocation request and
    the placement microversion it was made at (a claim must be sent at that
    version or later, as nova's Selection says), plus the spec's project,
    user, workload class and consumer type, which travel with the spec."""

    instance_uuid = Uuid(required=True)
    host_uuid = Uuid(required=True)
    host_name = fields.String(load_default=None, allow_none=True)
    cell = fields.String(load_default=None, allow_none=True, validate=_id(ID_MAX, "cell name"))
    allocation_request = fields.Nested(AllocationRequestSchema, required=True)
    claimed = fields.Boolean(load_default=False)
    schedulable_class = fields.String(load_default=None, allow_none=True)
    family = fields.String(load_default=None, allow_none=True)
    allocation_request_version = fields.String(
        load_default=None,
        allow_none=True,
        validate=validate.Regexp(r"^1\.[0-9]{1,3}$", error="must be a placement microversion 1.N"),
    )

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        return Selection(**data)


class SelectionsSchema(Message):
    """The scheduler's answer to one request spec: per instance, in the
    spec's order, ``[selected, *alternates]``."""

    MESSAGE = "selections"
    VERSION = SELECTIONS_VERSION

    request_id = fields.String(required=True, validate=_id(REQUEST_ID_MAX, "request id"))
    selections = fields.List(
        fields.List(
            fields.Nested(SelectionSchema),
            validate=(validate.Length(min=1, error="each instance needs a selected host")),
        ),
        required=True,
    )

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        return Selections(data["request_id"], [list(hosts) for hosts in data["selections"]])


class BuildResultSchema(Message):
    """What became of one instance (the conductor's answer)."""

    MESSAGE = "build_result"
    VERSION = BUILD_RESULT_VERSION

    instance_uuid = Uuid(required=True)
    request_id = fields.String(required=True, validate=_id(REQUEST_ID_MAX, "request id"))
    workload_class = fields.String(required=True, validate=validate.OneOf(WORKLOAD_CLASSES))
    status = fields.String(required=True, validate=validate.OneOf(BUILD_STATUSES))
    host_uuid = Uuid(load_default=None, allow_none=True)
    host_name = fields.String(load_default=None, allow_none=True)
    schedulable_class = fields.String(load_default=None, allow_none=True)
    family = fields.String(load_default=None, allow_none=True)
    reason = fields.String(load_default=None, allow_none=True)
    attempts = fields.Integer(strict=True, load_default=0, validate=validate.Range(min=0))
    rescheduled = fields.Integer(strict=True, load_default=0, validate=validate.Range(min=0))

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        data.pop("version")  # checked; the domain object is version-free
        return BuildResult(**data)


def _check_group(data, require_resources):
    problems = {}
    if require_resources and not data.get("resources"):
        problems["resources"] = ["a numbered group needs resources"]
    both = set(data.get("required", ())) & set(data.get("forbidden", ()))
    if both:
        problems["forbidden"] = [f"traits both required and forbidden: {sorted(both)}"]
    if problems:
        raise marshmallow.ValidationError(problems)


def _group_dict(group):
    out = {"resources": dict(group.resources)}
    if group.required:
        out["required"] = list(group.required)
    if group.forbidden:
        out["forbidden"] = list(group.forbidden)
    if group.member_of:
        out["member_of"] = [list(m) for m in group.member_of]
    return out


# -- domain objects ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Group:
    resources: dict
    required: tuple = ()
    forbidden: tuple = ()
    member_of: tuple = ()  # tuple of tuples: each inner tuple is "any of"


@dataclasses.dataclass(frozen=True)
class Workload:
    """What an instance runs (WorkloadSchema): an argv, environment, cwd."""

    command: tuple
    env: dict = dataclasses.field(default_factory=dict, hash=False)
    cwd: str | None = None

    def to_agent(self):
        """The form the node agent's build takes."""
        return {"command": list(self.command), "env": dict(self.env), "cwd": self.cwd}


@dataclasses.dataclass(frozen=True)
class SchedulerHints:
    same_host: tuple = ()
    different_host: tuple = ()
    force_hosts: tuple = ()
    force_nodes: tuple = ()

    def __bool__(self):
        return bool(self.same_host or self.different_host or self.force_hosts or self.force_nodes)


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    request_id: str
    project_id: str
    user_id: str
    workload_class: str
    instance_uuids: tuple
    resources: dict  # the unnumbered group's
    required: tuple = ()
    forbidden: tuple = ()
    member_of: tuple = ()
    groups: dict = dataclasses.field(default_factory=dict)  # suffix -> Group
    group_policy: str | None = None
    cell: str | None = None
    node_selector: dict = dataclasses.field(default_factory=dict)
    consumer_type: str = "INSTANCE"
    server_group: str | None = None  # since 1.1
    scheduler_hints: SchedulerHints = SchedulerHints()  # since 1.2
    availability_zone: str | None = None  # since 1.3
    workload: "Workload | None" = None  # since 1.4

    @property
    def unnumbered(self):
        return Group(self.resources, self.required, self.forbidden, self.member_of)

    @property
    def num_instances(self):
        return len(self.instance_uuids)

    @property
    def is_performance(self):
        return self.workload_class == vocabulary.PERFORMANCE

    def for_instances(self, instance_uuids):
        """The same spec for a subset of its instances (one build request's)."""
        return dataclasses.replace(self, instance_uuids=tuple(instance_uuids))

    def candidate_query(self):
        """Query parameters of GET /allocation_candidates, as (key, value) pairs."""
        params = []

        def add_group(suffix, g):
            if g.resources:
                params.append(
                    (
                        f"resources{suffix}",
                        ",".join(f"{rc}:{amount}" for rc, amount in sorted(g.resources.items())),
                    )
                )
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


@dataclasses.dataclass
class Selection:
    """One host for one instance: claimed when selected, not for alternates."""

    instance_uuid: str
    host_uuid: str
    host_name: str | None
    cell: str | None
    allocation_request: dict
    claimed: bool = False
    # Node data at selection time, for the conductor's records and the demo.
    schedulable_class: str | None = None
    family: str | None = None
    # The placement microversion the allocation request came from.
    allocation_request_version: str | None = None


@dataclasses.dataclass
class Selections:
    request_id: str
    selections: list  # per instance: [selected Selection, *alternate Selections]


@dataclasses.dataclass
class BuildResult:
    instance_uuid: str
    request_id: str
    workload_class: str
    status: str
    host_uuid: str | None = None
    host_name: str | None = None
    schedulable_class: str | None = None
    family: str | None = None
    reason: str | None = None
    attempts: int = 0
    rescheduled: int = 0  # times the claim moved to an alternate


# -- load and dump -------------------------------------------------------------


# Building a schema costs more than loading a message with it (~0.5 ms), and
# a schema keeps no state between loads: one instance of each serves all.
_REQUEST_SPEC = RequestSpecSchema()
_SELECTIONS = SelectionsSchema()
_BUILD_RESULT = BuildResultSchema()
_UUID_RE = re.compile(UUID_PATTERN)


def load_request_spec(data):
    """The RequestSpec of wire ``data``.

    :raise InvalidRequestSpec: with every problem found; nothing else raises.
    """
    spec = fast_path.load_request_spec(data, _plain_spec, _SPEC_LIMITS)
    if spec is not None:
        return spec
    return _load(_REQUEST_SPEC, data, InvalidRequestSpec)


_SPEC_LIMITS = (REQUEST_ID_MAX, ID_MAX, MAX_INSTANCES, MAX_SPEC_LIST)


def _plain_spec(request_id, num_instances, instance_uuids, **fields):
    """The RequestSpec of a spec without optional parts (joule.message_fast_path)."""
    request_id, uuids = _ids(request_id, num_instances, instance_uuids)
    return RequestSpec(request_id=request_id, instance_uuids=uuids, **fields)


def _ids(request_id, num_instances, instance_uuids):
    """(request id, instance uuids) of a loaded spec, its defaults filled in:
    uuids derived from the request id when none are given (one instance
    unless ``num_instances`` says), a fresh request id when none is."""
    if instance_uuids is None:
        instance_uuids = instance_uuids_for(request_id, num_instances or 1)
    return request_id or f"req-{uuid_lib.uuid4()}", tuple(instance_uuids)


def dump_request_spec(spec):
    return _REQUEST_SPEC.dump(spec)


# The fields of a spec that are its own, not its kind's (kind_key).
_PER_REQUEST_FIELDS = frozenset({"request_id", "instance_uuids", "num_instances", "server_group"})


def kind_key(dumped):
    """The kind of a spec in its wire form (``dump_request_spec``): specs of
    one kind can share one candidate walk (scheduler.batching). Everything
    but the spec's ids, instances and server group (applied per member);
    without granular groups the resource classes, not their amounts (a walk
    for the smaller amounts serves the larger ones). A super conductor sends
    each kind to one scheduler worker by it (conductor.scheduler_routing),
    so the scheduler and the conductors must agree on it."""
    data = {k: v for k, v in dumped.items() if k not in _PER_REQUEST_FIELDS}
    if not dumped.get("groups"):
        data["resources"] = sorted(dumped.get("resources") or ())
    return json.dumps(data, sort_keys=True, default=str)


def canonical_request_specs(items):
    """Yield (RequestSpec, its wire form as dumped) for each wire spec of ``items``.

    The same as ``load_request_spec`` then ``dump_request_spec`` on each, but
    specs that differ only in their ``instance_uuids`` (one per instance of a
    request: a bulk of build requests) are validated and dumped once; each
    further one only has its uuids checked. Anything the shortcut is not
    sure of takes the full load, so the errors are the full load's.

    :raise InvalidRequestSpec: when the next item does not load.
    """
    done = {}  # the spec without its instance_uuids (JSON) -> (spec, wire)
    for data in items:
        key = _shared_part(data)
        known = done.get(key) if key is not None else None
        uuids = _instances_of(data, known[0]) if known is not None else None
        if uuids is not None:
            yield known[0].for_instances(uuids), {**known[1], "instance_uuids": list(uuids)}
            continue
        spec = load_request_spec(data)
        wire = dump_request_spec(spec)
        if key is not None:
            done[key] = (spec, wire)
        yield spec, wire


def _shared_part(data):
    """What specs of one request share, as a key; None when the shortcut does
    not apply (no explicit request id or instance list)."""
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("request_id"), str)
        or not isinstance(data.get("instance_uuids"), list)
    ):
        return None
    try:
        return json.dumps({k: v for k, v in data.items() if k != "instance_uuids"}, sort_keys=True)
    except (TypeError, ValueError):
        return None


def _instances_of(data, like):
    """``data``'s instance uuids in canonical form when the schema would take
    them in a spec otherwise equal to ``like``'s; None when unsure."""
    raw = data["instance_uuids"]
    if len(raw) != like.num_instances:  # num_instances, when given, matched like's
        return None
    if not all(isinstance(u, str) and _UUID_RE.match(u) for u in raw):
        return None
    uuids = tuple(str(uuid_lib.UUID(u)) for u in raw)
    return uuids if len(set(uuids)) == len(uuids) else None


def load_selections(data):
    """:raise InvalidMessage: the message is malformed or of another major."""
    loaded = fast_path.load_selections(data, Selections, Selection, REQUEST_ID_MAX, ID_MAX)
    if loaded is not None:
        return loaded
    return _load(_SELECTIONS, data, InvalidMessage)


def dump_selections(request_id, selections):
    wire = fast_path.dump_selections(request_id, selections, SELECTIONS_VERSION)
    if wire is not None:
        return wire
    return _SELECTIONS.dump(Selections(request_id, selections))


def load_build_result(data):
    """:raise InvalidMessage: the message is malformed or of another major."""
    return _load(_BUILD_RESULT, data, InvalidMessage)


def dump_build_result(result):
    return _BUILD_RESULT.dump(result)


def _load(schema, data, error_cls):
    try:
        return schema.load(data)
    except marshmallow.ValidationError as exc:
        _problem, unsupported = schema.version_problem(data)
        problems = _flatten(exc.normalized_messages())
        if any(p.endswith(UNKNOWN_FIELD) for p in problems):
            # Say which versions met: a newer minor's field needs a newer receiver.
            hint = (
                f" (this receiver speaks {schema.MESSAGE} {schema.VERSION}, the "
                f"message says {data.get('version')}; a field added in a later "
                f"minor version needs a receiver of that version)"
            )
            problems = [p + hint if p.endswith(UNKNOWN_FIELD) else p for p in problems]
        raise error_cls(schema.MESSAGE, problems, unsupported) from None


def _flatten(messages, path=""):
    """marshmallow's nested error dict as "a.b.c: message" lines.

    Dict fields report ``{key: {"key": [...], "value": ...}}``; the "key" and
    "value" levels are folded into the path so a line reads
    ``groups._GPU.resources.VCPU: must be a positive integer``.
    """
    if isinstance(messages, str):
        return [f"{path}: {messages}" if path else messages]
    if isinstance(messages, list):
        out = []
        for item in messages:
            out.extend(_flatten(item, path))
        return out
    out = []
    for key, value in messages.items():
        if key in ("key", "value", "_schema"):
            sub = path
        else:
            sub = f"{path}.{key}" if path else str(key)
        out.extend(_flatten(value, sub))
    return out
