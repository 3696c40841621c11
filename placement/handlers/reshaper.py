"""HTTP handler: POST /reshaper (1.30)."""

from placement import errors
from placement import util
from placement.handlers import allocation as alloc_handler
from placement.objects import allocation as alloc_obj
from placement.objects import reshaper as reshaper_obj
from placement.policies import reshaper as policies
from placement.schemas import inventory as inventory_schema
from placement.schemas import reshaper as schema


def reshape():
    """Move inventories and allocations atomically.

    :raise 404: before 1.30.
    :raise 400: malformed body, unknown provider or resource class.
    :raise 409: generation conflicts, inventory in use, allocations that do not fit.
    """
    util.require_version(1, 30)
    util.context().can(policies.RESHAPE)
    data = util.extract_json(schema.post_schema(util.version()))
    inventories = {}
    for rp_uuid, body in data["inventories"].items():
        records = {}
        for rc_name, record in body["inventories"].items():
            full = dict(inventory_schema.DEFAULTS)
            full.update(record)
            # Allowed in a record as in PUT .../inventories, and ignored.
            full.pop("resource_provider_generation", None)
            records[rc_name] = full
        inventories[rp_uuid] = {
            "resource_provider_generation": body["resource_provider_generation"],
            "inventories": records,
        }
    deps = util.deps()
    writes = [
        alloc_handler.consumer_write(uuid, body, deps.conf)
        for uuid, body in data["allocations"].items()
    ]
    try:
        reshaper_obj.reshape(
            deps.db, inventories, writes, deps.conf.placement.allocation_conflict_retry_count
        )
    except reshaper_obj.ProviderNotFound as exc:
        raise errors.bad_request(str(exc), errors.RESOURCE_PROVIDER_NOT_FOUND)
    except (reshaper_obj.ProviderGenerationConflict, alloc_obj.ConsumerGenerationConflict) as exc:
        raise errors.conflict(str(exc), errors.CONCURRENT_UPDATE)
    except alloc_obj.ConcurrentUpdate as exc:
        raise errors.conflict(f"update conflict: {exc}", errors.CONCURRENT_UPDATE)
    except alloc_obj.ProviderNotFound as exc:
        raise errors.bad_request(str(exc))
    except alloc_obj.ResourceClassNotFound as exc:
        raise errors.bad_request(f"malformed reshaper data: {exc}")
    except reshaper_obj.InventoryInUse as exc:
        raise errors.conflict(f"update conflict: {exc}", errors.INVENTORY_INUSE)
    except alloc_obj.InvalidInventory as exc:
        raise errors.conflict(f"Unable to allocate inventory: {exc}")
    return util.empty_response(204)
