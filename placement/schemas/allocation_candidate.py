"""Query-string schemas of GET /allocation_candidates, one per microversion step.

Each schema only says which keys exist at a microversion and their basic
shape; the values are parsed by ``placement.query`` and the handler. The
extension keys (``page_size``, ``page_marker``, ``node_data``) are taken out
of the query before validation, so these schemas stay upstream's.
"""

GROUP_SUFFIX = r"[1-9][0-9]*"  # numbered groups, 1.25
GROUP_SUFFIX_1_33 = r"[a-zA-Z0-9_-]{1,64}"  # named groups, 1.33

_STRING = {"type": "string"}
_LIMIT = {
    # A query value is always a string; the pattern makes it a positive int.
    "type": ["integer", "string"],
    "pattern": "^[1-9][0-9]*$",
    "minimum": 1,
    "minLength": 1,
}


def _schema(properties, pattern_properties=None, required=None):
    out = {"type": "object", "properties": dict(properties), "additionalProperties": False}
    if pattern_properties:
        out["patternProperties"] = dict(pattern_properties)
    if required:
        out["required"] = list(required)
    return out


def _groups(suffix, keys):
    return {f"^{key}({suffix})?$": _STRING for key in keys}


GET_1_10 = _schema({"resources": _STRING}, required=["resources"])
GET_1_16 = _schema({"resources": _STRING, "limit": _LIMIT}, required=["resources"])
GET_1_17 = _schema(
    {"resources": _STRING, "limit": _LIMIT, "required": _STRING}, required=["resources"]
)
GET_1_21 = _schema(
    {"resources": _STRING, "limit": _LIMIT, "required": _STRING, "member_of": _STRING},
    required=["resources"],
)
_POLICY = {"type": "string", "enum": ["none", "isolate"]}
GET_1_25 = _schema(
    {"limit": _LIMIT, "group_policy": _POLICY},
    _groups(GROUP_SUFFIX, ("resources", "required", "member_of")),
)
GET_1_31 = _schema(
    {"limit": _LIMIT, "group_policy": _POLICY},
    _groups(GROUP_SUFFIX, ("resources", "required", "member_of", "in_tree")),
)
GET_1_33 = _schema(
    {"limit": _LIMIT, "group_policy": _POLICY},
    _groups(GROUP_SUFFIX_1_33, ("resources", "required", "member_of", "in_tree")),
)
GET_1_35 = _schema(
    {"limit": _LIMIT, "group_policy": _POLICY, "root_required": _STRING},
    _groups(GROUP_SUFFIX_1_33, ("resources", "required", "member_of", "in_tree")),
)
GET_1_36 = _schema(
    {"limit": _LIMIT, "group_policy": _POLICY, "root_required": _STRING, "same_subtree": _STRING},
    _groups(GROUP_SUFFIX_1_33, ("resources", "required", "member_of", "in_tree")),
)

_BY_VERSION = [
    ((1, 36), GET_1_36),
    ((1, 35), GET_1_35),
    ((1, 33), GET_1_33),
    ((1, 31), GET_1_31),
    ((1, 25), GET_1_25),
    ((1, 21), GET_1_21),
    ((1, 17), GET_1_17),
    ((1, 16), GET_1_16),
]


def get_schema(version):
    """The query schema in force at ``version`` (a (major, minor) tuple)."""
    for minimum, schema in _BY_VERSION:
        if tuple(version) >= minimum:
            return schema
    return GET_1_10
