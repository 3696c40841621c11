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
forgets; an instance whose record is still pending (its end came before
its build's finish), a report from an agent that has not registered its
host yet, and a placement error are left out, and the agent reports them
again at its next look.
"""

import logging

from conductor import metrics
from conductor import records as records_mod
from joule import placement_client as client_mod
from joule import vocabulary
from scheduler import claim as claim_mod

LOG = logging.getLogger(__name__)
PLACED = "placed"
PENDING = "pending"
NOT_THERE = "placement.build_request.not_placed_there"


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
                if self._one(host, host_uuid, uuid, instance):
                    done.append(uuid)
            except records_mod.PLACEMENT_ERRORS as exc:
                LOG.warning("%s ended on %s; not recorded yet (%s)", uuid, host, exc)
        return done

    def _one(self, host, host_uuid, uuid, instance):
        """Whether the end of ``uuid`` is dealt with for good (the agent may
        forget it); False: not yet, the agent reports it again."""
        state, why = instance.get("state"), instance.get("reason")
        if host_uuid is None:
            return False  # an agent not registered yet: its host is not known
        record = self.records.get(uuid)
        if record is not None and record["status"] == PENDING:
            # The end came before the build's finish (a command that ended
            # within its start window, a finish delayed): judged once the
            # record is final.
            return False
        if record is None or record["status"] != PLACED or record["host_uuid"] != host_uuid:
            LOG.info(
                "%s %s on %s, where it is not placed (record %s); nothing released",
                uuid,
                state,
                host,
                record and record["status"],
            )
            return True
        if state not in ENDS:
            LOG.warning("%s: end %r from %s is not an end; ignored", uuid, state, host)
            return True
        # The end first, then the release: a release lost with its answer
        # is made again when the agent reports again (the end is recorded
        # once; the same end again changes nothing).
        try:
            self.client.set_instance_state(uuid, state, host_uuid, _exit_status(instance), why)
        except client_mod.Conflict as exc:
            if exc.code == NOT_THERE:
                LOG.info("%s: no longer placed on %s; nothing released", uuid, host)
                return True
            # Ended otherwise already (recorded from an earlier report).
            LOG.warning("%s: end not recorded again: %s", uuid, exc.detail)
        allocations, _gen = self.client.get_allocations(uuid)
        if host_uuid not in allocations:
            return True  # released already (or never held here)
        outcome = claim_mod.release_own(self.client, uuid, allocations)
        if outcome == claim_mod.RELEASED:
            metrics.INSTANCES_ENDED.labels(state).inc()
        LOG.info("%s %s on %s%s: claim %s", uuid, state, host, f" ({why})" if why else "", outcome)
        return True


ENDS = vocabulary.INSTANCE_ENDS


def _exit_status(instance):
    status = instance.get("exit_status")
    if isinstance(status, bool) or not isinstance(status, int) or not -255 <= status <= 255:
        return None
    return status
