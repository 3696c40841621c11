"""HTTP handlers: /resource_providers/{uuid}/aggregates (1.1+).

Responses are always ``{"aggregates": [...]}``, from 1.19 with the provider
generation added. Before 1.19 a PUT body is the bare list of aggregate UUIDs;
from 1.19 it is ``{"aggregates", "resource_provider_generation"}`` and a PUT
is refused (409) when the generation it carries is stale.
"""

from placement import errors
from placement import util
from placement.handlers import resource_provider as rp_handler
from placement.objects import aggregate as agg_obj
from placement.objects import resource_provider as rp_obj
from placement.policies import aggregate as policies
from placement.schemas import aggregate as schema

_STALE = (
    "Resource provider's generation already changed. Please update the generation and try again."
)


def _send(aggregates, generation):
    body = {"aggregates": aggregates}
    if util.want(1, 19):
        body["resource_provider_generation"] = generation
    # Association times are not recorded; upstream answers "now" as well.
    return util.json_response(body, last_modified="now")


def get_aggregates(uuid):
    util.require_version(1, 1)
    util.context().can(policies.LIST)
    try:
        rp, aggregates = agg_obj.for_provider(util.deps().db, uuid)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    return _send(aggregates, rp["generation"])


def set_aggregates(uuid):
    # Upstream checks the content type even before the microversion here.
    rp_handler.require_json_content()
    util.require_version(1, 1)
    util.context().can(policies.UPDATE)
    db = util.deps().db
    rp = rp_handler.load(uuid)
    with_generation = util.want(1, 19)
    body = util.extract_json(
        schema.PUT_AGGREGATES_1_19 if with_generation else schema.PUT_AGGREGATES_1_1
    )
    if with_generation:
        seen = body["resource_provider_generation"]
        if seen != rp["generation"]:
            raise errors.conflict(_STALE, errors.CONCURRENT_UPDATE)
        aggregates = body["aggregates"]
    else:
        seen = None
        aggregates = body
    try:
        generation = agg_obj.set_for_provider(
            db, uuid, [util.normalize_uuid(a) for a in aggregates], seen_generation=seen
        )
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.ConcurrentUpdate as exc:
        raise errors.conflict(f"Update conflict: {exc}", errors.CONCURRENT_UPDATE)
    # The reply echoes the request's list, in its order, as upstream's does.
    return _send(aggregates, generation)
