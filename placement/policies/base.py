"""Base rules every endpoint rule is built from, and the rule helper.

The names and check strings are upstream Placement's, so an operator's
policy file written for upstream means the same here. Under the legacy
defaults (``[oslo_policy] enforce_new_defaults = False``) oslo.policy ORs each
base rule with its deprecated check ``role:admin``; under the secure defaults
only the new check counts. Every endpoint rule is project-scoped, so a
system-scoped token is refused everywhere, as upstream (oslo.policy always
enforces scope types).
"""

from oslo_policy import policy

ADMIN = "rule:admin_api"
SERVICE = "rule:service_api"
ADMIN_OR_SERVICE = "rule:admin_or_service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"

# Only projects own placement data; system scope was dropped upstream in the
# 2023 "project personas" rework.
SCOPE = ["project"]

_DEPRECATED_REASON = (
    "Placement API policies moved to default roles with scope types (admin, "
    "service, project reader). The old admin-only default is still honoured "
    "while [oslo_policy] enforce_new_defaults is False."
)

DEPRECATED_ADMIN = policy.DeprecatedRule(
    name=ADMIN,
    check_str="role:admin",
    deprecated_reason=_DEPRECATED_REASON,
    deprecated_since="W",
)


def list_rules():
    return [
        policy.RuleDefault(
            "admin_api",
            "role:admin",
            description="Base rule: the caller has the admin role.",
            scope_types=SCOPE,
        ),
        policy.RuleDefault(
            "service_api",
            "role:service",
            description="Base rule: the caller is another OpenStack service "
            "(service role), e.g. nova-compute reporting inventory.",
            scope_types=SCOPE,
            deprecated_rule=DEPRECATED_ADMIN,
        ),
        policy.RuleDefault(
            "admin_or_service_api",
            "role:admin or role:service",
            description="Base rule of most placement APIs: admin or service.",
            scope_types=SCOPE,
            deprecated_rule=DEPRECATED_ADMIN,
        ),
        policy.RuleDefault(
            "project_reader_api",
            "role:reader and project_id:%(project_id)s",
            description="Base rule: a reader of the project the request is about.",
            deprecated_rule=DEPRECATED_ADMIN,
        ),
        policy.RuleDefault(
            "admin_or_project_reader_or_service_api",
            "role:admin or rule:project_reader_api or role:service",
            description="Base rule of project-level read APIs: admin, service, or "
            "a reader of the project concerned.",
            scope_types=SCOPE,
            deprecated_rule=DEPRECATED_ADMIN,
        ),
    ]


def endpoint_rule(name, check_str, description, *operations):
    """A documented, project-scoped endpoint rule.

    ``operations`` are ``"METHOD /path"`` strings; the sample policy file
    lists them under the rule.
    """
    ops = []
    for op in operations:
        method, path = op.split(" ", 1)
        ops.append({"method": method, "path": path})
    return policy.DocumentedRuleDefault(
        name=name,
        check_str=check_str,
        description=description,
        operations=ops,
        scope_types=SCOPE,
    )
