"""Reserve and unreserve in placement: claim with retry, unclaim, move a claim.

Claim = a write with consumer_generation null: it succeeds only for a
consumer that holds nothing, so two schedulers can never both claim one
instance. One claim is ``PUT /allocations/{consumer}``; several (a batch's)
are one ``POST /allocations``, all or none. ``reserve`` is the one
claim-with-retry of the scheduler: a provider generation conflict placement
gave up on (its own retries against concurrent writers ran out) is retried
after a jittered pause, as nova's report client does; every other refusal
is said as what it is, for the caller to decide (drop the host, re-read the
server group, answer ConsumerInUse, go alone on a fresh walk).

Unclaim is idempotent (404 and "nothing held" count as success) and may be
called for a consumer that was never claimed. ``release_own`` releases only
the claim it read, while it is still the one the caller wrote (a write
guarded by the consumer generation): every release of the scheduler (its
unwind, a batch's, a claim found after its caller's deadline) and of the
conductor's sweep for a given-up request, so that a late or repeated
release never deletes a claim somebody else made since. Moving a claim
replaces the allocations in ONE write guarded by the consumer's current
generation, so the instance never holds nothing in between.

A conductor's writes on the claim of a record it holds (claim, move,
unclaim) carry the record's lease (``lease``: (generation, owner)):
placement applies them only while the conductor still holds the record at
that generation, so a conductor that lost its lease, or whose record was
taken over, changes nothing (Conflict with ``lease_lost``).

A spec that names a server group sends it with every claim and move:
placement checks the group's policy in the same write, so a claim that would
break it is a 409 like a lost race.
"""

import dataclasses
import logging
import time

from joule import placement_client
from scheduler import server_groups
from scheduler.errors import UNREACHABLE

LOG = logging.getLogger(__name__)

# upstream's code of a provider (or consumer) generation conflict; a capacity
# shortage is a 409 without it ("Unable to allocate inventory").
CONCURRENT_UPDATE = "placement.concurrent_update"
# Placement refused performance work on a node whose root is eco (it became
# eco after the walk read it): a lost race for that host, never retried.
PROFILE_CONFLICT = "placement.allocation.profile_conflict"
GENERATION_RETRIES = 3

# What became of a reservation.
CLAIMED = "claimed"
LOST = "lost"  # someone else took the capacity (or the host turned eco)
CONSUMER_IN_USE = "consumer_in_use"  # a consumer already holds allocations
GROUP_REFUSED = "group_refused"  # the server group's policy refused it
UNREACHABLE_NOW = "unreachable"  # unknown whether it was written
REFUSED = "refused"  # placement refused it otherwise (nothing written)

# What release_own did.
RELEASED = "released"
NOTHING_HELD = "nothing_held"
LEFT = "left"  # someone else's claim now (or it changed meanwhile)


@dataclasses.dataclass(frozen=True)
class Claim:
    """One consumer's claim: its allocation request, for ``spec``'s owner."""

    consumer: str
    allocation_request: dict
    spec: object


@dataclasses.dataclass(frozen=True)
class Reservation:
    status: str
    code: str | None = None  # placement's error code of a refusal
    error: Exception | None = None


def reserve(client, claims, rng, bulk=False):
    """Write ``claims`` (one write, all or none), retrying a provider
    generation conflict; a Reservation says what became of them. ``bulk``:
    ``POST /allocations`` even for one claim (a batch member's)."""
    for attempt in range(GENERATION_RETRIES + 1):
        try:
            _write(client, claims, bulk)
            return Reservation(CLAIMED)
        except placement_client.Conflict as exc:
            if exc.consumer_conflict:
                return Reservation(CONSUMER_IN_USE, exc.code, exc)
            if exc.code == CONCURRENT_UPDATE and attempt < GENERATION_RETRIES:
                time.sleep(rng.uniform(0, 0.05 * (attempt + 1)))
                continue
            if exc.code == server_groups.POLICY_VIOLATION:
                return Reservation(GROUP_REFUSED, exc.code, exc)
            return Reservation(LOST, exc.code, exc)
        except UNREACHABLE as exc:
            return Reservation(UNREACHABLE_NOW, None, exc)
        except placement_client.PlacementError as exc:
            return Reservation(REFUSED, getattr(exc, "code", None), exc)
    raise AssertionError("unreachable: the last attempt returns")


def _write(client, claims, bulk):
    if len(claims) == 1 and not bulk:
        c = claims[0]
        claim(client, c.consumer, c.allocation_request, c.spec)
        return
    client.post_allocations(
        [
            (
                c.consumer,
                c.allocation_request,
                c.spec.project_id,
                c.spec.user_id,
                c.spec.workload_class,
                c.spec.consumer_type,
                c.spec.server_group,
            )
            for c in claims
        ]
    )


def release(client, claims, request_id=None):
    """Release the ``claims`` (Claim) this caller wrote, newest first
    (Unreserve order), each only while it is still that claim
    (``release_own``): a claim made since by somebody else (a retry that
    claimed the instance again) is left. A failure is logged and the others
    are still released."""
    errors = []
    for c in reversed(list(claims)):
        try:
            release_own(client, c.consumer, c.allocation_request["allocations"])
        except placement_client.PlacementError as exc:
            errors.append(f"{c.consumer}: {exc}")
    if errors:
        LOG.error("could not release claims of %s: %s", request_id or "a batch", "; ".join(errors))


def release_own(client, consumer, allocations=None):
    """Release ``consumer``'s claim in one write guarded by the consumer
    generation read just before (``PUT /allocations/{consumer}`` with no
    allocations), so a claim written in between is never deleted.
    ``allocations`` ({rp: {"resources": ...}}): only when the claim is still
    exactly these (the ones the caller wrote); None: whatever it holds. (A
    consumer released and claimed again, to the same providers and amounts,
    between the caller's claim and this read is not told apart: placement
    starts a consumer again at the same generation.)

    :return: RELEASED; NOTHING_HELD (nothing to release); LEFT (not the
        expected claim, or it changed meanwhile: left to whoever made it).
    :raise placement_client.PlacementError, PlacementUnreachable:
    """
    body = client.consumer_allocations(consumer)
    held = body.get("allocations") or {}
    if not held:
        return NOTHING_HELD
    if allocations is not None and _amounts(held) != _amounts(allocations):
        return LEFT
    try:
        client.put_allocations(
            consumer,
            {"allocations": {}},
            body["project_id"],
            body["user_id"],
            consumer_generation=body["consumer_generation"],
            consumer_type=body.get("consumer_type") or "INSTANCE",
        )
    except placement_client.Conflict as exc:
        if exc.consumer_conflict:
            return LEFT
        raise
    return RELEASED


def _amounts(allocations):
    return {rp: dict(a.get("resources") or {}) for rp, a in allocations.items()}


def claim(client, consumer, allocation_request, spec, lease=None):
    """Claim for ``consumer``; raise placement_client.Conflict on a lost race
    (or, with ``lease``, a lost lease)."""
    _put(client, consumer, allocation_request, spec, None, lease)


def unclaim(client, consumer, lease=None):
    """Release every allocation of ``consumer``; safe to repeat.
    :raise placement_client.Conflict: (``lease`` given) the lease was lost.
    """
    client.delete_allocations(consumer, lease=lease)


def move(client, consumer, allocation_request, spec, lease=None):
    """Replace the consumer's allocations with ``allocation_request`` in one write.

    The write carries the generation read just before; if anything changed the
    consumer in between, placement answers 409 and nothing is changed.
    :raise placement_client.Conflict: the alternate's capacity is gone, the
        consumer changed (or, with ``lease``, the lease was lost).
    """
    _current, generation = client.get_allocations(consumer)
    _put(client, consumer, allocation_request, spec, generation, lease)


def _put(client, consumer, allocation_request, spec, consumer_generation, lease):
    client.put_allocations(
        consumer,
        allocation_request,
        spec.project_id,
        spec.user_id,
        consumer_generation=consumer_generation,
        workload_class=spec.workload_class,
        consumer_type=spec.consumer_type,
        server_group=spec.server_group,
        lease=lease,
    )
