"""Rules of /traits and /resource_providers/{uuid}/traits (upstream's names and defaults)."""

from placement.policies import base

RP_TRAIT_LIST = "placement:resource_providers:traits:list"
RP_TRAIT_UPDATE = "placement:resource_providers:traits:update"
RP_TRAIT_DELETE = "placement:resource_providers:traits:delete"
TRAITS_LIST = "placement:traits:list"
TRAITS_SHOW = "placement:traits:show"
TRAITS_UPDATE = "placement:traits:update"
TRAITS_DELETE = "placement:traits:delete"

_RP_PATH = "/resource_providers/{uuid}/traits"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(TRAITS_LIST, adm, "List traits.", "GET /traits"),
        r(TRAITS_SHOW, adm, "Show trait.", "GET /traits/{name}"),
        r(TRAITS_UPDATE, adm, "Create or update a custom trait.", "PUT /traits/{name}"),
        r(TRAITS_DELETE, adm, "Delete a custom trait.", "DELETE /traits/{name}"),
        r(RP_TRAIT_LIST, adm, "List resource provider traits.", f"GET {_RP_PATH}"),
        r(RP_TRAIT_UPDATE, adm, "Update resource provider traits.", f"PUT {_RP_PATH}"),
        r(RP_TRAIT_DELETE, adm, "Delete resource provider traits.", f"DELETE {_RP_PATH}"),
    ]
