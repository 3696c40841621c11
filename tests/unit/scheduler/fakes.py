"""A fake placement for unit tests: static hosts, real capacity and generation rules.

It answers what the scheduler's client asks (candidate pages with node data,
claims, moves, unclaims, reports, build requests) from in-memory state, so the
scheduler and conductor stages can be tested without a server. ``steal`` lets
a test make another scheduler win the race for a host before our claim lands;
``flip_to_eco`` lets the power controller make a host eco after the walk and
before the claim, which placement then refuses for performance work (409
``placement.allocation.profile_conflict``, as objects/allocation.py).
"""

import uuid as uuid_lib

from joule import placement_client as client_mod
from joule import vocabulary

PROFILE_CONFLICT = "placement.allocation.profile_conflict"


def host(
    name,
    cell="cell1",
    klass="performance",
    vcpu=8,
    ram=8192,
    disk=None,
    labels=None,
    unschedulable=False,
    uuid=None,
    heartbeat_age=None,
):
    caps = {"VCPU": vcpu, "MEMORY_MB": ram}
    if disk is not None:
        caps["DISK_GB"] = disk
    return {
        "uuid": uuid or str(uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS, name)),
        "name": name,
        "cell": cell,
        "schedulable_class": klass,
        "labels": labels or {},
        "unschedulable": unschedulable,
        "capacity": caps,
        "heartbeat_age": heartbeat_age,
    }


class FakePlacement:
    def __init__(self, hosts):
        self.hosts = {h["uuid"]: h for h in hosts}
        self.used = {h["uuid"]: {rc: 0 for rc in h["capacity"]} for h in hosts}
        self.consumers = {}  # consumer -> {"allocations": {rp: res}, "generation": n, ...}
        self.reports = {}
        self.build_requests = {}
        self.failed_builds = {}  # host uuid -> consecutive failed builds reported
        self.steal = set()  # host uuids a "concurrent scheduler" fills just before our claim
        self.flip_to_eco = set()  # host uuids the power controller makes eco just before it
        self.fail_next_claims = 0
        self.pages_served = 0
        self.calls = []
        self.queries = []  # (query, node_data, start) of every walk

    # -- the client's interface ---------------------------------------------
    def candidate_pages(self, query, page_size, node_data=True, start=None):
        self.queries.append((list(query), node_data, start))
        wanted = {}
        required, forbidden = set(), set()
        for key, value in query:
            if key == "resources":
                for part in value.split(","):
                    rc, amount = part.split(":")
                    wanted[rc] = int(amount)
            if key == "root_required":
                forbidden |= {t[1:] for t in value.split(",") if t.startswith("!")}
                required |= {t for t in value.split(",") if t and not t.startswith("!")}
        order = list(self.hosts.values())
        if start is not None:
            # placement's page_start: from that point of the order, wrapping.
            at = int(float(start) * len(order))
            order = order[at:] + order[:at]
        fitting = [
            h
            for h in order
            if self._fits(h["uuid"], wanted)
            and not (forbidden & self._root_traits(h))
            and required <= self._root_traits(h)
        ]
        pages = [fitting[i : i + page_size] for i in range(0, len(fitting), page_size)] or [[]]
        for hosts in pages:
            self.pages_served += 1
            body = {
                "allocation_requests": [
                    {"allocations": {h["uuid"]: {"resources": dict(wanted)}}} for h in hosts
                ],
                "provider_summaries": {
                    h["uuid"]: {
                        "resources": {
                            rc: {"capacity": cap, "used": self.used[h["uuid"]][rc]}
                            for rc, cap in h["capacity"].items()
                        },
                        "root_provider_uuid": h["uuid"],
                        "parent_provider_uuid": None,
                        "traits": [],
                    }
                    for h in hosts
                },
                "nodes": {
                    h["uuid"]: {
                        "name": h["name"],
                        "cell": h["cell"],
                        "family": "f",
                        "profile": None,
                        "schedulable_class": h["schedulable_class"],
                        "labels": h["labels"],
                        "unschedulable": h["unschedulable"],
                        "reserved": False,
                        "failed_builds": self.failed_builds.get(h["uuid"], 0),
                        "heartbeat_age": h.get("heartbeat_age"),
                    }
                    for h in hosts
                },
            }
            if not node_data:
                del body["nodes"]
            yield body

    def ensure_trait(self, name):
        self.calls.append(("PUT /traits", name))

    def put_allocations(
        self,
        consumer,
        allocation_request,
        project_id,
        user_id,
        consumer_generation=None,
        workload_class="standard",
        consumer_type="INSTANCE",
        server_group=None,
        lease=None,
    ):
        self.calls.append(("PUT", consumer))
        allocs = {rp: dict(e["resources"]) for rp, e in allocation_request["allocations"].items()}
        for rp in allocs:
            if rp in self.steal:
                self.steal.discard(rp)
                for rc in self.used[rp]:
                    self.used[rp][rc] = self.hosts[rp]["capacity"][rc]
            if rp in self.flip_to_eco:
                self.flip_to_eco.discard(rp)
                self.hosts[rp]["schedulable_class"] = vocabulary.ECO
        if self.fail_next_claims:
            self.fail_next_claims -= 1
            raise client_mod.Conflict(
                "PUT", "/allocations", 409, "placement.concurrent_update", "injected"
            )
        current = self.consumers.get(consumer)
        have_gen = current["generation"] if current else None
        if consumer_generation != have_gen:
            raise client_mod.Conflict(
                "PUT",
                "/allocations",
                409,
                "placement.concurrent_update",
                f"consumer generation conflict - expected {consumer_generation} but got {have_gen}",
            )
        old = current["allocations"] if current else {}
        for rp, res in allocs.items():
            for rc, amount in res.items():
                already = old.get(rp, {}).get(rc, 0)
                if self.used[rp][rc] - already + amount > self.hosts[rp]["capacity"][rc]:
                    raise client_mod.Conflict(
                        "PUT",
                        "/allocations",
                        409,
                        "placement.undefined_code",
                        f"Unable to allocate inventory: {rc} on {rp}",
                    )
        if workload_class == vocabulary.PERFORMANCE:
            for rp in allocs:
                eco = vocabulary.PROFILE_TRAITS[vocabulary.ECO]
                # A consumer already on the node may be rewritten there (draining).
                if eco in self._root_traits(self.hosts[rp]) and rp not in old:
                    raise client_mod.Conflict(
                        "PUT",
                        "/allocations",
                        409,
                        PROFILE_CONFLICT,
                        f"Unable to allocate inventory: consumer {consumer} has "
                        f"workload_class 'performance' and may not allocate from resource "
                        f"provider '{rp}': the root carries {eco}",
                    )
        self._release(old)
        if not allocs:
            # {"allocations": {}}: a release guarded by the generation.
            self.consumers.pop(consumer, None)
            return
        for rp, res in allocs.items():
            for rc, amount in res.items():
                self.used[rp][rc] += amount
        self.consumers[consumer] = {
            "allocations": allocs,
            "generation": (have_gen or 0) + 1,
            "workload_class": workload_class,
        }

    def post_allocations(self, claims):
        """POST /allocations: every claim or none (placement's rule)."""
        self.calls.append(("POST", [c[0] for c in claims]))
        for _consumer, areq, *_rest in claims:
            for rp in areq["allocations"]:
                if rp in self.steal:  # the other scheduler's claim lands first
                    self.steal.discard(rp)
                    for rc in self.used[rp]:
                        self.used[rp][rc] = self.hosts[rp]["capacity"][rc]
        used = {rp: dict(res) for rp, res in self.used.items()}
        consumers = dict(self.consumers)
        calls = len(self.calls)
        try:
            for consumer, areq, project_id, user_id, workload_class, ctype, group in claims:
                self.put_allocations(
                    consumer, areq, project_id, user_id, None, workload_class, ctype, group
                )
        except client_mod.PlacementError:
            self.used, self.consumers = used, consumers
            raise
        finally:
            del self.calls[calls:]

    def put_reports(self, reports):
        self.calls.append(("POST /scheduling_reports", len(reports)))
        for request_id, _project_id, report in reports:
            self.reports[request_id] = report

    def get_allocations(self, consumer):
        cur = self.consumers.get(consumer)
        if not cur:
            return {}, None
        return (
            {rp: {"resources": res} for rp, res in cur["allocations"].items()},
            cur["generation"],
        )

    def consumer_allocations(self, consumer):
        cur = self.consumers.get(consumer)
        if not cur:
            return {"allocations": {}}
        return {
            "allocations": {rp: {"resources": res} for rp, res in cur["allocations"].items()},
            "consumer_generation": cur["generation"],
            "project_id": "p",
            "user_id": "u",
            "consumer_type": "INSTANCE",
        }

    def delete_allocations(self, consumer, lease=None):
        self.calls.append(("DELETE", consumer))
        cur = self.consumers.pop(consumer, None)
        if cur:
            self._release(cur["allocations"])

    def put_report(self, request_id, project_id, report):
        self.reports[request_id] = report

    def create_build_request(self, instance_uuid, request_id, workload_class, spec):
        if instance_uuid in self.build_requests:
            return False
        self.build_requests[instance_uuid] = {
            "instance_uuid": instance_uuid,
            "request_id": request_id,
            "workload_class": workload_class,
            "spec": spec,
            "status": "pending",
            "host_uuid": None,
            "reason": None,
        }
        return True

    def report_build_outcome(self, host_uuid, succeeded):
        count = 0 if succeeded else self.failed_builds.get(host_uuid, 0) + 1
        self.failed_builds[host_uuid] = count
        return count

    def finish_build_request(self, instance_uuid, status, host_uuid=None, reason=None):
        self.build_requests[instance_uuid].update(status=status, host_uuid=host_uuid, reason=reason)

    def list_build_requests(self, status=None, workload_class=None, request_id=None):
        return [
            b
            for b in self.build_requests.values()
            if (status is None or b["status"] == status)
            and (workload_class is None or b["workload_class"] == workload_class)
            and (request_id is None or b["request_id"] == request_id)
        ]

    # -- helpers --------------------------------------------------------------
    @staticmethod
    def _root_traits(h):
        # The twin's profile trait: a draining node's profile is eco.
        klass = h["schedulable_class"]
        if klass in ("eco", "draining"):
            return {"CUSTOM_POWER_PROFILE_ECO"}
        if klass == "performance":
            return {"CUSTOM_POWER_PROFILE_PERFORMANCE"}
        return set()

    def _fits(self, rp, wanted):
        caps = self.hosts[rp]["capacity"]
        return all(rc in caps and self.used[rp][rc] + n <= caps[rc] for rc, n in wanted.items())

    def _release(self, allocs):
        for rp, res in allocs.items():
            for rc, amount in res.items():
                self.used[rp][rc] -= amount

    def holder_of(self, consumer):
        cur = self.consumers.get(consumer)
        return sorted(cur["allocations"]) if cur else []
