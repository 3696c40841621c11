"""HTTP handlers: /resource_providers and /resource_providers/{uuid}."""

import uuid as uuid_lib

import flask

from placement import errors
from placement import query
from placement import util
from placement.objects import resource_provider as rp_obj
from placement.policies import resource_provider as policies
from placement.schemas import resource_provider as schema


def provider_url(uuid):
    return f"{flask.request.script_root}/resource_providers/{uuid}"


def absolute(path):
    """An absolute URL for a Location header (upstream's webob sends them absolute)."""
    return flask.request.host_url.rstrip("/") + path


def require_json_content():
    """415 for a body that is not declared JSON, before any lookup (upstream's order)."""
    if flask.request.mimetype != "application/json":
        util.extract_json({})  # raises the 415 with upstream's message


def _links(uuid):
    url = provider_url(uuid)
    rels = ["inventories", "usages"]
    if util.want(1, 1):
        rels.append("aggregates")
    if util.want(1, 6):
        rels.append("traits")
    if util.want(1, 11):
        rels.append("allocations")
    return [{"rel": "self", "href": url}] + [{"rel": rel, "href": f"{url}/{rel}"} for rel in rels]


def serialize(rp):
    data = {
        "uuid": rp["uuid"],
        "name": rp["name"],
        "generation": rp["generation"],
        "links": _links(rp["uuid"]),
    }
    if util.want(1, 14):
        data["parent_provider_uuid"] = rp["parent_provider_uuid"]
        data["root_provider_uuid"] = rp["root_provider_uuid"]
    return data


def _modified(rp):
    return rp.get("updated_at") or rp.get("created_at") or "now"


def not_found_twice(uuid, sep=": "):
    """Upstream's 404 for a subresource of an unknown provider: its object
    message quoted twice, joined by ``sep`` (" : " in the inventory handlers)."""
    message = f"No resource provider with uuid {uuid} found"
    return errors.not_found(f"{message}{sep}{message}")


def load(uuid):
    """The provider or a 404 in upstream's words (used by every provider subresource)."""
    try:
        return rp_obj.get(util.deps().db, uuid)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))


def create_resource_provider():
    util.context().can(policies.CREATE)
    require_json_content()
    body = util.extract_json(schema.POST_RP_1_14 if util.want(1, 14) else schema.POST_RP)
    uuid = util.normalize_uuid(body["uuid"]) if body.get("uuid") else str(uuid_lib.uuid4())
    parent = body.get("parent_provider_uuid")
    if parent is not None:
        parent = util.normalize_uuid(parent)
    try:
        rp = rp_obj.create(util.deps().db, uuid, body["name"], parent)
    except rp_obj.DuplicateProvider as exc:
        raise errors.conflict(str(exc), errors.DUPLICATE_NAME)
    except rp_obj.ActionError as exc:
        raise errors.bad_request(
            f'Unable to create resource provider "{body["name"]}", {uuid}: {exc}'
        )
    headers = {"Location": absolute(provider_url(uuid))}
    if util.want(1, 20):
        return util.json_response(serialize(rp), last_modified=_modified(rp), headers=headers)
    return util.empty_response(201, headers=headers)


def get_resource_provider(uuid):
    util.context().can(policies.SHOW)
    rp = load(uuid)
    return util.json_response(serialize(rp), last_modified=_modified(rp))


def update_resource_provider(uuid):
    util.context().can(policies.UPDATE)
    require_json_content()
    load(uuid)
    body = util.extract_json(schema.PUT_RP_1_14 if util.want(1, 14) else schema.PUT_RP)
    kwargs = {"name": body.get("name"), "allow_reparenting": util.want(1, 37)}
    if "parent_provider_uuid" in body:
        parent = body["parent_provider_uuid"]
        kwargs["parent_uuid"] = util.normalize_uuid(parent) if parent is not None else None
    try:
        rp = rp_obj.update(util.deps().db, uuid, **kwargs)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.DuplicateProvider:
        raise errors.conflict(
            f"Conflicting resource provider {body['name']} already exists.", errors.DUPLICATE_NAME
        )
    except rp_obj.ActionError as exc:
        raise errors.bad_request(f"Unable to save resource provider {uuid}: {exc}")
    return util.json_response(serialize(rp), last_modified=_modified(rp))


def delete_resource_provider(uuid):
    util.context().can(policies.DELETE)
    try:
        rp_obj.delete(util.deps().db, uuid)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.CannotDeleteParent:
        raise errors.conflict(
            f"Unable to delete parent resource provider {uuid}: It has child resource providers.",
            errors.PROVIDER_CANNOT_DELETE_PARENT,
        )
    except rp_obj.ProviderInUse as exc:
        raise errors.conflict(
            f"Unable to delete resource provider {uuid}: {exc}", errors.PROVIDER_IN_USE
        )
    return util.empty_response(204)


def list_resource_providers():
    util.context().can(policies.LIST)
    version = util.version()
    util.validate_query(schema.list_schema(version))
    args = flask.request.args
    filters = {}
    for key in ("name", "uuid"):
        if key in args:
            filters[key] = args[key]
    if "uuid" in filters:
        filters["uuid"] = util.normalize_uuid(filters["uuid"])
    if "member_of" in args:
        filters["member_of"], filters["forbidden_aggs"] = query.parse_member_of(
            util.query_values("member_of"), version
        )
    if "required" in args:
        required, any_of, forbidden = query.parse_required(util.query_values("required"), version)
        filters.update(required=required, required_any=any_of, forbidden_traits=forbidden)
    if "in_tree" in args:
        filters["in_tree"] = query.parse_in_tree(args["in_tree"])
    if "resources" in args:
        filters["resources"] = query.parse_resources(args["resources"])
    try:
        providers = rp_obj.list_providers(util.deps().db, **filters)
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.bad_request(f"Invalid resource class in resources parameter: {exc}")
    except rp_obj.TraitNotFound as exc:
        raise errors.bad_request(f'Invalid trait(s) in "required" parameter: {exc}')
    body = {"resource_providers": [serialize(rp) for rp in providers]}
    return util.json_response(body, last_modified=util.last_modified_of(providers))
