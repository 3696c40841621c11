"""Reserve and unreserve in placement: claim, unclaim, move a claim.

Claim = PUT /allocations/{consumer} with consumer_generation null: it succeeds
only for a consumer that holds nothing, so two schedulers can never both
claim one instance. Unclaim is idempotent (404 and "nothing held" count as
success) and may be called for a consumer that was never claimed. Moving a
claim replaces the allocations in ONE write guarded by the consumer's current
generation, so the instance never holds nothing in between.

A spec that names a server group sends it with every claim and move:
placement checks the group's policy in the same write, so a claim that would
break it is a 409 like a lost race (the scheduler takes its next host).
"""


def claim(client, consumer, allocation_request, spec):
    """Claim for ``consumer``; raise placement_client.Conflict on a lost race."""
    client.put_allocations(
        consumer,
        allocation_request,
        spec.project_id,
        spec.user_id,
        consumer_generation=None,
        workload_class=spec.workload_class,
        consumer_type=spec.consumer_type,
        server_group=spec.server_group,
    )


def unclaim(client, consumer):
    """Release every allocation of ``consumer``; safe to repeat."""
    client.delete_allocations(consumer)


def move(client, consumer, allocation_request, spec):
    """Replace the consumer's allocations with ``allocation_request`` in one write.

    The write carries the generation read just before; if anything changed the
    consumer in between, placement answers 409 and nothing is changed.
    :raise placement_client.Conflict: the alternate's capacity is gone or the consumer changed.
    """
    _current, generation = client.get_allocations(consumer)
    client.put_allocations(
        consumer,
        allocation_request,
        spec.project_id,
        spec.user_id,
        consumer_generation=generation,
        workload_class=spec.workload_class,
        consumer_type=spec.consumer_type,
        server_group=spec.server_group,
    )
