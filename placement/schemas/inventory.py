"""Request bodies of /resource_providers/{uuid}/inventories[/{class}]."""

import copy

from placement.schemas import common


def _int_field(minimum):
    return {"type": "integer", "minimum": minimum, "maximum": common.MAX_INT}


# PUT of one inventory: the generation is required, as is total.
BASE_INVENTORY = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "total": _int_field(1),
        "reserved": _int_field(0),
        "min_unit": _int_field(1),
        "max_unit": _int_field(1),
        "step_size": _int_field(1),
        "allocation_ratio": {"type": "number", "maximum": common.MAX_FLOAT},
    },
    "required": ["total", "resource_provider_generation"],
    "additionalProperties": False,
}

# POST names the class in the body and needs no generation.
POST_INVENTORY = copy.deepcopy(BASE_INVENTORY)
POST_INVENTORY["properties"]["resource_class"] = {
    "type": "string",
    "pattern": common.RC_PATTERN,
}
POST_INVENTORY["required"] = ["total", "resource_class"]

# PUT of the whole collection: one record per class, generation at the top.
INVENTORY_RECORD = copy.deepcopy(BASE_INVENTORY)
INVENTORY_RECORD["required"] = ["total"]
PUT_INVENTORIES = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {common.RC_PATTERN: INVENTORY_RECORD},
            # A class name that is not upper-case/digits/_ is a 400, not ignored.
            "additionalProperties": False,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}

DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": common.MAX_INT,
    "step_size": 1,
    "allocation_ratio": 1.0,
}
