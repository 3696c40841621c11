"""Schema of POST /reshaper (1.30; allocations take mappings from 1.34 and
consumer_type from 1.38)."""

import copy

from placement.schemas import allocation
from placement.schemas import inventory


def _schema(post_allocations):
    allocations = copy.deepcopy(post_allocations)
    allocations["minProperties"] = 0
    return {
        "type": "object",
        "properties": {
            # Per provider, the body of PUT /resource_providers/{uuid}/inventories.
            "inventories": {
                "type": "object",
                "patternProperties": {allocation.UUID_PATTERN: inventory.PUT_INVENTORIES},
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
