"""NodeSelectorFilter: every label of the request's node_selector must match."""


class NodeSelectorFilter:
    name = "NodeSelectorFilter"
    reason = "host labels do not match the node selector"

    def node_fields(self, spec):
        return {"labels"} if spec.node_selector else set()

    def host_passes(self, host, spec):
        selector = spec.node_selector
        if not selector:
            return True
        labels = host.labels
        return all(labels.get(k) == v for k, v in selector.items())
