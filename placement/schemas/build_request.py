"""JSON schemas of the build request extension."""

from joule import vocabulary

UUID = {"type": "string", "format": "uuid"}
WORKLOAD_CLASS = {"type": "string", "enum": list(vocabulary.WORKLOAD_CLASSES)}

POST_BUILD_REQUEST = {
    "type": "object",
    "properties": {
        "instance_uuid": UUID,
        "request_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "workload_class": WORKLOAD_CLASS,
        "spec": {"type": "object"},
    },
    "required": ["instance_uuid", "request_id", "spec"],
    "additionalProperties": False,
}

PUT_BUILD_REQUEST = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["placed", "failed"]},
        "host_uuid": {"anyOf": [UUID, {"type": "null"}]},
        "reason": {"anyOf": [{"type": "string", "maxLength": 65535}, {"type": "null"}]},
    },
    "required": ["status"],
    "additionalProperties": False,
}

LIST_QUERY = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["pending", "placed", "failed"]},
        "workload_class": WORKLOAD_CLASS,
        "request_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "limit": {"type": "string", "pattern": "^[1-9][0-9]{0,6}$"},
    },
    "additionalProperties": False,
}
