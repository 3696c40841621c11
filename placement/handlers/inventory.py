"""HTTP handlers: /resource_providers/{uuid}/inventories[/{resource_class}].

Order of checks follows upstream so the same bad request gets the same
answer: provider exists (404), body (400), generation (409), field
consistency and capacity (400), then the write (400/409 from the database).
"""

import werkzeug.exceptions

from placement import errors
from placement import util
from placement.handlers import resource_provider as rp_handler
from placement.objects import inventory as inv_obj
from placement.objects import resource_provider as rp_obj
from placement.policies import inventory as policies
from placement.schemas import inventory as schema


def _url(rp_uuid, resource_class=None):
    url = rp_handler.provider_url(rp_uuid) + "/inventories"
    return f"{url}/{resource_class}" if resource_class else url


def _serialize(record, generation=None):
    data = {field: record[field] for field in inv_obj.FIELDS}
    if generation is not None:
        data["resource_provider_generation"] = generation
    return data


def _modified(record):
    return record.get("updated_at") or record.get("created_at") or "now"


def _with_defaults(raw):
    record = dict(schema.DEFAULTS)
    record.update(raw)
    record.pop("resource_provider_generation", None)
    record.pop("resource_class", None)
    return record


def _check_record(resource_class, rp_uuid, record, prefix):
    """400 when the fields of one inventory contradict each other.

    ``prefix`` is upstream's lead-in ("Unable to create inventory for ...").
    Capacity: before 1.26 reserved must be below total; from 1.26 it may
    equal it (a fully reserved provider).
    """
    if record["allocation_ratio"] <= 0:
        raise errors.bad_request(
            f"{prefix}: Invalid inventory for '{resource_class}' on resource provider "
            f"'{rp_uuid}'. The allocation_ratio must be greater than 0."
        )
    if record["min_unit"] > record["max_unit"]:
        raise errors.bad_request(
            f"{prefix}: Invalid inventory for '{resource_class}' on resource provider "
            f"'{rp_uuid}'. The min_unit ({record['min_unit']}) is greater than the max_unit "
            f"({record['max_unit']})."
        )
    cap = inv_obj.capacity(record)
    if util.want(1, 26):
        if cap < 0:
            raise errors.bad_request(
                f"{prefix}: Invalid inventory for '{resource_class}' on resource provider "
                f"'{rp_uuid}'. The reserved value is greater than total."
            )
    elif cap <= 0:
        raise errors.bad_request(
            f"{prefix}: Invalid inventory for '{resource_class}' on resource provider "
            f"'{rp_uuid}'. The reserved value is greater than or equal to total."
        )


def _check_generation(rp, seen):
    if rp["generation"] != seen:
        raise errors.conflict("resource provider generation conflict", errors.CONCURRENT_UPDATE)


def _read(uuid):
    """(provider, {class: record}); upstream's doubled 404 for an unknown provider."""
    try:
        return inv_obj.of_provider(util.deps().db, uuid)
    except rp_obj.NotFound:
        raise rp_handler.not_found_twice(uuid, sep=" : ")


def get_inventories(uuid):
    util.context().can(policies.LIST)
    rp, records = _read(uuid)
    body = {
        "inventories": {rc: _serialize(rec) for rc, rec in records.items()},
        "resource_provider_generation": rp["generation"],
    }
    return util.json_response(body, last_modified=util.last_modified_of(records.values()))


def get_inventory(uuid, resource_class):
    util.context().can(policies.SHOW)
    rp, records = _read(uuid)
    record = records.get(resource_class)
    if record is None:
        raise errors.not_found(f"No inventory of class {resource_class} for {uuid}")
    return util.json_response(_serialize(record, rp["generation"]), last_modified=_modified(record))


def create_inventory(uuid):
    util.context().can(policies.CREATE)
    rp_handler.require_json_content()
    db = util.deps().db
    rp = rp_handler.load(uuid)
    body = util.extract_json(schema.POST_INVENTORY)
    resource_class = body["resource_class"]
    record = _with_defaults(body)
    prefix = f"Unable to create inventory for resource provider {uuid}"
    _check_record(resource_class, uuid, record, prefix)
    try:
        generation, stored = inv_obj.add(db, uuid, rp["generation"], resource_class, record)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except (rp_obj.ConcurrentUpdate, inv_obj.InventoryExists) as exc:
        raise errors.conflict(f"Update conflict: {exc}", errors.CONCURRENT_UPDATE)
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.bad_request(f"{prefix}: {exc}")
    resp = util.json_response(
        _serialize(stored, generation),
        status=201,
        last_modified=_modified(stored),
        headers={"Location": rp_handler.absolute(_url(uuid, resource_class))},
    )
    return resp


def set_inventories(uuid):
    util.context().can(policies.UPDATE)
    rp_handler.require_json_content()
    db = util.deps().db
    rp = rp_handler.load(uuid)
    body = util.extract_json(schema.PUT_INVENTORIES)
    seen = body["resource_provider_generation"]
    _check_generation(rp, seen)
    records = {rc: _with_defaults(raw) for rc, raw in body["inventories"].items()}
    prefix = f"Unable to update inventory for resource provider {uuid}"
    for rc, record in records.items():
        _check_record(rc, uuid, record, prefix)
    try:
        generation, stored = inv_obj.replace_all(db, uuid, seen, records)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.bad_request(
            f"Unknown resource class in inventory for resource provider {uuid}: {exc}"
        )
    except rp_obj.ConcurrentUpdate as exc:
        raise errors.conflict(f"update conflict: {exc}", errors.CONCURRENT_UPDATE)
    except inv_obj.InventoryInUse as exc:
        raise errors.conflict(f"update conflict: {exc}", errors.INVENTORY_INUSE)
    body = {
        "inventories": {rc: _serialize(rec) for rc, rec in stored.items()},
        "resource_provider_generation": generation,
    }
    return util.json_response(body, last_modified=util.last_modified_of(stored.values()))


def delete_inventories(uuid):
    if not util.want(1, 5):
        # Upstream answers a DELETE of the collection before 1.5 with a 405.
        raise werkzeug.exceptions.MethodNotAllowed(valid_methods=["GET", "POST", "PUT"])
    util.context().can(policies.DELETE)
    db = util.deps().db
    rp = rp_handler.load(uuid)
    try:
        inv_obj.replace_all(db, uuid, rp["generation"], {})
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.ConcurrentUpdate:
        raise errors.conflict(
            f"Unable to delete inventory for resource provider {uuid} because the "
            "inventory was updated by another process. Please retry your request.",
            errors.CONCURRENT_UPDATE,
        )
    except inv_obj.InventoryInUse as exc:
        raise errors.conflict(str(exc), errors.INVENTORY_INUSE)
    return util.empty_response(204)


def update_inventory(uuid, resource_class):
    util.context().can(policies.UPDATE)
    rp_handler.require_json_content()
    db = util.deps().db
    rp = rp_handler.load(uuid)
    body = util.extract_json(schema.BASE_INVENTORY)
    seen = body["resource_provider_generation"]
    _check_generation(rp, seen)
    record = _with_defaults(body)
    _check_record(
        resource_class, uuid, record, f"Unable to update inventory for resource provider {uuid}"
    )
    try:
        generation, stored = inv_obj.update(db, uuid, seen, resource_class, record)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.ResourceClassNotFound as exc:
        raise errors.not_found(str(exc))
    except rp_obj.ConcurrentUpdate as exc:
        raise errors.conflict(f"update conflict: {exc}", errors.CONCURRENT_UPDATE)
    except inv_obj.InventoryNotFound as exc:
        raise errors.bad_request(
            f"No inventory record with resource class for resource provider {uuid}: {exc}"
        )
    return util.json_response(_serialize(stored, generation), last_modified=_modified(stored))


def delete_inventory(uuid, resource_class):
    util.context().can(policies.DELETE)
    db = util.deps().db
    rp = rp_handler.load(uuid)
    try:
        inv_obj.delete(db, uuid, rp["generation"], resource_class)
    except rp_obj.NotFound as exc:
        raise errors.not_found(str(exc))
    except (rp_obj.ResourceClassNotFound, inv_obj.InventoryNotFound) as exc:
        raise errors.not_found(f"No inventory of class {resource_class} found for delete: {exc}")
    except rp_obj.ConcurrentUpdate as exc:
        raise errors.conflict(
            f"Unable to delete inventory of class {resource_class}: {exc}", errors.CONCURRENT_UPDATE
        )
    except inv_obj.InventoryInUse as exc:
        # Upstream reports this with the concurrent_update code; the specific
        # inventory.inuse code is one clients can act on.
        raise errors.conflict(
            f"Unable to delete inventory of class {resource_class}: {exc}", errors.INVENTORY_INUSE
        )
    return util.empty_response(204)
