"""HTTP handlers: usages of a provider, total usages of a project (1.9)."""

import flask

from placement import util
from placement.handlers import resource_provider as rp_handler
from placement.objects import usage as usage_obj
from placement.policies import usage as policies
from placement.schemas import usage as schema


def list_usages(uuid):
    """GET /resource_providers/{uuid}/usages.

    :raise 404: no such provider.
    """
    util.context().can(policies.PROVIDER_USAGES)
    found = usage_obj.for_provider(util.deps().db, uuid)
    if found is None:
        raise rp_handler.not_found_twice(uuid)
    generation, usages = found
    # The answer is "usage now", so last-modified is now (as upstream).
    return util.json_response(
        {"resource_provider_generation": generation, "usages": usages}, last_modified="now"
    )


def get_total_usages():
    """GET /usages?project_id=&user_id=[&consumer_type=] (1.9).

    :raise 404: before 1.9.
    :raise 400: missing project_id, bad or unknown parameters.
    """
    util.require_version(1, 9)
    params = flask.request.args.to_dict()
    project_id = params.get("project_id")
    util.context().can(policies.TOTAL_USAGES, target={"project_id": project_id})
    by_type = util.want(1, 38)
    util.validate_query(
        schema.GET_USAGES_SCHEMA_V1_38 if by_type else schema.GET_USAGES_SCHEMA_1_9, params
    )
    db = util.deps().db
    user_id = params.get("user_id")
    if by_type:
        usages = usage_obj.totals_by_consumer_type(
            db, project_id, user_id=user_id, consumer_type=params.get("consumer_type")
        )
    else:
        usages = usage_obj.totals(db, project_id, user_id=user_id)
    return util.json_response({"usages": usages}, last_modified="now")
