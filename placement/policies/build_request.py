"""Extension rules of /build_requests.

Build requests carry instance specs of every project, so reading them is as
closed as reading allocations: admin and service (the conductor and the
scheduler run as services).
"""

from placement.policies import base

LIST = "placement:build_requests:list"
UPDATE = "placement:build_requests:update"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(
            LIST,
            adm,
            "Extension: list build requests or show one.",
            "GET /build_requests",
            "GET /build_requests/{instance_uuid}",
        ),
        r(
            UPDATE,
            adm,
            "Extension: create build requests, take or hand off their lease, record their "
            "outcome and how their instance ended.",
            "POST /build_requests",
            "PUT /build_requests",
            "PUT /build_requests/{instance_uuid}",
            "PUT /build_requests/{instance_uuid}/lease",
            "PUT /build_requests/{instance_uuid}/instance_state",
        ),
    ]
