"""HTTP handlers: allocations of a consumer, of a provider, POST /allocations.

Parsing and serialisation only; the write itself (checks, generations,
retries) is one call to ``objects.allocation.replace_all``.

``Joule-Build-Lease: <generation> <owner>`` (extension) on PUT or DELETE
``/allocations/{consumer_uuid}``: write only while the consumer's build
request is pending and held by ``<owner>`` at ``<generation>`` under a live
lease, checked in the write's own transaction (a conductor whose lease was
lost, or whose record was taken over, writes nothing: 409
``placement.build_request.lease_lost``). Without the header nothing changes.
"""

import flask

from joule import vocabulary
from placement import errors
from placement import paging
from placement import util
from placement.objects import allocation as alloc_obj
from placement.objects import build_request as build_request_obj
from placement.objects import server_group as server_group_obj
from placement.policies import allocation as policies
from placement.schemas import allocation as schema


def _not_found_version():
    return errors.not_found("")


def _serialize_for_consumer(found):
    if found is None:
        return {"allocations": {}}
    body = {"allocations": found["allocations"]}
    if util.want(1, 12):
        body["project_id"] = found["project_id"]
        body["user_id"] = found["user_id"]
        if util.want(1, 28):
            body["consumer_generation"] = found["generation"]
        if util.want(1, 38):
            body["consumer_type"] = found["consumer_type"]
    return body


def list_for_consumer(consumer_uuid):
    """GET /allocations/{consumer_uuid}: always 200, ``{"allocations": {}}`` when none."""
    util.context().can(policies.ALLOC_LIST)
    found = alloc_obj.get_for_consumer(util.deps().db, consumer_uuid)
    last_modified = (found or {}).get("last_modified") or "now"
    return util.json_response(_serialize_for_consumer(found), last_modified=last_modified)


def list_for_resource_provider(uuid):
    """GET /resource_providers/{uuid}/allocations.

    :raise 404: no such provider.
    """
    util.context().can(policies.RP_ALLOC_LIST)
    found = alloc_obj.get_for_provider(util.deps().db, uuid)
    if found is None:
        raise errors.not_found(
            f"Resource provider '{uuid}' not found: No resource provider with uuid {uuid} found"
        )
    show_generation = util.want(1, 28)
    allocations = {}
    for consumer_uuid, entry in found["allocations"].items():
        item = {"resources": entry["resources"]}
        if show_generation:
            item["consumer_generation"] = entry["consumer_generation"]
        allocations[consumer_uuid] = item
    body = {"allocations": allocations, "resource_provider_generation": found["generation"]}
    return util.json_response(body, last_modified=found["last_modified"] or "now")


def consumer_write(consumer_uuid, data, conf):
    """Turn one validated consumer body (any microversion) into a ConsumerWrite."""
    allocations = data["allocations"]
    if isinstance(allocations, list):
        # Before 1.12: a list of {resource_provider: {uuid}, resources}.
        allocations = {
            item["resource_provider"]["uuid"]: {"resources": item["resources"]}
            for item in allocations
        }
    project_id = data.get("project_id")
    user_id = data.get("user_id")
    if project_id is None:
        # Before 1.8 project and user were optional (upstream's incomplete consumer).
        project_id = conf.placement.incomplete_consumer_project_id
        user_id = conf.placement.incomplete_consumer_user_id
    generation = alloc_obj.NOT_CHECKED
    if util.want(1, 28):
        generation = data.get("consumer_generation")
    return alloc_obj.ConsumerWrite(
        uuid=consumer_uuid,
        allocations={rp: dict(entry["resources"]) for rp, entry in allocations.items()},
        project_id=project_id,
        user_id=user_id,
        generation=generation,
        consumer_type=data.get("consumer_type") if util.want(1, 38) else None,
        workload_class=data.get("workload_class"),
        server_group=util.normalize_uuid(data["server_group"])
        if data.get("server_group")
        else None,
    )


def _lease_guard(consumer_uuid):
    """The guard the request's Joule-Build-Lease header asks for (a callable
    run in the write's transaction), or None without the header.

    :raise 400: a header that is not ``<generation> <owner>``.
    """
    value = flask.request.headers.get(vocabulary.LEASE_HEADER)
    if value is None:
        return None
    generation, _, owner = value.strip().partition(" ")
    owner = owner.strip()
    if not generation.isdigit() or not owner:
        raise errors.bad_request(
            f"Malformed {vocabulary.LEASE_HEADER} header {value!r}: expected "
            f"'<generation> <owner>' (the build request's generation and holder)"
        )

    def guard(conn):
        build_request_obj.check_held(conn, consumer_uuid, owner, int(generation))

    return guard


def _refuse_lease_header():
    if vocabulary.LEASE_HEADER in flask.request.headers:
        raise errors.bad_request(
            f"{vocabulary.LEASE_HEADER} guards one consumer's allocations: use it with PUT or "
            f"DELETE /allocations/{{consumer_uuid}}"
        )


def _write(writes, class_not_found_prefix, guard=None):
    deps = util.deps()
    try:
        alloc_obj.replace_all(
            deps.db, writes, deps.conf.placement.allocation_conflict_retry_count, before=guard
        )
    except build_request_obj.LeaseLost as exc:
        raise errors.conflict(str(exc), errors.BUILD_REQUEST_LEASE_LOST)
    except alloc_obj.ConsumerGenerationConflict as exc:
        raise errors.conflict(str(exc), errors.CONCURRENT_UPDATE)
    except alloc_obj.ProviderNotFound as exc:
        raise errors.bad_request(str(exc))
    except alloc_obj.ResourceClassNotFound as exc:
        raise errors.bad_request(f"{class_not_found_prefix}{exc}")
    except alloc_obj.ProfileConflict as exc:
        raise errors.conflict(
            f"Unable to allocate inventory: {exc}", errors.ALLOCATION_PROFILE_CONFLICT
        )
    except alloc_obj.PowerStateConflict as exc:
        raise errors.conflict(
            f"Unable to allocate inventory: {exc}", errors.ALLOCATION_POWER_STATE_CONFLICT
        )
    except alloc_obj.InvalidInventory as exc:
        raise errors.conflict(f"Unable to allocate inventory: {exc}")
    except server_group_obj.GroupNotFound as exc:
        raise errors.bad_request(str(exc), errors.SERVER_GROUP_NOT_FOUND)
    except server_group_obj.MemberOfAnotherGroup as exc:
        raise errors.conflict(str(exc), errors.SERVER_GROUP_MEMBER_CONFLICT)
    except server_group_obj.PolicyViolation as exc:
        raise errors.conflict(
            f"Unable to allocate inventory: {exc}", errors.SERVER_GROUP_POLICY_VIOLATION
        )
    except alloc_obj.ConcurrentUpdate as exc:
        raise errors.conflict(
            f"Inventory and/or allocations changed while attempting to allocate: {exc}",
            errors.CONCURRENT_UPDATE,
        )


def set_allocations_for_consumer(consumer_uuid):
    """PUT /allocations/{consumer_uuid}: replace the consumer's allocations.

    :raise 400: malformed consumer uuid or body, unknown provider or class.
    :raise 409: does not fit, or a consumer/provider generation conflict.
    """
    util.context().can(policies.ALLOC_UPDATE)
    if not util.is_uuid(consumer_uuid):
        raise errors.bad_request(f"Malformed consumer_uuid: {consumer_uuid}")
    consumer_uuid = util.normalize_uuid(consumer_uuid)
    data = util.extract_json(schema.put_schema(util.version()))
    write = consumer_write(consumer_uuid, data, util.deps().conf)
    guard = _lease_guard(consumer_uuid)
    _write([write], f"Unable to allocate inventory for consumer {consumer_uuid}: ", guard)
    return util.empty_response(204)


def set_allocations():
    """POST /allocations (1.13): several consumers, all or nothing."""
    if not util.want(1, 13):
        raise _not_found_version()
    util.context().can(policies.ALLOC_MANAGE)
    _refuse_lease_header()
    data = util.extract_json(schema.post_schema(util.version()))
    conf = util.deps().conf
    writes = [consumer_write(uuid, body, conf) for uuid, body in data.items()]
    _write(writes, "Unable to allocate inventory ")
    return util.empty_response(204)


def delete_allocations(consumer_uuid):
    """DELETE /allocations/{consumer_uuid}.

    :raise 404: the consumer holds no allocation.
    """
    util.context().can(policies.ALLOC_DELETE)
    guard = None
    if vocabulary.LEASE_HEADER in flask.request.headers:
        if not util.is_uuid(consumer_uuid):
            raise errors.bad_request(f"Malformed consumer_uuid: {consumer_uuid}")
        guard = _lease_guard(util.normalize_uuid(consumer_uuid))
    try:
        deleted = alloc_obj.delete_for_consumer(util.deps().db, consumer_uuid, before=guard)
    except build_request_obj.LeaseLost as exc:
        raise errors.conflict(str(exc), errors.BUILD_REQUEST_LEASE_LOST)
    if not deleted:
        raise errors.not_found(f"No allocations for consumer '{consumer_uuid}'")
    return util.empty_response(204)


def workload_usages():
    """GET /workload_usages[?in_tree=<uuid>] (extension).

    ``{"resource_providers": {root_uuid: {"performance": n, "standard": m}},
    "links": [...]}``: a page of roots in provider id order (placement.paging:
    ``limit``, ``marker``, ``links``).
    """
    util.context().can(policies.WORKLOAD_USAGES)
    params = util.validate_query(schema.WORKLOAD_USAGES_QUERY, flask.request.args.to_dict())
    limit, after = paging.params(params)
    in_tree = params.get("in_tree")
    if in_tree is not None:
        in_tree = util.normalize_uuid(in_tree)
    usages, next_id = alloc_obj.workload_usages(
        util.deps().db, in_tree=in_tree, limit=limit, after=after
    )
    return util.json_response(
        {"resource_providers": usages, "links": paging.links(params, next_id)},
        last_modified="now",
    )
