"""HTTP handlers: build requests (extension).

The conductor records each instance it accepts as a pending build request and
finishes it as placed or failed; the power controller counts pending
performance requests (``GET /build_requests/counts?status=pending&workload_class=performance``).
"""

from joule import request_spec
from placement import errors
from placement import paging
from placement import util
from placement.objects import build_request as br_obj
from placement.policies import build_request as policies
from placement.schemas import build_request as schema


def _serialize(item):
    out = dict(item)
    for key in ("created_at", "updated_at", "lease_expires_at", "state_updated_at"):
        out[key] = out[key].isoformat() + "Z" if out[key] is not None else None
    return out


def _instance_uuid(value):
    if not util.is_uuid(value):
        raise errors.not_found(
            f"No build request for instance {value}.", errors.BUILD_REQUEST_NOT_FOUND
        )
    return util.normalize_uuid(value)


def _one_error(exc):
    """The API error of one object-layer exception, naming its instance."""
    if isinstance(exc, br_obj.NotFound):
        return errors.ApiError(
            404,
            f"No build request for instance(s) {exc}.",
            errors.BUILD_REQUEST_NOT_FOUND,
            extra=_named(exc.uuids),
        )
    if isinstance(exc, br_obj.NotRunningThere):
        return errors.ApiError(
            409,
            f"{str(exc).capitalize()}.",
            errors.BUILD_REQUEST_NOT_THERE,
            extra={"instance_uuid": exc.instance_uuid},
        )
    if isinstance(exc, br_obj.Duplicate):
        return errors.ApiError(
            409,
            f"A build request already exists for instance(s) {exc}.",
            errors.BUILD_REQUEST_EXISTS,
            extra=_named(exc.uuids),
        )
    codes = (
        (br_obj.InvalidTransition, errors.BUILD_REQUEST_FINISHED),
        (br_obj.GenerationConflict, errors.CONCURRENT_UPDATE),
        (br_obj.Leased, errors.BUILD_REQUEST_LEASED),
    )
    for kind, code in codes:
        if isinstance(exc, kind):
            return errors.ApiError(
                409,
                f"{str(exc).capitalize()}.",
                code,
                extra={"instance_uuid": exc.instance_uuid},
            )
    raise exc


def _named(uuids):
    return {"instance_uuid": uuids[0]} if len(uuids) == 1 else {"instance_uuids": uuids}


def _api_error(exc):
    """The API error of an object-layer exception.

    A bulk write refused for several items answers one error object per
    item, each naming its ``instance_uuid``: 404 when some instance is
    unknown (those are listed), else 409 with every item that lost.
    """
    if not isinstance(exc, br_obj.Refused):
        return _one_error(exc)
    unknown = [e for e in exc.errors if isinstance(e, br_obj.NotFound)]
    if unknown:
        exc = br_obj.NotFound([u for e in unknown for u in e.uuids])
        return _one_error(exc)
    first, *rest = (_one_error(e) for e in exc.errors)
    first.also = rest
    return first


_OBJECT_ERRORS = (
    br_obj.NotFound,
    br_obj.NotRunningThere,
    br_obj.Duplicate,
    br_obj.InvalidTransition,
    br_obj.GenerationConflict,
    br_obj.Leased,
    br_obj.Refused,
)


def _filters(params):
    lease_expired = params.get("lease_expired")
    request_id = params.get("request_id")
    if request_id is not None and request_id.startswith("in:"):
        request_id = request_id[3:].split(",")
        too_long = [r for r in request_id if len(r) > request_spec.REQUEST_ID_MAX]
        if len(request_id) > schema.MAX_REQUEST_IDS or too_long:
            raise errors.bad_request(
                f"Invalid query string parameters: request_id=in: takes at most "
                f"{schema.MAX_REQUEST_IDS} request ids of at most "
                f"{request_spec.REQUEST_ID_MAX} characters."
            )
    return {
        "status": params.get("status"),
        "workload_class": params.get("workload_class"),
        "request_id": request_id,
        "owner": params.get("owner"),
        "lease_expired": None if lease_expired is None else lease_expired == "true",
    }


def list_build_requests():
    """A page of build requests (placement.paging: ``limit``, ``marker``, ``links``)."""
    util.context().can(policies.LIST)
    params = util.validate_query(schema.LIST_QUERY)
    filters = _filters(params)
    limit, after = paging.params(params)
    items, next_id = br_obj.list_requests(util.deps().db, limit=limit, after=after, **filters)
    return util.json_response(
        {
            "build_requests": [_serialize(i) for i in items],
            "links": paging.links(params, next_id),
        },
        last_modified=util.last_modified_of(items),
    )


def count_build_requests():
    """GET /build_requests/counts: ``{"count": n}`` of the records the
    listing's filters select (one COUNT query; what the power controller
    reads for its queued demand)."""
    util.context().can(policies.LIST)
    params = util.validate_query(schema.COUNT_QUERY)
    count = br_obj.count_requests(util.deps().db, **_filters(params))
    return util.json_response({"count": count}, last_modified="now")


def create_build_request():
    """One record (201 with it and a Location), or a bulk body (201 with all)."""
    util.context().can(policies.UPDATE)
    body = util.extract_json(schema.POST_BUILD_REQUEST)
    bulk = "build_requests" in body
    records = body["build_requests"] if bulk else [body]
    items = []
    specs = request_spec.canonical_request_specs(r["spec"] for r in records)
    for number, record in enumerate(records):
        where = f"build_requests.{number}: " if bulk else ""
        instance_uuid = util.normalize_uuid(record["instance_uuid"])
        try:
            spec, wire = next(specs)
        except request_spec.InvalidRequestSpec as exc:
            raise errors.bad_request(
                f"{where}Invalid spec: {'; '.join(exc.problems)}", errors.BUILD_REQUEST_INVALID_SPEC
            )
        _check_envelope(record, instance_uuid, spec, where)
        items.append(
            {
                "instance_uuid": instance_uuid,
                "request_id": record["request_id"],
                "workload_class": spec.workload_class,
                "spec": wire,
            }
        )
    uuids = [i["instance_uuid"] for i in items]
    if len(set(uuids)) != len(uuids):
        raise errors.bad_request("An instance appears more than once in build_requests.")
    try:
        created = br_obj.create_many(
            util.deps().db, items, owner=body.get("owner"), lease_seconds=body.get("lease_seconds")
        )
    except _OBJECT_ERRORS as exc:
        raise _api_error(exc)
    last = util.last_modified_of(created)
    if bulk:
        return util.json_response(
            {"build_requests": [_serialize(i) for i in created]}, status=201, last_modified=last
        )
    resp = util.json_response(_serialize(created[0]), status=201, last_modified=last)
    resp.headers["Location"] = f"/build_requests/{created[0]['instance_uuid']}"
    return resp


def _check_envelope(record, instance_uuid, spec, where):
    """A 400 unless the record's envelope agrees with its spec.

    The spec was loaded with the scheduler's contract and is stored as the
    contract dumps it (canonical uuids, defaults filled, the version), so
    whoever resumes the build loads what was checked here.
    """
    problems = []
    if spec.request_id != record["request_id"]:
        problems.append(
            f"the spec's request_id {spec.request_id!r} is not the build "
            f"request's {record['request_id']!r}"
        )
    if instance_uuid not in spec.instance_uuids:
        problems.append(f"instance {instance_uuid} is not one of the spec's instance_uuids")
    if record.get("workload_class", spec.workload_class) != spec.workload_class:
        problems.append(
            f"workload_class {record['workload_class']!r} is not the spec's {spec.workload_class!r}"
        )
    if problems:
        raise errors.bad_request(
            f"{where}Invalid spec: {'; '.join(problems)}", errors.BUILD_REQUEST_INVALID_SPEC
        )


def get_build_request(instance_uuid):
    util.context().can(policies.LIST)
    instance_uuid = _instance_uuid(instance_uuid)
    try:
        item = br_obj.get(util.deps().db, instance_uuid)
    except br_obj.NotFound as exc:
        raise _api_error(exc)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))


def _finish_item(record, instance_uuid):
    host_uuid = record.get("host_uuid")
    if host_uuid is not None:
        host_uuid = util.normalize_uuid(host_uuid)
    if record["status"] == br_obj.PLACED and host_uuid is None:
        raise errors.bad_request(
            f"A placed build request needs host_uuid (instance {instance_uuid})."
        )
    if record.get("build_succeeded") and record["status"] != br_obj.PLACED:
        raise errors.bad_request(
            f"build_succeeded is only for a placed build request (instance {instance_uuid})."
        )
    return {
        "build_succeeded": bool(record.get("build_succeeded")),
        "instance_uuid": instance_uuid,
        "status": record["status"],
        "host_uuid": host_uuid,
        "reason": record.get("reason"),
        "owner": record.get("owner"),
        "generation": record.get("generation"),
    }


def update_build_request(instance_uuid):
    util.context().can(policies.UPDATE)
    instance_uuid = _instance_uuid(instance_uuid)
    body = util.extract_json(schema.PUT_BUILD_REQUEST)
    try:
        item = br_obj.update_many(util.deps().db, [_finish_item(body, instance_uuid)])[0]
    except _OBJECT_ERRORS as exc:
        raise _api_error(exc)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))


def update_build_requests():
    """Finish many build requests in one transaction, all or none."""
    util.context().can(policies.UPDATE)
    body = util.extract_json(schema.PUT_BUILD_REQUESTS)
    items = [
        _finish_item(r, util.normalize_uuid(r["instance_uuid"])) for r in body["build_requests"]
    ]
    uuids = [i["instance_uuid"] for i in items]
    if len(set(uuids)) != len(uuids):
        raise errors.bad_request("An instance appears more than once in build_requests.")
    try:
        done = br_obj.update_many(util.deps().db, items)
    except _OBJECT_ERRORS as exc:
        raise _api_error(exc)
    return util.json_response(
        {"build_requests": [_serialize(i) for i in done]}, last_modified=util.last_modified_of(done)
    )


def _check_holders(items, body):
    """A 400 for a ``holder`` that cannot be: one on a hand-off (a hand-off
    leaves records the caller holds itself), or the caller itself."""
    for item in items:
        holder = item.get("holder")
        if holder is None:
            continue
        if body.get("hand_off"):
            raise errors.bad_request(
                f"A hand-off cannot name a holder (instance {item['instance_uuid']}): "
                "it leaves records the caller holds."
            )
        if holder == body["owner"]:
            raise errors.bad_request(
                f"The holder of instance {item['instance_uuid']} is the owner taking it; "
                "leave holder out to renew."
            )


def put_lease(instance_uuid):
    """Take, renew or hand off a pending record's lease (compare-and-set)."""
    util.context().can(policies.UPDATE)
    instance_uuid = _instance_uuid(instance_uuid)
    body = util.extract_json(schema.PUT_LEASE)
    item = {"instance_uuid": instance_uuid, "generation": body["generation"]}
    if "holder" in body:
        item["holder"] = body["holder"]
    _check_holders([item], body)
    try:
        item = br_obj.take_many(
            util.deps().db,
            [item],
            body["owner"],
            body["lease_seconds"],
            hand_off=body.get("hand_off", False),
        )[0]
    except _OBJECT_ERRORS as exc:
        raise _api_error(exc)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))


def put_leases():
    """Take, renew or hand off many pending records' leases, all or none."""
    util.context().can(policies.UPDATE)
    body = util.extract_json(schema.PUT_LEASES)
    items = [
        {**i, "instance_uuid": util.normalize_uuid(i["instance_uuid"])}
        for i in body["build_requests"]
    ]
    uuids = [i["instance_uuid"] for i in items]
    if len(set(uuids)) != len(uuids):
        raise errors.bad_request("An instance appears more than once in build_requests.")
    _check_holders(items, body)
    try:
        taken = br_obj.take_many(
            util.deps().db,
            items,
            body["owner"],
            body["lease_seconds"],
            hand_off=body.get("hand_off", False),
        )
    except _OBJECT_ERRORS as exc:
        raise _api_error(exc)
    return util.json_response(
        {"build_requests": [_serialize(i) for i in taken]},
        last_modified=util.last_modified_of(taken),
    )


def put_instance_state(instance_uuid):
    """Record how a placed instance ended on its host (its node agent's
    report, through a conductor): once; the same end again is a no-op."""
    util.context().can(policies.UPDATE)
    instance_uuid = _instance_uuid(instance_uuid)
    body = util.extract_json(schema.PUT_INSTANCE_STATE)
    try:
        item = br_obj.set_instance_state(
            util.deps().db,
            instance_uuid,
            body["state"],
            util.normalize_uuid(body["host_uuid"]),
            body.get("exit_status"),
            body.get("reason"),
        )
    except _OBJECT_ERRORS as exc:
        raise _api_error(exc)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))
