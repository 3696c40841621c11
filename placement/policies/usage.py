"""Rules of provider usages and project usages (upstream's names and defaults).

``placement:usages`` is the one upstream rule a project reader passes: the
handler checks it against ``{"project_id": <the project_id query value>}``,
so a reader (or member) sees the totals of its own project only, while admin
and service see any project.
"""

from placement.policies import base

PROVIDER_USAGES = "placement:resource_providers:usages"
TOTAL_USAGES = "placement:usages"


def list_rules():
    r = base.endpoint_rule
    return [
        r(
            PROVIDER_USAGES,
            base.ADMIN_OR_SERVICE,
            "List resource provider usages.",
            "GET /resource_providers/{uuid}/usages",
        ),
        r(
            TOTAL_USAGES,
            base.ADMIN_OR_PROJECT_READER_OR_SERVICE,
            "List total resource usages for a given project. Admin and service see "
            "any project; a project reader or member only its own.",
            "GET /usages",
        ),
    ]
