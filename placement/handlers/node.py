"""HTTP handlers: nodes, node hardware and node twins (extension).

Node data hangs off *root* providers only: a malformed or unknown uuid is a
404 (as for /resource_providers/{uuid}), a nested provider a 400. Node records
and twins carry generations; a stale one is a 409 placement.concurrent_update
and changes nothing. ``POST /nodes/twins`` writes many twins in one
transaction (the power controller's reconcile tick), all or nothing.
"""

from joule import vocabulary
from placement import errors
from placement import paging
from placement import util
from placement.objects import node as node_obj
from placement.policies import node as policies
from placement.schemas import node as schema

NOT_ROOT = (
    "Resource provider {} is not a root provider; node records, hardware and "
    "twins belong to root providers only."
)


def _uuid(value):
    if not util.is_uuid(value):
        raise errors.not_found(
            f"No resource provider with uuid {value} found", errors.RESOURCE_PROVIDER_NOT_FOUND
        )
    return util.normalize_uuid(value)


def _call(func, *args):
    """Run an object-layer call, turning its exceptions into API errors."""
    try:
        return func(*args)
    except node_obj.ProviderNotFound as exc:
        raise errors.not_found(
            f"No resource provider with uuid {', '.join(exc.uuids)} found",
            errors.RESOURCE_PROVIDER_NOT_FOUND,
        )
    except node_obj.NotRoot as exc:
        raise errors.bad_request(NOT_ROOT.format(", ".join(exc.uuids)))
    except node_obj.Conflict as exc:
        raise errors.conflict(str(exc), errors.CONCURRENT_UPDATE)


def _not_found(what, uuid):
    return errors.not_found(f"Resource provider {uuid} has no {what}.", errors.NODE_NOT_FOUND)


def list_nodes():
    """A page of nodes (placement.paging: ``limit``, ``marker``, ``links``)."""
    util.context().can(policies.LIST)
    params = util.validate_query(schema.LIST_QUERY)
    limit, after = paging.params(params)
    nodes, last_modified, next_id = node_obj.list_nodes(
        util.deps().db, cell=params.get("cell"), limit=limit, after=after
    )
    return util.json_response(
        {"nodes": nodes, "links": paging.links(params, next_id)},
        last_modified=last_modified or "now",
    )


def get_node(uuid):
    util.context().can(policies.SHOW)
    uuid = _uuid(uuid)
    try:
        node, last_modified = _call(node_obj.get_node, util.deps().db, uuid)
    except node_obj.NotFound:
        raise _not_found("node data", uuid)
    return util.json_response(node, last_modified=last_modified or "now")


def put_node(uuid):
    util.context().can(policies.UPDATE)
    uuid = _uuid(uuid)
    body = util.extract_json(schema.PUT_NODE)
    node, created = _call(
        node_obj.put_node,
        util.deps().db,
        uuid,
        body.get("cell"),
        body.get("labels", {}),
        body.get("reserved", False),
        body.get("unschedulable", False),
        body.get("generation"),
    )
    return util.json_response(node, status=201 if created else 200, last_modified="now")


def delete_node(uuid):
    util.context().can(policies.DELETE)
    uuid = _uuid(uuid)
    try:
        _call(node_obj.delete_node, util.deps().db, uuid)
    except node_obj.NotFound:
        raise _not_found("node data", uuid)
    return util.empty_response()


def get_hardware(uuid):
    util.context().can(policies.SHOW)
    uuid = _uuid(uuid)
    try:
        hardware, last_modified = _call(node_obj.get_hardware, util.deps().db, uuid)
    except node_obj.NotFound:
        raise _not_found("hardware record", uuid)
    return util.json_response(hardware, last_modified=last_modified or "now")


def _check_hardware(body):
    for part in ("cpu", "gpu"):
        low, high = body.get(f"{part}_min_cap_watts"), body.get(f"{part}_max_cap_watts")
        if low is not None and high is not None and low > high:
            raise errors.bad_request(
                f"{part}_min_cap_watts ({low}) is greater than {part}_max_cap_watts ({high})."
            )
    if body.get("gpu_count", 0) > 0 and not body.get("gpu_model"):
        raise errors.bad_request(
            "gpu_count is greater than 0 but gpu_model is empty; the GPU model names the "
            "node's hardware family."
        )


def put_hardware(uuid):
    util.context().can(policies.UPDATE)
    uuid = _uuid(uuid)
    body = util.extract_json(schema.PUT_HARDWARE)
    _check_hardware(body)
    hardware, created = _call(node_obj.put_hardware, util.deps().db, uuid, body)
    return util.json_response(hardware, status=201 if created else 200, last_modified="now")


def get_twin(uuid):
    util.context().can(policies.SHOW)
    uuid = _uuid(uuid)
    try:
        twin, last_modified = _call(node_obj.get_twin, util.deps().db, uuid)
    except node_obj.NotFound:
        raise _not_found("twin", uuid)
    return util.json_response(twin, last_modified=last_modified or "now")


def _twin_entry(body, where=""):
    """Fill the schedulable class in and reject profile/class pairs that contradict."""
    profile = body["profile"]
    klass = body.get("schedulable_class") or profile
    if profile == vocabulary.PERFORMANCE and klass != vocabulary.PERFORMANCE:
        raise errors.bad_request(
            f"{where}schedulable_class {klass!r} contradicts profile 'performance': only a "
            "node in profile eco can be eco or draining."
        )
    if profile == vocabulary.ECO and klass == vocabulary.PERFORMANCE:
        raise errors.bad_request(
            f"{where}schedulable_class 'performance' contradicts profile 'eco': an eco node "
            "is schedulable as eco, or draining while performance work finishes."
        )
    return {**body, "schedulable_class": klass}


def put_twin(uuid):
    util.context().can(policies.UPDATE)
    uuid = _uuid(uuid)
    body = util.extract_json(schema.PUT_TWIN)
    entry = _twin_entry(body)
    entry["uuid"] = uuid
    (twin,) = _call(node_obj.set_twins, util.deps().db, [entry])
    twin.pop("uuid")
    status = 201 if body.get("generation") is None else 200
    return util.json_response(twin, status=status, last_modified="now")


_TWIN_KEYS = frozenset(schema.POST_TWINS["properties"]["twins"]["items"]["properties"])
# Tuples, not sets: a body's value may be a list or an object, which a set
# membership test would hash (TypeError, a 500) instead of rejecting.
_PROFILES = tuple(schema.PUT_TWIN["properties"]["profile"]["enum"])
_CLASSES = tuple(schema.PUT_TWIN["properties"]["schedulable_class"]["enum"])
_POWER_STATES = tuple(schema.PUT_TWIN["properties"]["power_state"]["enum"])


def _plain_twin(item):
    """True when ``item`` certainly matches the twin item schema.

    jsonschema costs about 0.2 ms an item, a second per 5,000-node tick; this
    check accepts a subset of what the schema accepts and costs a few
    microseconds. Anything it does not accept goes through the schema.
    """
    if not item.keys() <= _TWIN_KEYS:
        return False
    uuid = item.get("uuid")
    if not util.is_uuid(uuid) or item.get("profile") not in _PROFILES:
        return False
    if "schedulable_class" in item and item["schedulable_class"] not in _CLASSES:
        return False
    for key in ("cpu_cap_watts", "gpu_cap_watts"):
        value = item.get(key)
        if value is not None and (type(value) not in (int, float) or not 0 <= value <= 1000000):
            return False
    if item.get("power_state") not in _POWER_STATES:
        return False
    managed_by = item.get("managed_by")
    if managed_by is not None and (type(managed_by) is not str or len(managed_by) > 255):
        return False
    generation = item.get("generation")
    return generation is None or (type(generation) is int and generation >= 0)


_ANY_OBJECT = {"type": "object"}
_MAX_TWINS = schema.POST_TWINS_ENVELOPE["properties"]["twins"]["maxItems"]


def _plain_envelope(body):
    """True when ``body`` certainly matches POST_TWINS_ENVELOPE."""
    twins = body.get("twins")
    return (
        body.keys() == {"twins"}
        and type(twins) is list
        and len(twins) <= _MAX_TWINS
        and all(type(item) is dict for item in twins)
    )


def put_twins():
    """POST /nodes/twins: write many twins in one transaction, all or nothing."""
    util.context().can(policies.UPDATE)
    # The envelope through jsonschema costs ~35 us an item (0.17 s for a
    # 5,000-node tick); a body that plainly matches skips it, anything else
    # gets the schema's own message.
    body = util.extract_json(_ANY_OBJECT)
    if not _plain_envelope(body):
        util.extract_json(schema.POST_TWINS_ENVELOPE, body=body)
    if not all(_plain_twin(item) for item in body["twins"]):
        util.extract_json(schema.POST_TWINS, body=body)  # raises the precise 400
    entries, seen = [], set()
    for index, item in enumerate(body["twins"]):
        entry = _twin_entry(item, where=f"twins[{index}]: ")
        entry["uuid"] = util.normalize_uuid(item["uuid"])
        if entry["uuid"] in seen:
            raise errors.bad_request(f"twins[{index}]: node {entry['uuid']} appears twice.")
        seen.add(entry["uuid"])
        entries.append(entry)
    twins = _call(node_obj.set_twins, util.deps().db, entries)
    return util.json_response({"twins": twins}, last_modified="now")


def post_heartbeat(uuid):
    """POST /nodes/{uuid}/heartbeat ``{"twin_status": {...}}`` (extension, the
    node agent's): stamps the node record with the database's clock and
    stores the twin status when the node has a twin. 200 ``{"heartbeat_at",
    "twin"}`` with the twin (spec and status) or null. 404
    ``placement.node.not_found`` when the provider has no node record.
    """
    util.context().can(policies.UPDATE)
    uuid = _uuid(uuid)
    body = util.extract_json(schema.POST_HEARTBEAT)
    try:
        out = _call(node_obj.heartbeat, util.deps().db, uuid, body.get("twin_status"))
    except node_obj.NotFound:
        raise _not_found("node record", uuid)
    return util.json_response(out, last_modified="now")


def post_build_outcome(uuid):
    """POST /nodes/{uuid}/build_outcome ``{"succeeded": bool}`` (extension):
    a conductor reports a build on this host; a failure adds one to the
    host's consecutive failed builds, a success clears them. 200
    ``{"failed_builds": n}``.
    """
    util.context().can(policies.UPDATE)
    uuid = _uuid(uuid)
    body = util.extract_json(schema.POST_BUILD_OUTCOME)
    count = _call(node_obj.record_build_outcome, util.deps().db, uuid, body["succeeded"])
    return util.json_response({"failed_builds": count}, last_modified="now")


def post_build_outcomes():
    """POST /nodes/build_outcomes ``{"outcomes": [{"uuid", "succeeded"}, ...]}``
    (extension): many build reports in one call, all or none, applied in
    order (a host may appear several times). 200 ``{"failed_builds": {uuid:
    n}}`` with each host's count after its last report.
    """
    util.context().can(policies.UPDATE)
    body = util.extract_json(schema.POST_BUILD_OUTCOMES)
    outcomes = [(util.normalize_uuid(o["uuid"]), o["succeeded"]) for o in body["outcomes"]]
    counts = _call(node_obj.record_build_outcomes, util.deps().db, outcomes)
    return util.json_response({"failed_builds": counts}, last_modified="now")
