"""JSON schemas of the server group extension (nova API 2.64's rules).

``policy`` is one of nova's four; ``rules`` may only hold
``max_server_per_host`` (a positive integer) and only with ``anti-affinity``
(that last rule is checked in the handler, where the message can say why).
"""

from placement.objects import server_group as sg_obj
from placement.schemas import common

UUID = {"type": "string", "format": "uuid"}
EXTERNAL_ID = {"type": "string", "minLength": 1, "maxLength": 255}

POST_SERVER_GROUP = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[^\\x00-\\x1f\\x7f]*$",
        },
        "policy": {"type": "string", "enum": list(sg_obj.POLICIES)},
        "rules": {
            "type": "object",
            # The column is a 32-bit integer: a larger value was an overflow (a 500).
            "properties": {
                "max_server_per_host": {"type": "integer", "minimum": 1, "maximum": common.MAX_INT}
            },
            "additionalProperties": False,
        },
        "uuid": UUID,
        "project_id": EXTERNAL_ID,
        "user_id": EXTERNAL_ID,
    },
    "required": ["name", "policy", "project_id", "user_id"],
    "additionalProperties": False,
}

LIST_QUERY = {
    "type": "object",
    "properties": {
        "project_id": EXTERNAL_ID,
        "limit": {"type": "string"},
        "marker": {"type": "string"},
    },
    "additionalProperties": False,
}
