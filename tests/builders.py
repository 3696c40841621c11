"""Test data (providers, inventories, traits, aggregates, allocations) written
through ``placement/objects/``, the functions the API itself calls.

Tests of one area (allocation candidates, the power controller, the
conformance fixtures) set up what they need without going through another
area's HTTP API, and the rows they get are the rows the service writes: same
generations, same ids, same checks (a builder call the service would refuse
fails here too). Each function takes a ``placement.db.Database``.
"""

import uuid as uuid_lib

from placement.objects import aggregate as agg_obj
from placement.objects import allocation as alloc_obj
from placement.objects import inventory as inv_obj
from placement.objects import node as node_obj
from placement.objects import resource_class as rc_obj
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from tests.specs import build_request_spec

# A builder runs alone on its database: a conflict here is a test bug.
_RETRIES = 0


def create_provider(db, name=None, uuid=None, parent_uuid=None):
    """Create a provider (a root unless ``parent_uuid``); return its uuid."""
    uuid = uuid or str(uuid_lib.uuid4())
    rp_obj.create(db, uuid, name or f"rp-{uuid[:8]}", parent_uuid)
    return uuid


def ensure_resource_class(db, name):
    """Create the custom class ``name`` unless it exists."""
    try:
        rc_obj.get(db, name)
    except rp_obj.ResourceClassNotFound:
        rc_obj.create(db, name)


def set_inventory(
    db,
    rp_uuid,
    resource_class,
    total,
    reserved=0,
    min_unit=1,
    max_unit=None,
    step_size=1,
    allocation_ratio=1.0,
):
    """Add or replace one inventory record (a custom class is created on first use).

    Moves the provider generation by one, as the API's write does.
    """
    ensure_resource_class(db, resource_class)
    record = {
        "total": total,
        "reserved": reserved,
        "min_unit": min_unit,
        "max_unit": max_unit if max_unit is not None else total,
        "step_size": step_size,
        "allocation_ratio": allocation_ratio,
    }
    rp, current = inv_obj.of_provider(db, rp_uuid)
    if resource_class in current:
        inv_obj.update(db, rp_uuid, rp["generation"], resource_class, record)
    else:
        inv_obj.add(db, rp_uuid, rp["generation"], resource_class, record)


def set_twin(db, rp_uuid, profile, schedulable_class=None):
    """Create or update the root provider's twin (placement sets its profile
    trait with it), as the power controller writes it."""
    try:
        twin, _modified = node_obj.get_twin(db, rp_uuid)
        generation = twin["generation"]
    except node_obj.NotFound:
        generation = None
    node_obj.set_twins(
        db,
        [
            {
                "uuid": rp_uuid,
                "generation": generation,
                "profile": profile,
                # As the API defaults it: the class a profile schedules as.
                "schedulable_class": schedulable_class or profile,
                "cpu_cap_watts": None,
                "gpu_cap_watts": None,
                "managed_by": None,
            }
        ],
    )


def set_traits(db, rp_uuid, *names):
    """Make the provider's traits exactly ``names`` (custom ones are created)."""
    for name in names:
        trait_obj.ensure(db, name)
    rp = rp_obj.get(db, rp_uuid)
    trait_obj.set_for_provider(db, rp_uuid, rp["generation"], list(names))


def set_aggregates(db, rp_uuid, *agg_uuids):
    """Make the provider's aggregates exactly ``agg_uuids`` (the 1.19+ write)."""
    rp = rp_obj.get(db, rp_uuid)
    agg_obj.set_for_provider(db, rp_uuid, list(agg_uuids), seen_generation=rp["generation"])


def allocate(
    db,
    consumer_uuid,
    allocations,
    project="proj",
    user="user",
    workload_class="standard",
    consumer_type=None,
):
    """Make the consumer hold exactly ``allocations`` ``{rp_uuid: {rc: amount}}``.

    The claim path of the API (capacity checked; a new consumer ends at
    generation 1, each provider's generation moves by one).
    """
    write = alloc_obj.ConsumerWrite(
        uuid=consumer_uuid,
        allocations=allocations,
        project_id=project,
        user_id=user,
        consumer_type=consumer_type,
        workload_class=workload_class,
    )
    alloc_obj.replace_all(db, [write], _RETRIES)


def allocation_body(rp_uuid, workload_class=None, generation=None, amount=1, group=None):
    """The body of a 1.38 ``PUT /allocations/{consumer}`` (one value of a
    ``POST /allocations``) of ``amount`` VCPU from ``rp_uuid``, with the
    scheduler's extension fields when given (``workload_class``,
    ``server_group``); a plain client's write leaves them out."""
    body = {
        "allocations": {rp_uuid: {"resources": {"VCPU": amount}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": generation,
        "consumer_type": "INSTANCE",
    }
    if workload_class is not None:
        body["workload_class"] = workload_class
    if group is not None:
        body["server_group"] = group
    return body


def build_request(instance=None, request_id="req-page", workload_class="standard"):
    """One record of POST /build_requests (a fresh instance unless named)."""
    instance = instance or str(uuid_lib.uuid4())
    return {
        "instance_uuid": instance,
        "request_id": request_id,
        "spec": build_request_spec(instance, request_id, workload_class),
    }
