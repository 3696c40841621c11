"""Rules of allocations (upstream's names and defaults) and workload usages (extension)."""

from placement.policies import base

RP_ALLOC_LIST = "placement:resource_providers:allocations:list"
ALLOC_LIST = "placement:allocations:list"
ALLOC_MANAGE = "placement:allocations:manage"
ALLOC_UPDATE = "placement:allocations:update"
ALLOC_DELETE = "placement:allocations:delete"
# Extension: per-root counts of consumers by workload class. It describes
# providers, not a project, so it is as closed as provider usages.
WORKLOAD_USAGES = "placement:workload_usages:list"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(
            ALLOC_MANAGE,
            adm,
            "Manage allocations of several consumers at once.",
            "POST /allocations",
        ),
        r(ALLOC_LIST, adm, "List allocations of a consumer.", "GET /allocations/{consumer_uuid}"),
        r(
            ALLOC_UPDATE,
            adm,
            "Create or update the allocations of a consumer.",
            "PUT /allocations/{consumer_uuid}",
        ),
        r(
            ALLOC_DELETE,
            adm,
            "Delete the allocations of a consumer.",
            "DELETE /allocations/{consumer_uuid}",
        ),
        r(
            RP_ALLOC_LIST,
            adm,
            "List the allocations against a resource provider.",
            "GET /resource_providers/{uuid}/allocations",
        ),
        r(
            WORKLOAD_USAGES,
            adm,
            "Extension: count the consumers of each root provider tree by workload "
            "class (performance, standard).",
            "GET /workload_usages",
        ),
    ]
