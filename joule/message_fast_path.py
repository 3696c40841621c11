"""The commonest well-formed messages, accepted without marshmallow.

Every instance crosses the bus as a request spec and a list of selections,
each loaded (and so validated) by every process it enters: the super
conductor, the scheduler worker and the cell conductor. marshmallow
checks one field at a time through several layers of calls; a selections
message of four hosts took 0.29 ms to load and a request spec 0.06 ms,
about a tenth of the CPU an instance cost over every process of the bus
benchmark.

These functions accept only messages whose every field is of the plain,
common shape (each value of its exact type, every pattern matched in full,
no optional part that needs more than a look), and build the very object
the schema would. Anything else, valid or not, answers None, and the
caller loads it with the schema (joule.request_spec): so a message is
refused with the schema's own words and never accepted here when the
schema would refuse it. Each check here is the schema's or stricter
(``fullmatch`` where the schema's ``match`` lets a trailing newline
through). tests/unit/test_message_fast_path.py holds the two to the same
answers.
"""

import re

from joule import vocabulary

# The canonical uuid form the schema's Uuid field loads to: a value already
# in it loads to itself.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_NAME = re.compile(r"[A-Z0-9_]+")
_MICROVERSION = re.compile(r"1\.[0-9]{1,3}")
_VERSION = re.compile(r"([0-9]{1,4})\.([0-9]{1,4})")


def _uuid(value):
    return type(value) is str and _CANONICAL_UUID.fullmatch(value) is not None


def _id(value, max_length):
    return type(value) is str and 0 < len(value) <= max_length and _ID.fullmatch(value) is not None


def _name(value):
    return type(value) is str and 0 < len(value) <= 255 and _NAME.fullmatch(value) is not None


def _optional_text(value):
    return value is None or type(value) is str


def _version_ok(data, major):
    version = data.get("version")
    if type(version) is not str:
        return False
    match = _VERSION.fullmatch(version)
    return match is not None and int(match.group(1)) == major


def _amounts(value):
    """A copy of a resource-class -> positive-integer dict, or None."""
    if type(value) is not dict:
        return None
    for rc, amount in value.items():
        if not _name(rc) or type(amount) is not int or amount < 1:
            return None
    return dict(value)


def _traits(value, limit):
    if type(value) is not list or len(value) > limit:
        return None
    for trait in value:
        if not _name(trait):
            return None
    return tuple(value)


# -- selections ----------------------------------------------------------------

_SELECTION_KEYS = frozenset(
    (
        "instance_uuid",
        "host_uuid",
        "host_name",
        "cell",
        "allocation_request",
        "claimed",
        "schedulable_class",
        "family",
        "allocation_request_version",
    )
)


def _allocation_request(value):
    """The allocation request as the schema loads it, or None."""
    if type(value) is not dict or not value.keys() <= {"allocations", "mappings"}:
        return None
    allocations = value.get("allocations")
    if type(allocations) is not dict or not allocations:
        return None
    out_allocations = {}
    for provider, held in allocations.items():
        if not _uuid(provider) or type(held) is not dict or held.keys() != {"resources"}:
            return None
        resources = _amounts(held["resources"])
        if resources is None:
            return None
        out_allocations[provider] = {"resources": resources}
    out = {"allocations": out_allocations}
    if "mappings" in value:
        mappings = value["mappings"]
        if type(mappings) is not dict:
            return None
        out_mappings = {}
        for suffix, providers in mappings.items():
            if type(suffix) is not str or type(providers) is not list:
                return None
            if not all(_uuid(p) for p in providers):
                return None
            out_mappings[suffix] = list(providers)
        out["mappings"] = out_mappings
    return out


def load_selection(data, make, id_max):
    """``make(**fields)`` of one selection, or None."""
    if type(data) is not dict or not data.keys() <= _SELECTION_KEYS:
        return None
    if not _uuid(data.get("instance_uuid")) or not _uuid(data.get("host_uuid")):
        return None
    cell = data.get("cell")
    if cell is not None and not _id(cell, id_max):
        return None
    claimed = data.get("claimed", False)
    if type(claimed) is not bool:
        return None
    host_name = data.get("host_name")
    schedulable_class = data.get("schedulable_class")
    family = data.get("family")
    if not (_optional_text(host_name) and _optional_text(schedulable_class)):
        return None
    if not _optional_text(family):
        return None
    version = data.get("allocation_request_version")
    if version is not None and (
        type(version) is not str or _MICROVERSION.fullmatch(version) is None
    ):
        return None
    allocation_request = _allocation_request(data.get("allocation_request"))
    if allocation_request is None:
        return None
    return make(
        instance_uuid=data["instance_uuid"],
        host_uuid=data["host_uuid"],
        host_name=host_name,
        cell=cell,
        allocation_request=allocation_request,
        claimed=claimed,
        schedulable_class=schedulable_class,
        family=family,
        allocation_request_version=version,
    )


def load_selections(data, make_selections, make_selection, request_id_max, id_max):
    """``make_selections(request_id, [[Selection, ...], ...])``, or None."""
    if type(data) is not dict or not data.keys() <= {"version", "request_id", "selections"}:
        return None
    if not _version_ok(data, 1) or not _id(data.get("request_id"), request_id_max):
        return None
    per_instance = data.get("selections")
    if type(per_instance) is not list:
        return None
    out = []
    for hosts in per_instance:
        if type(hosts) is not list or not hosts:
            return None
        loaded = []
        for host in hosts:
            selection = load_selection(host, make_selection, id_max)
            if selection is None:
                return None
            loaded.append(selection)
        out.append(loaded)
    return make_selections(data["request_id"], out)


def dump_selection(selection):
    """One selection's wire form, as the schema dumps it, or None when a
    value is not of its plain type (the schema then dumps it)."""
    request = selection.allocation_request
    if type(request) is not dict or type(selection.claimed) is not bool:
        return None
    allocations = request.get("allocations")
    if type(allocations) is not dict:
        return None
    wire_allocations = {}
    for provider, held in allocations.items():
        resources = held.get("resources") if type(held) is dict else None
        if type(provider) is not str or type(resources) is not dict:
            return None
        for rc, amount in resources.items():
            if type(rc) is not str or type(amount) is not int:
                return None
        wire_allocations[provider] = {"resources": dict(resources)}
    wire_request = {"allocations": wire_allocations}
    if "mappings" in request:
        mappings = request["mappings"]
        if type(mappings) is not dict:
            return None
        for suffix, providers in mappings.items():
            if type(suffix) is not str or type(providers) not in (list, tuple):
                return None
            if not all(type(p) is str for p in providers):
                return None
        wire_request["mappings"] = {k: list(v) for k, v in mappings.items()}
    texts = (
        selection.instance_uuid,
        selection.host_uuid,
        selection.host_name,
        selection.cell,
        selection.schedulable_class,
        selection.family,
        selection.allocation_request_version,
    )
    if type(texts[0]) is not str or type(texts[1]) is not str:
        return None
    if not all(_optional_text(t) for t in texts[2:]):
        return None
    return {
        "instance_uuid": selection.instance_uuid,
        "host_uuid": selection.host_uuid,
        "host_name": selection.host_name,
        "cell": selection.cell,
        "allocation_request": wire_request,
        "claimed": selection.claimed,
        "schedulable_class": selection.schedulable_class,
        "family": selection.family,
        "allocation_request_version": selection.allocation_request_version,
    }


def dump_selections(request_id, selections, version):
    """A selections message's wire form, or None (see dump_selection)."""
    if type(request_id) is not str:
        return None
    out = []
    for hosts in selections:
        dumped = []
        for selection in hosts:
            wire = dump_selection(selection)
            if wire is None:
                return None
            dumped.append(wire)
        out.append(dumped)
    return {"request_id": request_id, "selections": out, "version": version}


# -- request specs -------------------------------------------------------------

# The fields of the plain request spec (the unnumbered group and the ids);
# a spec using any other field (groups, hints, a workload, ...) is loaded
# by the schema, which also checks the versions those fields came in.
_SPEC_KEYS = frozenset(
    (
        "version",
        "request_id",
        "project_id",
        "user_id",
        "workload_class",
        "num_instances",
        "instance_uuids",
        "resources",
        "required",
        "forbidden",
        "consumer_type",
    )
)


def load_request_spec(data, make, limits):
    """``make(**fields)`` of a plain request spec, or None.

    ``limits``: (request id max, id max, max instances, max list entries),
    the schema's; ``make`` gets the fields ``RequestSpecSchema`` gives
    ``RequestSpec`` when every optional part is absent.
    """
    request_id_max, id_max, max_instances, max_list = limits
    if type(data) is not dict or not data.keys() <= _SPEC_KEYS or not _version_ok(data, 1):
        return None
    # A field that is there is checked; null is never plain (the schema
    # refuses a null request id, count or list).
    request_id = data.get("request_id")
    if "request_id" in data and not _id(request_id, request_id_max):
        return None
    project_id = data.get("project_id")
    user_id = data.get("user_id")
    if not _id(project_id, id_max) or not _id(user_id, id_max):
        return None
    workload_class = data.get("workload_class", vocabulary.DEFAULT_WORKLOAD_CLASS)
    if type(workload_class) is not str or workload_class not in vocabulary.WORKLOAD_CLASSES:
        return None
    consumer_type = data.get("consumer_type", "INSTANCE")
    if not _name(consumer_type):
        return None
    resources = _amounts(data.get("resources"))
    if not resources:
        return None  # none at all: the schema says what is missing
    required = _traits(data.get("required", []), max_list)
    forbidden = _traits(data.get("forbidden", []), max_list)
    if required is None or forbidden is None or set(required) & set(forbidden):
        return None
    num = data.get("num_instances")
    if "num_instances" in data and (type(num) is not int or not 1 <= num <= max_instances):
        return None
    uuids = data.get("instance_uuids")
    if "instance_uuids" in data:
        if type(uuids) is not list or not 1 <= len(uuids) <= max_instances:
            return None
        if not all(_uuid(u) for u in uuids) or len(set(uuids)) != len(uuids):
            return None
        if num is not None and num != len(uuids):
            return None
    return make(
        request_id=request_id,
        num_instances=num,
        instance_uuids=uuids,
        project_id=project_id,
        user_id=user_id,
        workload_class=workload_class,
        resources=resources,
        required=required,
        forbidden=forbidden,
        consumer_type=consumer_type,
    )
