"""Extension rules of /server_groups.

A group names the hosts its members run on: provider data, which upstream
shows only to admin and service, so every rule is admin or service (nova's
API in front checks the project's own rules).
"""

from placement.policies import base

LIST = "placement:server_groups:list"
SHOW = "placement:server_groups:show"
CREATE = "placement:server_groups:create"
DELETE = "placement:server_groups:delete"
MEMBER_DELETE = "placement:server_groups:members:delete"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(LIST, adm, "Extension: list server groups.", "GET /server_groups"),
        r(
            SHOW,
            adm,
            "Extension: show a server group, its members and their hosts.",
            "GET /server_groups/{uuid}",
        ),
        r(CREATE, adm, "Extension: create a server group.", "POST /server_groups"),
        r(DELETE, adm, "Extension: delete a server group.", "DELETE /server_groups/{uuid}"),
        r(
            MEMBER_DELETE,
            adm,
            "Extension: take an instance out of its server group.",
            "DELETE /server_groups/{uuid}/members/{instance_uuid}",
        ),
    ]
