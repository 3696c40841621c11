"""Nova's server group filters, from the request's group view.

ServerGroupAntiAffinityFilter: a host already running ``max_server_per_host``
members of the request's anti-affinity group is out. ServerGroupAffinityFilter:
once a member of the affinity group runs somewhere, only that host is in.
Without a group (or with a soft policy) both pass every host. Placement
checks the same rules again in the claim's transaction, which is what holds
against concurrent workers; these filters keep the worker from trying hosts
placement would refuse, and explain a NoValidHost.
"""

from scheduler import server_groups


class ServerGroupAntiAffinityFilter:
    name = "ServerGroupAntiAffinityFilter"
    reason = "host already runs max_server_per_host members of the anti-affinity group"

    def node_fields(self, state):
        return set()  # the host's uuid only

    def host_passes(self, host, state):
        group = getattr(state, "group", None)
        if group is None or group.policy != server_groups.ANTI_AFFINITY:
            return True
        return group.allows(host.uuid)


class ServerGroupAffinityFilter:
    name = "ServerGroupAffinityFilter"
    reason = "members of the affinity group run on another host"

    def node_fields(self, state):
        return set()  # the host's uuid only

    def host_passes(self, host, state):
        group = getattr(state, "group", None)
        if group is None or group.policy != server_groups.AFFINITY:
            return True
        return group.allows(host.uuid)
