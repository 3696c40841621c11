"""Extension rules of /nodes (node records, hardware, twins).

Node data describes resource providers (cell, hardware, power profile), which
upstream shows only to admin and service; a project reader or member sees
none of it. Only admin and service write it (the power controller runs as a
service).
"""

from placement.policies import base

LIST = "placement:nodes:list"
SHOW = "placement:nodes:show"
UPDATE = "placement:nodes:update"
DELETE = "placement:nodes:delete"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(LIST, adm, "Extension: list node records.", "GET /nodes"),
        r(
            SHOW,
            adm,
            "Extension: show a node record, its hardware or its twin.",
            "GET /nodes/{uuid}",
            "GET /nodes/{uuid}/hardware",
            "GET /nodes/{uuid}/twin",
        ),
        r(
            UPDATE,
            adm,
            "Extension: create or update a node record, its hardware or "
            "its twin, or many twins at once (a twin also sets the power-profile "
            "trait); a node agent's heartbeat and twin status.",
            "PUT /nodes/{uuid}",
            "PUT /nodes/{uuid}/hardware",
            "PUT /nodes/{uuid}/twin",
            "POST /nodes/twins",
            "POST /nodes/{uuid}/build_outcome",
            "POST /nodes/{uuid}/heartbeat",
        ),
        r(DELETE, adm, "Extension: delete a node record.", "DELETE /nodes/{uuid}"),
    ]
