"""Rules of /resource_providers (upstream's names and defaults)."""

from placement.policies import base

LIST = "placement:resource_providers:list"
CREATE = "placement:resource_providers:create"
SHOW = "placement:resource_providers:show"
UPDATE = "placement:resource_providers:update"
DELETE = "placement:resource_providers:delete"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(LIST, adm, "List resource providers.", "GET /resource_providers"),
        r(CREATE, adm, "Create resource provider.", "POST /resource_providers"),
        r(SHOW, adm, "Show resource provider.", "GET /resource_providers/{uuid}"),
        r(UPDATE, adm, "Update resource provider.", "PUT /resource_providers/{uuid}"),
        r(DELETE, adm, "Delete resource provider.", "DELETE /resource_providers/{uuid}"),
    ]
