"""Extension rules of /scheduling_reports.

A report names the hosts a request considered and why each was dropped:
provider data, which upstream shows only to admin and service. So a project
reader sees no report, not even one of its own project's requests (upstream
would show that role nothing about providers either).
"""

from placement.policies import base

SHOW = "placement:scheduling_reports:show"
UPDATE = "placement:scheduling_reports:update"


def list_rules():
    r = base.endpoint_rule
    adm = base.ADMIN_OR_SERVICE
    return [
        r(
            SHOW,
            adm,
            "Extension: show the scheduling report of a request.",
            "GET /scheduling_reports/{request_id}",
        ),
        r(
            UPDATE,
            adm,
            "Extension: store the scheduling report of a request (written by the scheduler).",
            "PUT /scheduling_reports/{request_id}",
        ),
    ]
