"""JSON schemas of the /nodes extension bodies (node records, hardware, twins)."""

from joule import vocabulary

_STR255 = {"type": "string", "minLength": 1, "maxLength": 255}
_NULLABLE_STR255 = {"type": ["string", "null"], "maxLength": 255}
_COUNT = {"type": ["integer", "null"], "minimum": 0, "maximum": 0x7FFFFFFF}
_WATTS = {"type": ["number", "null"], "minimum": 0, "maximum": 1000000}
_GENERATION = {"type": ["integer", "null"], "minimum": 0}

PUT_NODE = {
    "type": "object",
    "properties": {
        "cell": _NULLABLE_STR255,
        "labels": {
            "type": "object",
            "maxProperties": 256,
            "propertyNames": {"minLength": 1, "maxLength": 255},
            "additionalProperties": {"type": "string", "maxLength": 255},
        },
        "reserved": {"type": "boolean"},
        "unschedulable": {"type": "boolean"},
        "generation": _GENERATION,
    },
    "additionalProperties": False,
}

PUT_HARDWARE = {
    "type": "object",
    "properties": {
        "cpu_model": _NULLABLE_STR255,
        "cpu_sockets": _COUNT,
        "cpu_cores": _COUNT,
        "memory_gib": _COUNT,
        "gpu_vendor": {"type": ["string", "null"], "maxLength": 64},
        "gpu_model": _NULLABLE_STR255,
        "gpu_count": {"type": "integer", "minimum": 0, "maximum": 1024},
        "gpu_min_cap_watts": _WATTS,
        "gpu_max_cap_watts": _WATTS,
        "cpu_min_cap_watts": _WATTS,
        "cpu_max_cap_watts": _WATTS,
    },
    "additionalProperties": False,
}

_TWIN_PROPERTIES = {
    "profile": {"type": "string", "enum": list(vocabulary.PROFILES)},
    "schedulable_class": {"type": "string", "enum": list(vocabulary.SCHEDULABLE_CLASSES)},
    "cpu_cap_watts": _WATTS,
    "gpu_cap_watts": _WATTS,
    "managed_by": _NULLABLE_STR255,
    # Left out: the stored power state stays (null on a new twin).
    "power_state": {"type": ["string", "null"], "enum": [*vocabulary.POWER_STATES, None]},
    "generation": _GENERATION,
}

PUT_TWIN = {
    "type": "object",
    "properties": _TWIN_PROPERTIES,
    "required": ["profile"],
    "additionalProperties": False,
}

POST_TWINS = {
    "type": "object",
    "properties": {
        "twins": {
            "type": "array",
            "maxItems": 100000,
            "items": {
                "type": "object",
                "properties": {"uuid": {"type": "string", "format": "uuid"}, **_TWIN_PROPERTIES},
                "required": ["uuid", "profile"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["twins"],
    "additionalProperties": False,
}

LIST_QUERY = {
    "type": "object",
    # placement.paging checks limit and marker (a limit above its maximum is a 400).
    "properties": {"cell": _STR255, "limit": {"type": "string"}, "marker": {"type": "string"}},
    "additionalProperties": False,
}

# The envelope alone: POST /nodes/twins checks its (up to 100,000) items with
# placement.handlers.node._plain_twin first, and only runs the full schema
# (for its precise message) when one of them does not pass.
POST_TWINS_ENVELOPE = {
    "type": "object",
    "properties": {"twins": {"type": "array", "maxItems": 100000, "items": {"type": "object"}}},
    "required": ["twins"],
    "additionalProperties": False,
}

# What the node agent applied of one part (cpu, gpu) of its twin's spec.
_NAME = {"type": "string", "minLength": 1, "maxLength": 64}
_REASON = {"type": ["string", "null"], "maxLength": 1000}
_PART_STATUS = {
    "type": ["object", "null"],
    "properties": {
        "method": {"type": "string", "enum": ["rapl", "cpufreq", "nvml", "none"]},
        "result": {
            "type": "string",
            "enum": ["applied", "uncapped", "unsupported", "out_of_range", "failed"],
        },
        "requested_watts": _WATTS,
        "applied_watts": _WATTS,
        "measured_watts": _WATTS,
        "reason": _REASON,
        "scaling_max_khz": {"type": ["integer", "null"], "minimum": 0, "maximum": 100000000},
        "domains": {
            "type": "array",
            "maxItems": 1024,
            "items": {
                "type": "object",
                "properties": {
                    "name": _NAME,
                    "limit_watts": _WATTS,
                    "measured_watts": _WATTS,
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["method", "result"],
    "additionalProperties": False,
}

# The node agent's heartbeat; it may carry the twin status (what it applied
# and measured), which only the agent writes.
POST_HEARTBEAT = {
    "type": "object",
    "properties": {
        "twin_status": {
            "type": "object",
            "properties": {
                "observed_generation": {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "maximum": 0x7FFFFFFF,
                },
                "profile": {"type": ["string", "null"], "enum": [*vocabulary.PROFILES, None]},
                "cpu": _PART_STATUS,
                "gpu": _PART_STATUS,
                # The agent's compute service: its instances running now.
                "instances": {
                    "type": "object",
                    "properties": {
                        "running": {"type": "integer", "minimum": 0, "maximum": 0x7FFFFFFF},
                        "running_performance": {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": 0x7FFFFFFF,
                        },
                    },
                    "required": ["running", "running_performance"],
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

# A conductor's report of one build on a host (BuildFailureWeigher's input).
POST_BUILD_OUTCOME = {
    "type": "object",
    "properties": {"succeeded": {"type": "boolean"}},
    "required": ["succeeded"],
    "additionalProperties": False,
}

# Many build reports in one call (the conductors batch them).
POST_BUILD_OUTCOMES = {
    "type": "object",
    "properties": {
        "outcomes": {
            "type": "array",
            "minItems": 1,
            "maxItems": 10000,
            "items": {
                "type": "object",
                "properties": {
                    "uuid": {"type": "string", "format": "uuid"},
                    "succeeded": {"type": "boolean"},
                },
                "required": ["uuid", "succeeded"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["outcomes"],
    "additionalProperties": False,
}
