"""Nova's scheduler-hint filters: same_host, different_host, forced hosts.

``same_host`` / ``different_host`` name instances; the worker resolves each
to the providers its allocations are on (``RequestState.hint_providers``) and
a host is matched by any provider of its tree. As nova's SameHostFilter, an
instance that holds nothing runs nowhere, so ``same_host`` naming only such
instances passes no host.

``force_hosts`` / ``force_nodes`` limit the request to the hosts named (node
names; ``force_nodes`` also takes root provider uuids). Nova skips every
filter for a forced host; here the rest of the chain still runs, so a force
cannot put performance work on an eco host, break a server group or land in
another cell, and a refusal says which filter refused.
"""


def _tree(host):
    return set(host.providers) | {host.uuid}


class _ProvidersOnly:
    def node_fields(self, state):
        return set()  # the host's providers, from the provider summaries


class SameHostFilter(_ProvidersOnly):
    name = "SameHostFilter"
    reason = "host runs none of the instances named in the same_host hint"

    def host_passes(self, host, state):
        wanted = (getattr(state, "hint_providers", None) or {}).get("same_host")
        if wanted is None:
            return True
        return bool(_tree(host) & wanted)


class DifferentHostFilter(_ProvidersOnly):
    name = "DifferentHostFilter"
    reason = "host runs an instance named in the different_host hint"

    def host_passes(self, host, state):
        avoided = (getattr(state, "hint_providers", None) or {}).get("different_host")
        if not avoided:
            return True
        return not (_tree(host) & avoided)


class ForceHostsFilter:
    name = "ForceHostsFilter"
    reason = "host is not among the force_hosts / force_nodes of the request"

    def node_fields(self, state):
        hints = getattr(state, "scheduler_hints", None)
        return {"name"} if hints and (hints.force_hosts or hints.force_nodes) else set()

    def host_passes(self, host, state):
        hints = getattr(state, "scheduler_hints", None)
        if not hints:
            return True
        if hints.force_hosts and host.name not in hints.force_hosts:
            return False
        if (
            hints.force_nodes
            and host.name not in hints.force_nodes
            and host.uuid not in hints.force_nodes
        ):
            return False
        return True
