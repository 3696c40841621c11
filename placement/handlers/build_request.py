"""HTTP handlers: build requests (extension).

The conductor records each instance it accepts as a pending build request and
finishes it as placed or failed; the power controller counts pending
performance requests (``GET /build_requests?status=pending&workload_class=performance``).
"""

from joule import vocabulary
from placement import errors
from placement import util
from placement.objects import build_request as br_obj
from placement.schemas import build_request as schema

# Extension codes, in upstream's placement.<resource>.<condition> form.
BUILD_REQUEST_NOT_FOUND = "placement.build_request.not_found"
BUILD_REQUEST_EXISTS = "placement.build_request.duplicate"
BUILD_REQUEST_FINISHED = "placement.build_request.invalid_transition"


def _serialize(item):
    out = dict(item)
    for key in ("created_at", "updated_at"):
        out[key] = out[key].isoformat() + "Z" if out[key] is not None else None
    return out


def _instance_uuid(value):
    if not util.is_uuid(value):
        raise errors.not_found(f"No build request for instance {value}.",
                               BUILD_REQUEST_NOT_FOUND)
    return util.normalize_uuid(value)


def list_build_requests():
    util.context().can("placement:build_requests:list")
    params = util.validate_query(schema.LIST_QUERY)
    items = br_obj.list_requests(
        util.deps().db,
        status=params.get("status"),
        workload_class=params.get("workload_class"),
        request_id=params.get("request_id"),
        limit=int(params["limit"]) if "limit" in params else None,
    )
    return util.json_response(
        {"build_requests": [_serialize(i) for i in items]},
        last_modified=util.last_modified_of(items))


def create_build_request():
    util.context().can("placement:build_requests:update")
    body = util.extract_json(schema.POST_BUILD_REQUEST)
    instance_uuid = util.normalize_uuid(body["instance_uuid"])
    try:
        item = br_obj.create(util.deps().db, instance_uuid, body["request_id"],
                             body.get("workload_class", vocabulary.DEFAULT_WORKLOAD_CLASS),
                             body["spec"])
    except br_obj.Duplicate:
        raise errors.conflict(f"A build request for instance {instance_uuid} already exists.",
                              BUILD_REQUEST_EXISTS)
    resp = util.json_response(_serialize(item), status=201,
                              last_modified=util.last_modified_of([item]))
    resp.headers["Location"] = f"/build_requests/{instance_uuid}"
    return resp


def get_build_request(instance_uuid):
    util.context().can("placement:build_requests:list")
    instance_uuid = _instance_uuid(instance_uuid)
    try:
        item = br_obj.get(util.deps().db, instance_uuid)
    except br_obj.NotFound:
        raise errors.not_found(f"No build request for instance {instance_uuid}.",
                               BUILD_REQUEST_NOT_FOUND)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))


def update_build_request(instance_uuid):
    util.context().can("placement:build_requests:update")
    instance_uuid = _instance_uuid(instance_uuid)
    body = util.extract_json(schema.PUT_BUILD_REQUEST)
    host_uuid = body.get("host_uuid")
    if host_uuid is not None:
        host_uuid = util.normalize_uuid(host_uuid)
    if body["status"] == br_obj.PLACED and host_uuid is None:
        raise errors.bad_request("A placed build request needs host_uuid.")
    try:
        item = br_obj.update(util.deps().db, instance_uuid, body["status"],
                             host_uuid=host_uuid, reason=body.get("reason"))
    except br_obj.NotFound:
        raise errors.not_found(f"No build request for instance {instance_uuid}.",
                               BUILD_REQUEST_NOT_FOUND)
    except br_obj.InvalidTransition as exc:
        raise errors.conflict(f"Build request {instance_uuid}: {exc}.", BUILD_REQUEST_FINISHED)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))
