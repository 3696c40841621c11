"""Instances that ended on their host: their claims released.

A node agent reports the instances that ended on it (``instances_ended``
on its cell's conductor topic, or the super conductor's for a node without
a cell): finished, errored, deleted or lost, each with how. A conductor
releases the instance's claim when it is the instance's claim on that
host: the build request is placed there and the allocation is on it. The
release is a write guarded by the consumer generation read just before
(scheduler.claim.release_own), so a claim written meanwhile (by a
reschedule elsewhere) is never deleted. An instance whose claim is
elsewhere (a late start on a host the build had already given up) has
nothing of its own to release: its report is taken as it is. The report
is answered with the instances it has dealt with, which the agent then
forgets; a placement error leaves an instance out, and the agent reports
it again at its next look.
"""

import logging

from conductor import metrics
from conductor import records as records_mod
from joule import placement_client as client_mod
from scheduler import claim as claim_mod

LOG = logging.getLogger(__name__)
PLACED = "placed"


class InstanceEnds:
    def __init__(self, records, client):
        self.records = records
        self.client = client

    def ended(self, host, host_uuid, instances):
        """Deal with the ended ``instances`` of ``host`` (its provider
        ``host_uuid``); the uuids dealt with."""
        done = []
        for instance in instances:
            uuid = instance.get("instance_uuid")
            if not isinstance(uuid, str):
                continue
            try:
                self._one(host, host_uuid, uuid, instance)
            except records_mod.PLACEMENT_ERRORS as exc:
                LOG.warning("%s ended on %s; not recorded yet (%s)", uuid, host, exc)
                continue
            done.append(uuid)
        return done

    def _one(self, host, host_uuid, uuid, instance):
        record = self.records.get(uuid)
        state, why = instance.get("state"), instance.get("reason")
        ours = (
            record is not None
            and record["status"] == PLACED
            and host_uuid is not None
            and record["host_uuid"] == host_uuid
        )
        if not ours or state not in ENDS:
            LOG.info(
                "%s %s on %s, where it is not placed (record %s); nothing released",
                uuid,
                state,
                host,
                record and record["status"],
            )
            return
        # The end first, then the release: a release lost with its answer
        # is made again when the agent reports again (the end is recorded
        # once; the same end again changes nothing).
        try:
            self.client.set_instance_state(uuid, state, host_uuid, _exit_status(instance), why)
        except client_mod.Conflict as exc:
            LOG.warning("%s: end not recorded: %s", uuid, exc.detail)
        allocations, _gen = self.client.get_allocations(uuid)
        if host_uuid not in allocations:
            return  # released already (or never held here)
        outcome = claim_mod.release_own(self.client, uuid, allocations)
        metrics.INSTANCES_ENDED.labels(state).inc()
        LOG.info("%s %s on %s%s: claim %s", uuid, state, host, f" ({why})" if why else "", outcome)


ENDS = ("finished", "errored", "deleted", "lost")


def _exit_status(instance):
    status = instance.get("exit_status")
    if isinstance(status, bool) or not isinstance(status, int) or not -255 <= status <= 255:
        return None
    return status
