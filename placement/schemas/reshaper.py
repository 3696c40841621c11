"""Schema of POST /reshaper (1.30; allocations take mappings from 1.34 and
consumer_type from 1.38)."""

import copy

from placement.schemas import allocation

MAX_INT = 2147483647
SQL_SP_FLOAT_MAX = 3.40282e38

# One inventory record, as in PUT /resource_providers/{uuid}/inventories.
INVENTORY_RECORD = {
    "type": "object",
    "properties": {
        "total": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "reserved": {"type": "integer", "maximum": MAX_INT, "minimum": 0},
        "min_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "max_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "step_size": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "allocation_ratio": {"type": "number", "maximum": SQL_SP_FLOAT_MAX},
    },
    "required": ["total"],
    "additionalProperties": False,
}
INVENTORY_DEFAULTS = {
    "reserved": 0, "min_unit": 1, "max_unit": MAX_INT, "step_size": 1,
    "allocation_ratio": 1.0,
}
PROVIDER_INVENTORIES = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {allocation.RC_PATTERN: INVENTORY_RECORD},
            # As in PUT .../inventories: a key that is not a resource class
            # name (its record unchecked, e.g. null) was a 500.
            "additionalProperties": False,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}


def _schema(post_allocations):
    allocations = copy.deepcopy(post_allocations)
    allocations["minProperties"] = 0
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {allocation.UUID_PATTERN: PROVIDER_INVENTORIES},
                # At least one provider: otherwise there is nothing to reshape.
                "minProperties": 1,
                "additionalProperties": False,
            },
            "allocations": allocations,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


POST_RESHAPER_SCHEMA = _schema(allocation.POST_ALLOCATIONS_V1_28)
POST_RESHAPER_SCHEMA_V1_34 = _schema(allocation.POST_ALLOCATIONS_V1_34)
POST_RESHAPER_SCHEMA_V1_38 = _schema(allocation.POST_ALLOCATIONS_V1_38)


def post_schema(version):
    if version.matches((1, 38)):
        return POST_RESHAPER_SCHEMA_V1_38
    if version.matches((1, 34)):
        return POST_RESHAPER_SCHEMA_V1_34
    return POST_RESHAPER_SCHEMA
