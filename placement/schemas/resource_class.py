"""Request bodies of /resource_classes."""

from placement.schemas import common

RESOURCE_CLASS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": common.CUSTOM_RC_PATTERN, "maxLength": 255},
    },
    "required": ["name"],
    "additionalProperties": False,
}
