"""HTTP handlers: /resource_classes[/{name}] (microversion 1.2 and later)."""

import flask

from placement import errors
from placement import util
from placement.handlers import resource_provider as rp_handler
from placement.objects import resource_class as rc_obj
from placement.objects import resource_provider as rp_obj
from placement.policies import resource_class as policies
from placement.schemas import resource_class as schema


def _url(name):
    return f"{flask.request.script_root}/resource_classes/{name}"


def _serialize(rc):
    return {"name": rc["name"], "links": [{"rel": "self", "href": _url(rc["name"])}]}


def _modified(rc):
    # Standard classes have no meaningful timestamp; upstream answers "now".
    if rc_obj.is_standard(rc):
        return "now"
    return rc.get("updated_at") or rc.get("created_at") or "now"


def _load(name):
    try:
        return rc_obj.get(util.deps().db, name)
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.not_found(str(exc))


def list_resource_classes():
    util.require_version(1, 2)
    util.context().can(policies.LIST)
    classes = rc_obj.list_all(util.deps().db)
    custom = [rc for rc in classes if not rc_obj.is_standard(rc)]
    return util.json_response(
        {"resource_classes": [_serialize(rc) for rc in classes]},
        last_modified=util.last_modified_of(custom),
    )


def get_resource_class(name):
    util.require_version(1, 2)
    util.context().can(policies.SHOW)
    rc = _load(name)
    return util.json_response(_serialize(rc), last_modified=_modified(rc))


def create_resource_class():
    util.require_version(1, 2)
    util.context().can(policies.CREATE)
    body = util.extract_json(schema.RESOURCE_CLASS)
    try:
        rc = rc_obj.create(util.deps().db, body["name"])
    except rc_obj.ResourceClassExists:
        raise errors.conflict(f"Conflicting resource class already exists: {body['name']}")
    except rp_obj.ConcurrentUpdate as exc:
        raise errors.conflict(str(exc))
    return util.empty_response(201, headers={"Location": rp_handler.absolute(_url(rc["name"]))})


def update_resource_class(name):
    util.require_version(1, 2)
    util.context().can(policies.UPDATE)
    if util.want(1, 7):
        return _ensure_resource_class(name)
    body = util.extract_json(schema.RESOURCE_CLASS)
    db = util.deps().db
    _load(name)
    try:
        rc = rc_obj.rename(db, name, body["name"])
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.not_found(str(exc))
    except rc_obj.ResourceClassExists:
        raise errors.conflict(f"Resource class already exists: {body['name']}")
    except rc_obj.CannotChangeStandard:
        raise errors.bad_request(f"Cannot update standard resource class {name}")
    return util.json_response(_serialize(rc))


def _ensure_resource_class(name):
    """1.7: a bodiless PUT creates the custom class (201) or confirms it (204)."""
    # The name is validated as the body of a create would be, so the 400s read
    # the same ("Failed validating 'pattern'" for a standard or bad name).
    util.extract_json(schema.RESOURCE_CLASS, body={"name": name})
    db = util.deps().db
    try:
        rc_obj.get(db, name)
        exists = True
    except rp_obj.ResourceClassNotFound:
        exists = False
    status = 204
    if not exists:
        try:
            rc_obj.create(db, name)
            status = 201
        except rc_obj.ResourceClassExists:
            pass  # created concurrently: it exists, which is what was asked
        except rp_obj.ConcurrentUpdate as exc:
            raise errors.conflict(str(exc))
    return util.empty_response(status, headers={"Location": rp_handler.absolute(_url(name))})


def delete_resource_class(name):
    util.require_version(1, 2)
    util.context().can(policies.DELETE)
    try:
        rc_obj.delete(util.deps().db, name)
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.not_found(str(exc))
    except rc_obj.CannotChangeStandard as exc:
        raise errors.bad_request(f"Error in delete resource class: {exc}")
    except rc_obj.ResourceClassInUse as exc:
        raise errors.conflict(f"Error in delete resource class: {exc}")
    return util.empty_response(204)
