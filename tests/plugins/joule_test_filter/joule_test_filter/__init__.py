"""A scheduler filter from outside joule: it removes hosts of rack "x"."""


class RackXExcludedFilter:
    name = "RackXExcludedFilter"
    reason = "host is in rack x, which this site's plugin keeps free"

    def node_fields(self, spec):
        return {"labels"}

    def host_passes(self, host, spec):
        return (host.labels or {}).get("rack") != "x"
