"""What the scheduler looked up for one request, next to its spec.

Filters and weighers are shared by every request a worker serves (several at
once under the RPC server), so nothing request-specific may live on them.
They receive a ``RequestState``: it answers every attribute of the request
spec (``state.workload_class``, ``state.is_performance``...) and adds what
the worker resolved for this request: the server group view and the
providers of the instances its hints name.
"""


class RequestState:
    def __init__(self, spec, group=None, hint_providers=None):
        self.spec = spec
        self.group = group  # scheduler.server_groups.GroupView or None
        # {"same_host" | "different_host": {provider uuid, ...}} for the hints
        # the spec gives: the providers the named instances' allocations are on.
        self.hint_providers = hint_providers or {}

    def __getattr__(self, name):
        # Only called for names not set above: the spec's fields.
        return getattr(self.spec, name)
