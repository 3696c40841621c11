"""JSON schemas of the build request extension.

The envelope is checked here with jsonschema, like every body of the API; the
``spec`` it carries is the scheduler's request spec and is loaded with the
one contract of joule.request_spec (``handlers.build_request``), so placement
refuses exactly what the scheduler and the conductor would refuse.
"""

from joule import request_spec
from joule import vocabulary

UUID = {"type": "string", "format": "uuid"}
WORKLOAD_CLASS = {"type": "string", "enum": list(vocabulary.WORKLOAD_CLASSES)}
OWNER = {"type": "string", "minLength": 1, "maxLength": 255}
# A lease longer than a day is a conductor that forgot to finish.
LEASE_SECONDS = {"type": "integer", "minimum": 1, "maximum": 86400}
GENERATION = {"type": "integer", "minimum": 0}
# The request spec's own rule: the id may end up in a URL path.
REQUEST_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": request_spec.REQUEST_ID_MAX,
    "pattern": request_spec.ID_PATTERN,
}
# Bulk bodies: issue 12's batches are at most this many instances per call.
MAX_BULK = 10000

_RECORD = {
    "instance_uuid": UUID,
    "request_id": REQUEST_ID,
    "workload_class": WORKLOAD_CLASS,
    "spec": {"type": "object"},
}

# One record, or {"build_requests": [record, ...]} created all or none; either
# may be created already held by "owner" for "lease_seconds".
POST_BUILD_REQUEST = {
    "oneOf": [
        {
            "type": "object",
            "properties": {**_RECORD, "owner": OWNER, "lease_seconds": LEASE_SECONDS},
            "required": ["instance_uuid", "request_id", "spec"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "build_requests": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_BULK,
                    "items": {
                        "type": "object",
                        "properties": _RECORD,
                        "required": ["instance_uuid", "request_id", "spec"],
                        "additionalProperties": False,
                    },
                },
                "owner": OWNER,
                "lease_seconds": LEASE_SECONDS,
            },
            "required": ["build_requests"],
            "additionalProperties": False,
        },
    ],
}

_FINISH = {
    "status": {"type": "string", "enum": ["placed", "failed"]},
    "host_uuid": {"anyOf": [UUID, {"type": "null"}]},
    "reason": {"anyOf": [{"type": "string", "maxLength": 65535}, {"type": "null"}]},
    # Guards: finish only while this owner holds it / only at this generation.
    "owner": OWNER,
    "generation": GENERATION,
    # Placed after a build on host_uuid that succeeded: also clears the
    # host's consecutive failed builds (POST /nodes/build_outcomes' success).
    "build_succeeded": {"type": "boolean"},
}

PUT_BUILD_REQUEST = {
    "type": "object",
    "properties": _FINISH,
    "required": ["status"],
    "additionalProperties": False,
}

# Many finishes in one transaction, all or none.
PUT_BUILD_REQUESTS = {
    "type": "object",
    "properties": {
        "build_requests": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_BULK,
            "items": {
                "type": "object",
                "properties": {"instance_uuid": UUID, **_FINISH},
                "required": ["instance_uuid", "status"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["build_requests"],
    "additionalProperties": False,
}

PUT_LEASE = {
    "type": "object",
    "properties": {
        "owner": OWNER,
        "generation": GENERATION,
        "lease_seconds": LEASE_SECONDS,
        "hand_off": {"type": "boolean"},
        "holder": OWNER,
    },
    "required": ["owner", "generation", "lease_seconds"],
    "additionalProperties": False,
}

# Many leases in one transaction, all or none: one owner, one lease length,
# one operation (take/renew, or hand off) for every record listed.
PUT_LEASES = {
    "type": "object",
    "properties": {
        "build_requests": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_BULK,
            "items": {
                "type": "object",
                "properties": {"instance_uuid": UUID, "generation": GENERATION, "holder": OWNER},
                "required": ["instance_uuid", "generation"],
                "additionalProperties": False,
            },
        },
        "owner": OWNER,
        "lease_seconds": LEASE_SECONDS,
        "hand_off": {"type": "boolean"},
    },
    "required": ["build_requests", "owner", "lease_seconds"],
    "additionalProperties": False,
}

# ``request_id=in:a,b,c``: the records of any of these requests (at most
# MAX_REQUEST_IDS ids, each a request id; the id pattern has no ':' or ',').
MAX_REQUEST_IDS = 100
_ID_BODY = request_spec.ID_PATTERN[1:-1]
REQUEST_IDS = {
    "type": "string",
    "pattern": f"^in:{_ID_BODY}(,{_ID_BODY})*$",
}

# PUT /build_requests/{instance_uuid}/instance_state: how a placed instance
# ended, reported for the host it was placed on.
PUT_INSTANCE_STATE = {
    "type": "object",
    "properties": {
        "state": {"type": "string", "enum": list(vocabulary.INSTANCE_ENDS)},
        "host_uuid": UUID,
        "exit_status": {"type": ["integer", "null"], "minimum": -255, "maximum": 255},
        "reason": {"type": ["string", "null"], "maxLength": 4096},
    },
    "required": ["state", "host_uuid"],
    "additionalProperties": False,
}

LIST_QUERY = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["pending", "placed", "failed"]},
        "workload_class": WORKLOAD_CLASS,
        "request_id": {"anyOf": [REQUEST_ID, REQUEST_IDS]},
        "owner": OWNER,
        "lease_expired": {"type": "string", "enum": ["true", "false"]},
        # placement.paging checks them (a limit above its maximum is a 400).
        "limit": {"type": "string"},
        "marker": {"type": "string"},
    },
    "additionalProperties": False,
}

# GET /build_requests/counts: the listing's filters, no paging.
COUNT_QUERY = {
    "type": "object",
    "properties": {
        k: v for k, v in LIST_QUERY["properties"].items() if k not in ("limit", "marker")
    },
    "additionalProperties": False,
}
