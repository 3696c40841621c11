"""Policy rule names and defaults (oslo.policy RuleDefaults).

Upstream's rule names; every handler checks exactly one of them. The base
rules mirror upstream's: admin_api, service_api, admin_or_service_api,
project_reader_api, admin_or_project_reader_or_service_api.
"""

from oslo_policy import policy

ADMIN_OR_SERVICE = "rule:admin_or_service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"

_deprecated_admin = policy.DeprecatedRule(
    name="rule:admin_api",
    check_str="role:admin",
    deprecated_reason="Placement policies moved to the secure-RBAC defaults.",
    deprecated_since="W",
)

_base = [
    policy.RuleDefault("admin_api", "role:admin",
                       description="Default rule for most placement APIs.",
                       scope_types=["project"]),
    policy.RuleDefault("service_api", "role:service",
                       description="Default rule for service-to-service placement APIs.",
                       scope_types=["project"], deprecated_rule=_deprecated_admin),
    policy.RuleDefault("admin_or_service_api", "role:admin or role:service",
                       description="Default rule for most placement APIs.",
                       scope_types=["project"], deprecated_rule=_deprecated_admin),
    policy.RuleDefault("project_reader_api", "role:reader and project_id:%(project_id)s",
                       description="Default rule for Project level reader APIs.",
                       deprecated_rule=_deprecated_admin),
    policy.RuleDefault("admin_or_project_reader_or_service_api",
                       "role:admin or rule:project_reader_api or role:service",
                       description="Default rule for project level reader APIs.",
                       scope_types=["project"], deprecated_rule=_deprecated_admin),
]


def _rule(name, check=ADMIN_OR_SERVICE, description=None):
    return policy.RuleDefault(name, check, description=description or name,
                              scope_types=["project"])


# Placeholder set of endpoint rules: every rule name exists so handlers can
# check it. The auth issue refines each default to upstream's documented one.
_NAMES = [
    "placement:resource_providers:%s" % a for a in ("list", "create", "show", "update",
                                                      "delete")
] + [
    "placement:resource_providers:inventories:%s" % a
    for a in ("list", "create", "show", "update", "delete")
] + [
    "placement:resource_providers:aggregates:list",
    "placement:resource_providers:aggregates:update",
    "placement:resource_providers:usages",
    "placement:resource_providers:allocations:list",
    "placement:resource_providers:traits:list",
    "placement:resource_providers:traits:update",
    "placement:resource_providers:traits:delete",
    "placement:resource_classes:list",
    "placement:resource_classes:create",
    "placement:resource_classes:show",
    "placement:resource_classes:update",
    "placement:resource_classes:delete",
    "placement:traits:list",
    "placement:traits:show",
    "placement:traits:update",
    "placement:traits:delete",
    "placement:allocations:list",
    "placement:allocations:manage",
    "placement:allocations:update",
    "placement:allocations:delete",
    "placement:allocation_candidates:list",
    "placement:reshaper:reshape",
    "placement:usages",
    # Extensions.
    "placement:nodes:list",
    "placement:nodes:show",
    "placement:nodes:update",
    "placement:nodes:delete",
    "placement:scheduling_reports:show",
    "placement:build_requests:list",
    "placement:build_requests:update",
]


def list_rules():
    return _base + [_rule(n) for n in _NAMES]
