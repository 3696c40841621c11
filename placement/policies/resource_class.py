"""Rules of /resource_classes (upstream's names and defaults)."""

from placement.policies import base

LIST = "placement:resource_classes:list"
CREATE = "placement:resource_classes:create"
SHOW = "placement:resource_classes:show"
UPDATE = "placement:resource_classes:update"
DELETE = "placement:resource_classes:delete"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(LIST, adm, "List resource classes.", "GET /resource_classes"),
        r(CREATE, adm, "Create resource class.", "POST /resource_classes"),
        r(SHOW, adm, "Show resource class.", "GET /resource_classes/{name}"),
        r(UPDATE, adm, "Update resource class.", "PUT /resource_classes/{name}"),
        r(DELETE, adm, "Delete resource class.", "DELETE /resource_classes/{name}"),
    ]
