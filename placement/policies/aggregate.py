"""Rules of /resource_providers/{uuid}/aggregates (upstream's names and defaults)."""

from placement.policies import base

LIST = "placement:resource_providers:aggregates:list"
UPDATE = "placement:resource_providers:aggregates:update"

_PATH = "/resource_providers/{uuid}/aggregates"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(LIST, adm, "List resource provider aggregates.", f"GET {_PATH}"),
        r(UPDATE, adm, "Update resource provider aggregates.", f"PUT {_PATH}"),
    ]
