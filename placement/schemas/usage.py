"""Query string schemas of GET /usages (1.9, consumer_type from 1.38)."""

import copy

GET_USAGES_SCHEMA_1_9 = {
    "type": "object",
    "properties": {
        "project_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    "required": ["project_id"],
    "additionalProperties": False,
}

# "all" and "unknown" are the two lower-case values besides type names.
GET_USAGES_SCHEMA_V1_38 = copy.deepcopy(GET_USAGES_SCHEMA_1_9)
GET_USAGES_SCHEMA_V1_38["properties"]["consumer_type"] = {
    "type": "string",
    "pattern": "^[A-Z0-9_]+$|^all|^unknown$",
    "minLength": 1,
    "maxLength": 255,
}
