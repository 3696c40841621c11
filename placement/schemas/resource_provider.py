"""Request bodies and query strings of /resource_providers.

Each microversion that adds a field gets its own schema, so a field sent
before its microversion is an "Additional properties are not allowed" 400
exactly as upstream answers.
"""

import copy

from placement.schemas import common

POST_RP = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 200},
        "uuid": common.UUID_STRING,
    },
    "required": ["name"],
    "additionalProperties": False,
}

PUT_RP = copy.deepcopy(POST_RP)
del PUT_RP["properties"]["uuid"]

# 1.14: a provider may name its parent (null = a root).
POST_RP_1_14 = copy.deepcopy(POST_RP)
POST_RP_1_14["properties"]["parent_provider_uuid"] = {
    "anyOf": [common.UUID_STRING, {"type": "null"}]
}
PUT_RP_1_14 = copy.deepcopy(POST_RP_1_14)
del PUT_RP_1_14["properties"]["uuid"]

# Query strings of GET /resource_providers, by the microversion that added
# each parameter. Values are checked for syntax in placement.query.
LIST_1_0 = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "uuid": common.UUID_STRING,
    },
    "additionalProperties": False,
}
LIST_1_3 = copy.deepcopy(LIST_1_0)
LIST_1_3["properties"]["member_of"] = {"type": "string"}
LIST_1_4 = copy.deepcopy(LIST_1_3)
LIST_1_4["properties"]["resources"] = {"type": "string"}
LIST_1_14 = copy.deepcopy(LIST_1_4)
LIST_1_14["properties"]["in_tree"] = common.UUID_STRING
LIST_1_18 = copy.deepcopy(LIST_1_14)
LIST_1_18["properties"]["required"] = {"type": "string"}


def list_schema(version):
    """The query-string schema for the request's microversion."""
    for minimum, schema in (
        ((1, 18), LIST_1_18),
        ((1, 14), LIST_1_14),
        ((1, 4), LIST_1_4),
        ((1, 3), LIST_1_3),
    ):
        if version >= minimum:
            return schema
    return LIST_1_0
