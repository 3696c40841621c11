"""ComputeFilter: hosts an operator marked unschedulable take no new work."""


class ComputeFilter:
    name = "ComputeFilter"
    reason = "host is marked unschedulable"

    def node_fields(self, spec):
        return {"unschedulable"}

    def host_passes(self, host, spec):
        return not host.unschedulable
