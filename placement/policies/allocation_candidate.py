"""Rule of /allocation_candidates (upstream's name and default).

The extension parameters (page_size, node_data) are checked by the same
rule: whoever may list candidates is admin or service, which may also read
node data.
"""

from placement.policies import base

LIST = "placement:allocation_candidates:list"


def list_rules():
    return [
        base.endpoint_rule(
            LIST, base.ADMIN_OR_SERVICE, "List allocation candidates.", "GET /allocation_candidates"
        ),
    ]
