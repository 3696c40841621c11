"""Request bodies and query strings of /traits and provider traits."""

from placement.schemas import common

TRAIT_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT_NAME = dict(TRAIT_NAME, pattern=common.CUSTOM_TRAIT_PATTERN)

SET_PROVIDER_TRAITS = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": TRAIT_NAME},
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

LIST_TRAITS_QUERY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "associated": {"type": "string"},
    },
    "additionalProperties": False,
}
