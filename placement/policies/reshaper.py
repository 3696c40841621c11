"""Rule of /reshaper (upstream's name and default: service only).

Under the legacy defaults the deprecated ``role:admin`` of ``service_api``
still lets an admin reshape; under the secure defaults only the service role
may.
"""

from placement.policies import base

RESHAPE = "placement:reshaper:reshape"


def list_rules():
    return [
        base.endpoint_rule(
            RESHAPE, base.SERVICE, "Reshape inventory and allocations.", "POST /reshaper"
        ),
    ]
