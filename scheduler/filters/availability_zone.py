"""AvailabilityZoneFilter (nova's): a request that names a zone only goes to
hosts of that zone. A host's zone is its ``[filter_scheduler]
availability_zone_label`` node label, else ``default_availability_zone``
(set on each host by the worker as it reads the candidates)."""


class AvailabilityZoneFilter:
    name = "AvailabilityZoneFilter"
    reason = "host is not in the requested availability zone"

    def node_fields(self, state):
        # The zone is read off a node label.
        return {"labels"} if getattr(state, "availability_zone", None) else set()

    def host_passes(self, host, state):
        wanted = getattr(state, "availability_zone", None)
        return wanted is None or host.zone == wanted
