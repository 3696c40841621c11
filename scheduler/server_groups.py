"""The scheduler's view of a request's server group.

Loaded once per request (``GET /server_groups/{uuid}``): the policy, the
anti-affinity limit and how many members run on each host. The group filters
and weighers read it; the worker adds each host it claims for the request, and
reloads it when placement refused a claim for the group (another worker got
there first), so the next pick sees what the winner did.

Placement enforces the hard policies itself in the claim's transaction; this
view only keeps the scheduler from proposing hosts placement would refuse.
"""

import collections

AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"

# Placement's code of a claim the group refused.
POLICY_VIOLATION = "placement.server_group.policy_violation"


class GroupView:
    def __init__(self, body):
        self.uuid = body["uuid"]
        self.policy = body["policy"]
        self.limit = (body.get("rules") or {}).get("max_server_per_host") or 1
        self.per_host = collections.Counter(
            {host: len(members) for host, members in (body.get("hosts") or {}).items()}
        )

    @classmethod
    def load(cls, client, group_uuid):
        return cls(client.get_server_group(group_uuid))

    def members_on(self, host_uuid):
        return self.per_host.get(host_uuid, 0)

    def allows(self, host_uuid):
        """Whether a hard policy lets one more member onto this host."""
        if self.policy == ANTI_AFFINITY:
            return self.per_host.get(host_uuid, 0) < self.limit
        if self.policy == AFFINITY:
            occupied = [h for h, n in self.per_host.items() if n > 0]
            return not occupied or host_uuid in occupied
        return True

    def add(self, host_uuid):
        self.per_host[host_uuid] += 1

    def describe(self):
        if self.policy == ANTI_AFFINITY:
            return f"server group {self.uuid} (anti-affinity, max_server_per_host {self.limit})"
        return f"server group {self.uuid} ({self.policy})"
