"""The scheduling report: what one request saw and decided, for operators.

Written to placement (PUT /scheduling_reports/{request_id}) after every
request, placed or not, and readable back by request id. It answers "why did
this land there" and "why did nothing fit" without reading any worker's log.
"""

import time


class Report:
    def __init__(self, spec):
        self._start = time.monotonic()
        self.data = {
            "request_id": spec.request_id,
            "project_id": spec.project_id,
            "workload_class": spec.workload_class,
            "num_instances": spec.num_instances,
            "pages_fetched": 0,
            "candidates_seen": 0,
            "hosts_seen": 0,
            "filters": [],
            "removed_per_filter": {},
            "hosts_after_filters": 0,
            "top_hosts": [],
            "races_lost": 0,
            "claims": [],
            "result": None,
            "error": None,
        }

    def page(self, body):
        self.data["pages_fetched"] += 1
        self.data["candidates_seen"] += len(body.get("allocation_requests", ()))

    def filtered(self, hosts_seen, records, left):
        self.data["hosts_seen"] = hosts_seen
        self.data["filters"] = records
        self.data["removed_per_filter"] = {r["name"]: r["removed"] for r in records}
        self.data["hosts_after_filters"] = left

    def top(self, weighed, count):
        self.data["top_hosts"] = [
            {
                "uuid": h.uuid,
                "name": h.name,
                "cell": h.cell,
                "weight": round(w, 6),
                "weights": {k: round(v, 6) for k, v in parts.items()},
            }
            for w, parts, h in weighed[:count]
        ]

    def race_lost(self, host):
        self.data["races_lost"] += 1

    def group_refused(self, host):
        """Placement refused a claim for the request's server group."""
        self.data["group_refusals"] = self.data.get("group_refusals", 0) + 1

    def profile_refused(self, host):
        """Placement refused performance work on the host: it became eco
        after the walk read it (or a cached walk still had it)."""
        self.data["profile_refusals"] = self.data.get("profile_refusals", 0) + 1

    def claimed(self, instance_uuid, host, alternates):
        self.data["claims"].append(
            {
                "instance_uuid": instance_uuid,
                "host": host.uuid,
                "host_name": host.name,
                "cell": host.cell,
                "alternates": [a.uuid for a, _ in alternates],
            }
        )

    def finish(self, result, error=None):
        self.data["result"] = result
        self.data["error"] = error
        self.data["duration_ms"] = round((time.monotonic() - self._start) * 1000, 1)
        return self.data
