"""Rules of /resource_providers/{uuid}/inventories (upstream's names and defaults)."""

from placement.policies import base

LIST = "placement:resource_providers:inventories:list"
CREATE = "placement:resource_providers:inventories:create"
SHOW = "placement:resource_providers:inventories:show"
UPDATE = "placement:resource_providers:inventories:update"
DELETE = "placement:resource_providers:inventories:delete"

_PATH = "/resource_providers/{uuid}/inventories"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    one = _PATH + "/{resource_class}"
    return [
        r(LIST, adm, "List resource provider inventories.", f"GET {_PATH}"),
        r(CREATE, adm, "Create one resource provider inventory.", f"POST {_PATH}"),
        r(SHOW, adm, "Show resource provider inventory.", f"GET {one}"),
        # Replacing all inventories and updating one share a rule, as upstream.
        r(UPDATE, adm, "Update resource provider inventory.", f"PUT {_PATH}", f"PUT {one}"),
        r(DELETE, adm, "Delete resource provider inventory.", f"DELETE {_PATH}", f"DELETE {one}"),
    ]
