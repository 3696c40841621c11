"""Request bodies of /resource_providers/{uuid}/aggregates."""

import copy

from placement.schemas import common

AGGREGATE_LIST = {"type": "array", "items": common.UUID_STRING, "uniqueItems": True}

# Before 1.19 the body is the bare list.
PUT_AGGREGATES_1_1 = copy.deepcopy(AGGREGATE_LIST)

PUT_AGGREGATES_1_19 = {
    "type": "object",
    "properties": {
        "aggregates": copy.deepcopy(AGGREGATE_LIST),
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["aggregates", "resource_provider_generation"],
    "additionalProperties": False,
}
