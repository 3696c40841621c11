"""HTTP handlers: server groups (extension).

Create, list, show and delete groups, and take a member out. Instances join
a group through their claim (``PUT /allocations/{consumer}`` with
``"server_group": <uuid>``), which placement checks against the group's
policy in the same transaction (objects/server_group.py).
"""

from placement import errors
from placement import paging
from placement import util
from placement.objects import server_group as sg_obj
from placement.policies import server_group as policies
from placement.schemas import server_group as schema


def _serialize(item):
    out = dict(item)
    out.pop("max_server_per_host", None)
    for key in ("created_at", "updated_at"):
        out[key] = out[key].isoformat() + "Z" if out[key] is not None else None
    return out


def _not_found(uuid):
    return errors.not_found(f"No server group with uuid {uuid}.", errors.SERVER_GROUP_NOT_FOUND)


def _group_uuid(value):
    if not util.is_uuid(value):
        raise _not_found(value)
    return util.normalize_uuid(value)


def create_server_group():
    """POST /server_groups: 201 with the group and a Location header.

    :raise 400: bad body, or rules with a policy other than anti-affinity.
    :raise 409: a group with that uuid exists.
    """
    util.context().can(policies.CREATE)
    body = util.extract_json(schema.POST_SERVER_GROUP)
    rules = body.get("rules") or {}
    if rules and body["policy"] != sg_obj.ANTI_AFFINITY:
        # nova 2.64: "Only anti-affinity policy supports rules."
        raise errors.bad_request(
            f"Only the anti-affinity policy supports rules; policy {body['policy']!r} "
            f"was given rules {sorted(rules)}."
        )
    uuid = util.normalize_uuid(body["uuid"]) if body.get("uuid") else None
    try:
        item = sg_obj.create(
            util.deps().db,
            body["name"],
            body["policy"],
            body["project_id"],
            body["user_id"],
            max_server_per_host=rules.get("max_server_per_host"),
            uuid=uuid,
        )
    except sg_obj.Duplicate:
        raise errors.conflict(
            f"A server group with uuid {uuid} already exists.", errors.SERVER_GROUP_EXISTS
        )
    return util.json_response(
        _serialize(item),
        status=201,
        headers={"Location": f"/server_groups/{item['uuid']}"},
        last_modified=item["created_at"],
    )


def list_server_groups():
    util.context().can(policies.LIST)
    params = util.validate_query(schema.LIST_QUERY)
    limit, after = paging.params(params)
    items, next_id = sg_obj.list_groups(
        util.deps().db, project_id=params.get("project_id"), limit=limit, after=after
    )
    return util.json_response(
        {"server_groups": [_serialize(i) for i in items], "links": paging.links(params, next_id)},
        last_modified=util.last_modified_of(items),
    )


def get_server_group(uuid):
    util.context().can(policies.SHOW)
    uuid = _group_uuid(uuid)
    try:
        item = sg_obj.get(util.deps().db, uuid)
    except sg_obj.NotFound:
        raise _not_found(uuid)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))


def delete_server_group(uuid):
    util.context().can(policies.DELETE)
    uuid = _group_uuid(uuid)
    try:
        sg_obj.delete(util.deps().db, uuid)
    except sg_obj.NotFound:
        raise _not_found(uuid)
    return util.empty_response(204)


def delete_member(uuid, instance_uuid):
    util.context().can(policies.MEMBER_DELETE)
    uuid = _group_uuid(uuid)
    if not util.is_uuid(instance_uuid):
        raise errors.not_found(
            f"Instance {instance_uuid} is not a member of server group {uuid}.",
            errors.SERVER_GROUP_NOT_FOUND,
        )
    instance_uuid = util.normalize_uuid(instance_uuid)
    try:
        sg_obj.remove_member(util.deps().db, uuid, instance_uuid)
    except sg_obj.NotFound:
        raise errors.not_found(
            f"Instance {instance_uuid} is not a member of server group {uuid}.",
            errors.SERVER_GROUP_NOT_FOUND,
        )
    return util.empty_response(204)
