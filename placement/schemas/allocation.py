"""JSON schemas of allocation bodies, one per microversion range.

Each later schema is derived from the earlier one so the differences read as
the microversion history: 1.8 requires project/user, 1.12 switches to the dict
form, 1.13 adds POST (empty allocations allowed), 1.28 requires a consumer
generation, 1.34 accepts mappings, 1.38 requires a consumer type.

Extension: every consumer may carry an optional ``workload_class`` and
``server_group`` (a group uuid to join); a vanilla client never sends them,
so its bodies validate exactly as upstream's.
"""

import copy

from joule import vocabulary

UUID_PATTERN = "^[0-9a-fA-F-]{36}$"
RC_PATTERN = "^[A-Z0-9_]+$"
CONSUMER_TYPE_PATTERN = "^[A-Z0-9_]+$"
GROUP_PATTERN_1_33 = "[a-zA-Z0-9_-]{1,64}"

_WORKLOAD_CLASS = {"type": "string", "enum": list(vocabulary.WORKLOAD_CLASSES)}
# Extension: the server group the consumer joins (objects/server_group.py).
_SERVER_GROUP = {
    "type": "string",
    "pattern": ("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"),
}
_EXTERNAL_ID = {"type": "string", "minLength": 1, "maxLength": 255}
_AMOUNTS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {RC_PATTERN: {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}

# 1.0-1.7: a list of {resource_provider: {uuid}, resources}; project and user
# optional (the incomplete-consumer defaults fill them in).
ALLOCATION_SCHEMA = {
    "type": "object",
    "properties": {
        "allocations": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "resource_provider": {
                        "type": "object",
                        "properties": {"uuid": {"type": "string", "format": "uuid"}},
                        "additionalProperties": False,
                        "required": ["uuid"],
                    },
                    "resources": copy.deepcopy(_AMOUNTS),
                },
                "required": ["resource_provider", "resources"],
                "additionalProperties": False,
            },
        },
        "workload_class": _WORKLOAD_CLASS,
        "server_group": _SERVER_GROUP,
    },
    "required": ["allocations"],
    "additionalProperties": False,
}

ALLOCATION_SCHEMA_V1_8 = copy.deepcopy(ALLOCATION_SCHEMA)
ALLOCATION_SCHEMA_V1_8["properties"]["project_id"] = _EXTERNAL_ID
ALLOCATION_SCHEMA_V1_8["properties"]["user_id"] = _EXTERNAL_ID
ALLOCATION_SCHEMA_V1_8["required"].extend(["project_id", "user_id"])

# 1.12: the dict form, symmetric with GET /allocations/{consumer}.
ALLOCATION_SCHEMA_V1_12 = {
    "type": "object",
    "properties": {
        "allocations": {
            "type": "object",
            "minProperties": 1,
            "patternProperties": {
                UUID_PATTERN: {
                    "type": "object",
                    "properties": {
                        # Accepted (GET shows it) and ignored.
                        "generation": {"type": "integer"},
                        "resources": copy.deepcopy(_AMOUNTS),
                    },
                    "required": ["resources"],
                    "additionalProperties": False,
                }
            },
            "additionalProperties": False,
        },
        "project_id": _EXTERNAL_ID,
        "user_id": _EXTERNAL_ID,
        "workload_class": _WORKLOAD_CLASS,
        "server_group": _SERVER_GROUP,
    },
    "additionalProperties": False,
    "required": ["allocations", "project_id", "user_id"],
}

# POST /allocations (1.13): consumers keyed by uuid, empty allocations allowed
# (they remove that consumer's allocations).
DELETABLE_ALLOCATIONS = copy.deepcopy(ALLOCATION_SCHEMA_V1_12)
DELETABLE_ALLOCATIONS["properties"]["allocations"]["minProperties"] = 0
POST_ALLOCATIONS_V1_13 = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "patternProperties": {UUID_PATTERN: DELETABLE_ALLOCATIONS},
}

_CONSUMER_GENERATION = {"type": ["integer", "null"], "additionalProperties": False}

ALLOCATION_SCHEMA_V1_28 = copy.deepcopy(DELETABLE_ALLOCATIONS)
ALLOCATION_SCHEMA_V1_28["properties"]["consumer_generation"] = _CONSUMER_GENERATION
ALLOCATION_SCHEMA_V1_28["required"].append("consumer_generation")

POST_ALLOCATIONS_V1_28 = copy.deepcopy(POST_ALLOCATIONS_V1_13)
POST_ALLOCATIONS_V1_28["patternProperties"] = {UUID_PATTERN: ALLOCATION_SCHEMA_V1_28}

# 1.34: mappings of request group suffixes to provider uuids, as returned by
# GET /allocation_candidates; accepted and not stored (as upstream).
_MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        GROUP_PATTERN_1_33: {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "format": "uuid"},
        }
    },
}
ALLOCATION_SCHEMA_V1_34 = copy.deepcopy(ALLOCATION_SCHEMA_V1_28)
ALLOCATION_SCHEMA_V1_34["properties"]["mappings"] = _MAPPINGS
POST_ALLOCATIONS_V1_34 = copy.deepcopy(POST_ALLOCATIONS_V1_28)
POST_ALLOCATIONS_V1_34["patternProperties"] = {UUID_PATTERN: ALLOCATION_SCHEMA_V1_34}

ALLOCATION_SCHEMA_V1_38 = copy.deepcopy(ALLOCATION_SCHEMA_V1_34)
ALLOCATION_SCHEMA_V1_38["properties"]["consumer_type"] = {
    "type": "string",
    "pattern": CONSUMER_TYPE_PATTERN,
    "minLength": 1,
    "maxLength": 255,
}
ALLOCATION_SCHEMA_V1_38["required"].append("consumer_type")
POST_ALLOCATIONS_V1_38 = copy.deepcopy(POST_ALLOCATIONS_V1_34)
POST_ALLOCATIONS_V1_38["patternProperties"] = {UUID_PATTERN: ALLOCATION_SCHEMA_V1_38}


def put_schema(version):
    """The PUT /allocations/{consumer} schema of a microversion."""
    if version.matches((1, 38)):
        return ALLOCATION_SCHEMA_V1_38
    if version.matches((1, 34)):
        return ALLOCATION_SCHEMA_V1_34
    if version.matches((1, 28)):
        return ALLOCATION_SCHEMA_V1_28
    if version.matches((1, 12)):
        return ALLOCATION_SCHEMA_V1_12
    if version.matches((1, 8)):
        return ALLOCATION_SCHEMA_V1_8
    return ALLOCATION_SCHEMA


def post_schema(version):
    """The POST /allocations schema of a microversion (1.13 and later)."""
    if version.matches((1, 38)):
        return POST_ALLOCATIONS_V1_38
    if version.matches((1, 34)):
        return POST_ALLOCATIONS_V1_34
    if version.matches((1, 28)):
        return POST_ALLOCATIONS_V1_28
    return POST_ALLOCATIONS_V1_13


WORKLOAD_USAGES_QUERY = {
    "type": "object",
    "properties": {
        "in_tree": {"type": "string", "format": "uuid"},
        # placement.paging checks them (a limit above its maximum is a 400).
        "limit": {"type": "string"},
        "marker": {"type": "string"},
    },
    "additionalProperties": False,
}
