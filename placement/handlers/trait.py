"""HTTP handlers: /traits[/{name}] and /resource_providers/{uuid}/traits (1.6+)."""

import flask
import jsonschema

from placement import errors
from placement import util
from placement.handlers import resource_provider as rp_handler
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from placement.policies import trait as policies
from placement.schemas import trait as schema

_INVALID_TRAIT = (
    "The trait is invalid. A valid trait must be no longer than 255 characters, start "
    'with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"'
)


def _url(name):
    return f"{flask.request.script_root}/traits/{name}"


def _traits_body(traits):
    return {"traits": [t["name"] for t in traits]}


def put_trait(name):
    util.require_version(1, 6)
    util.context().can(policies.TRAITS_UPDATE)
    try:
        jsonschema.validate(name, schema.CUSTOM_TRAIT_NAME)
    except jsonschema.ValidationError:
        raise errors.bad_request(_INVALID_TRAIT)
    trait, created = trait_obj.ensure(util.deps().db, name)
    headers = {"Location": rp_handler.absolute(_url(name))}
    if util.want(1, 15):
        headers["last-modified"] = util.http_date(trait.get("created_at") if created else None)
        headers["cache-control"] = "no-cache"
    return util.empty_response(201 if created else 204, headers=headers)


def get_trait(name):
    util.require_version(1, 6)
    util.context().can(policies.TRAITS_SHOW)
    try:
        trait = trait_obj.get(util.deps().db, name)
    except rp_obj.TraitNotFound as exc:
        raise errors.not_found(str(exc))
    headers = {}
    if util.want(1, 15):
        headers["last-modified"] = util.http_date(trait.get("created_at"))
        headers["cache-control"] = "no-cache"
    return util.empty_response(204, headers=headers)


def delete_trait(name):
    util.require_version(1, 6)
    util.context().can(policies.TRAITS_DELETE)
    try:
        trait_obj.delete(util.deps().db, name)
    except rp_obj.TraitNotFound as exc:
        raise errors.not_found(str(exc))
    except trait_obj.CannotDeleteStandard as exc:
        raise errors.bad_request(str(exc))
    except trait_obj.TraitInUse as exc:
        raise errors.conflict(str(exc))
    return util.empty_response(204)


def list_traits():
    util.require_version(1, 6)
    util.context().can(policies.TRAITS_LIST)
    params = util.validate_query(schema.LIST_TRAITS_QUERY)
    filters = {}
    if "name" in params:
        op, sep, value = params["name"].partition(":")
        if not sep:
            raise errors.bad_request(
                "Badly formatted name parameter. Expected name query string parameter in "
                f'form: ?name=[in|startswith]:[name1,name2|prefix]. Got: "{params["name"]}"'
            )
        # Any other operator filters nothing, as upstream.
        if op == "in":
            filters["name_in"] = value.split(",")
        elif op == "startswith":
            filters["prefix"] = value
    if "associated" in params:
        flag = params["associated"].lower()
        if flag not in ("true", "false"):
            raise errors.bad_request(
                'The query parameter "associated" only accepts "true" or "false"'
            )
        filters["associated"] = flag == "true"
    traits = trait_obj.list_traits(util.deps().db, **filters)
    return util.json_response(_traits_body(traits), last_modified=util.last_modified_of(traits))


def list_traits_for_resource_provider(uuid):
    util.require_version(1, 6)
    util.context().can(policies.RP_TRAIT_LIST)
    try:
        rp, traits = trait_obj.for_provider(util.deps().db, uuid)
    except rp_obj.NotFound:
        raise rp_handler.not_found_twice(uuid)
    body = _traits_body(traits)
    body["resource_provider_generation"] = rp["generation"]
    return util.json_response(body, last_modified=util.last_modified_of(traits))


def update_traits_for_resource_provider(uuid):
    util.require_version(1, 6)
    util.context().can(policies.RP_TRAIT_UPDATE)
    rp_handler.require_json_content()
    body = util.extract_json(schema.SET_PROVIDER_TRAITS)
    db = util.deps().db
    rp = rp_handler.load(uuid)
    if rp["generation"] != body["resource_provider_generation"]:
        raise errors.conflict(
            "Resource provider's generation already changed. Please update the generation "
            "and try again.",
            errors.CONCURRENT_UPDATE,
        )
    try:
        generation, traits = trait_obj.set_for_provider(
            db, uuid, body["resource_provider_generation"], body["traits"]
        )
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.TraitNotFound as exc:
        raise errors.bad_request(f"No such trait {', '.join(exc.names)}")
    except rp_obj.ConcurrentUpdate:
        raise errors.conflict(
            "Resource provider's generation already changed. Please update the generation "
            "and try again.",
            errors.CONCURRENT_UPDATE,
        )
    out = _traits_body(traits)
    out["resource_provider_generation"] = generation
    return util.json_response(out, last_modified=util.last_modified_of(traits))


def delete_traits_for_resource_provider(uuid):
    util.require_version(1, 6)
    util.context().can(policies.RP_TRAIT_DELETE)
    db = util.deps().db
    rp = rp_handler.load(uuid)
    try:
        trait_obj.set_for_provider(db, uuid, rp["generation"], [])
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.ConcurrentUpdate as exc:
        raise errors.conflict(str(exc), errors.CONCURRENT_UPDATE)
    return util.empty_response(204)
