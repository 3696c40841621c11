"""Build requests in placement, as the conductors use them: held under leases.

A conductor only acts on a record it holds. ``take`` is placement's
compare-and-set on the generation the conductor read; ``finish`` is guarded
by the owner, so a conductor whose lease ran out and was taken over cannot
finish what is no longer its own. Every call is one REST request.
"""

import logging

from joule import placement_client as client_mod

LOG = logging.getLogger(__name__)

DUPLICATE = "placement.build_request.duplicate"
LEASED = "placement.build_request.leased"
FINISHED = "placement.build_request.invalid_transition"
CONCURRENT = "placement.concurrent_update"
# Conflicts that mean "not yours (any more)": somebody else holds, took or
# finished it.
LOST = (LEASED, FINISHED, CONCURRENT)


class AlreadyRecorded(Exception):
    """The request's instances have build requests already (a redelivery)."""


class Records:
    def __init__(self, client, owner, lease_seconds):
        self.client = client
        self.owner = owner
        self.lease_seconds = lease_seconds

    def create_held(self, items):
        """Record pending build requests held by this owner, all or none.

        :return: {instance_uuid: generation}.
        :raise AlreadyRecorded: some instance is recorded already.
        """
        try:
            resp = self.client.request(
                "POST",
                "/build_requests",
                json={
                    "build_requests": items,
                    "owner": self.owner,
                    "lease_seconds": self.lease_seconds,
                },
                ok=(201,),
            )
        except client_mod.PlacementError as exc:
            if exc.status == 409 and exc.code == DUPLICATE:
                raise AlreadyRecorded(exc.detail) from exc
            raise
        return {r["instance_uuid"]: r["generation"] for r in resp.json()["build_requests"]}

    def get(self, instance_uuid):
        """The record, or None when there is none."""
        try:
            return self.client.request("GET", f"/build_requests/{instance_uuid}", ok=(200,)).json()
        except client_mod.PlacementError as exc:
            if exc.status == 404:
                return None
            raise

    def take(self, instance_uuid, generation, hand_off=False):
        """Take (or renew, or hand off) the record; its new generation, or None
        when it is not this conductor's to take (held, taken, finished)."""
        try:
            resp = self.client.request(
                "PUT",
                f"/build_requests/{instance_uuid}/lease",
                json={
                    "owner": self.owner,
                    "generation": generation,
                    "lease_seconds": self.lease_seconds,
                    "hand_off": hand_off,
                },
                ok=(200,),
                retry=False,
            )
        except client_mod.PlacementError as exc:
            if exc.status == 409 and exc.code in LOST:
                return None
            raise
        return resp.json()["generation"]

    def finish(self, instance_uuid, status, host_uuid=None, reason=None):
        """Finish a record this conductor holds; False when it no longer does."""
        body = {"status": status, "host_uuid": host_uuid, "owner": self.owner}
        if reason is not None:
            body["reason"] = reason[:60000]
        try:
            self.client.request(
                "PUT", f"/build_requests/{instance_uuid}", json=body, ok=(200,), retry=True
            )
        except client_mod.PlacementError as exc:
            if exc.status == 409 and exc.code in LOST:
                LOG.warning(
                    "build request %s not finished as %s: no longer ours (%s)",
                    instance_uuid,
                    status,
                    exc.detail,
                )
                return False
            raise
        return True

    def expired(self, limit):
        """Pending records nobody holds any more (their conductor died)."""
        return self.client.request(
            "GET",
            "/build_requests",
            params={"status": "pending", "lease_expired": "true", "limit": str(limit)},
            ok=(200,),
        ).json()["build_requests"]

    def of_request(self, request_id):
        return self.client.request(
            "GET", "/build_requests", params={"request_id": request_id}, ok=(200,)
        ).json()["build_requests"]
