"""placement.schema_check: the compiled check only ever says yes where
jsonschema says yes, and every error is still jsonschema's."""

import copy
import importlib
import pkgutil
import random
import uuid

import jsonschema
import pytest

import placement.schemas
from placement import microversion
from placement import schema_check
from placement import util
from placement.schemas import allocation
from placement.schemas import build_request


def _reference(instance, schema):
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=util._FORMAT_CHECKER)
    return jsonschema.exceptions.best_match(validator.iter_errors(instance))


def _checked(checkers, instance, schema):
    """(accepted, message) through ``checkers``."""
    try:
        checkers.check(instance, schema)
    except jsonschema.ValidationError as exc:
        return False, str(exc)
    return True, None


def _module_schemas():
    for info in pkgutil.iter_modules(placement.schemas.__path__):
        module = importlib.import_module(f"placement.schemas.{info.name}")
        for name, value in sorted(vars(module).items()):
            if name.isupper() and isinstance(value, dict) and {"type", "oneOf"} & set(value):
                yield f"{info.name}.{name}", value


def test_every_schema_of_the_api_is_checked_fast_or_left_to_jsonschema_on_purpose():
    fast = []
    for name, schema in _module_schemas():
        if schema_check.fast_compatible(schema):
            # Compiles (a schema that cannot would fail its requests).
            schema_check.fastjsonschema.compile(schema, formats={"uuid": util.UUID_RE.pattern})
            fast.append(name)
    # The hot paths of a scheduled instance are among them.
    for name in (
        "allocation.POST_ALLOCATIONS_V1_38",
        "build_request.POST_BUILD_REQUEST",
        "build_request.PUT_BUILD_REQUESTS",
        "build_request.PUT_LEASES",
        "scheduling_report.POST_REPORTS",
    ):
        assert name in fast, name


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}},
        {"enum": [1, 2]},  # 1 == True in Python: a boolean would pass a fast check
        {"type": "string", "format": "date-time"},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"const": "x"},
    ],
)
def test_keywords_whose_meaning_differs_are_left_to_jsonschema(schema):
    assert not schema_check.fast_compatible(schema)


def _uuid():
    return str(uuid.UUID(int=random.getrandbits(128)))


def _allocations_body(count, consumer_type=True):
    rp = _uuid()
    body = {}
    for _ in range(count):
        body[_uuid()] = {
            "allocations": {rp: {"resources": {"VCPU": 2, "MEMORY_MB": 4096}}},
            "project_id": _uuid(),
            "user_id": _uuid(),
            "consumer_generation": None,
        }
        if consumer_type:  # 1.38
            body[next(reversed(body))]["consumer_type"] = "INSTANCE"
    return body


def _build_requests_body(count):
    return {
        "build_requests": [
            {
                "instance_uuid": _uuid(),
                "request_id": f"req-{_uuid()}",
                "workload_class": "standard",
                "spec": {"num_instances": 1},
            }
            for _ in range(count)
        ],
        "owner": "super-1",
        "lease_seconds": 60,
    }


def _finishes_body(count):
    return {
        "build_requests": [
            {
                "instance_uuid": _uuid(),
                "status": "placed",
                "host_uuid": _uuid(),
                "owner": "cell-1",
                "generation": 3,
                "build_succeeded": True,
            }
            for _ in range(count)
        ]
    }


# Values a mutation puts in place of a leaf or adds under a key: each type,
# the edges of the ranges the schemas bound, and near-misses of the formats.
_ODD_VALUES = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    2.5,
    2**31,
    2**63,
    "",
    "x",
    "X" * 256,
    "INSTANCE",
    "instance",
    "placed",
    "PLACED",
    "12345678-1234-1234-1234-1234567890ab",
    "12345678123412341234123456789 0ab",
    "12345678-1234-1234-1234-1234567890ab\n",
    "123456781234123412341234567890ab",
    "req-" + "a" * 300,
    [],
    [1],
    {},
    {"x": 1},
]


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _mutate(body, rng):
    body = copy.deepcopy(body)
    paths = list(_paths(body))
    path = rng.choice(paths)
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    kind = rng.randrange(4)
    if not path:
        return rng.choice(_ODD_VALUES)
    last = path[-1]
    if kind == 0 and isinstance(parent, dict):
        del parent[last]
    elif kind == 1 and isinstance(parent, dict):
        parent[rng.choice(["extra", "Extra_1", _uuid(), "mappings", "owner"])] = rng.choice(
            _ODD_VALUES
        )
    elif kind == 2 and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))  # a duplicate item
    else:
        parent[last] = rng.choice(_ODD_VALUES)
    return body


@pytest.mark.parametrize(
    "schema, body",
    [
        (allocation.post_schema(microversion.Version(1, 38)), _allocations_body(3)),
        (allocation.post_schema(microversion.Version(1, 28)), _allocations_body(2, False)),
        (build_request.POST_BUILD_REQUEST, _build_requests_body(2)),
        (build_request.PUT_BUILD_REQUESTS, _finishes_body(2)),
    ],
)
def test_mutated_bodies_get_the_verdict_and_error_of_jsonschema(schema, body):
    rng = random.Random(27)
    checkers = schema_check.Checkers(util._FORMAT_CHECKER, util.UUID_RE.pattern)
    assert _checked(checkers, body, schema) == (True, None)
    assert checkers._by_id[id(schema)]._fast is not None  # compiled at first use
    refused = 0
    for _ in range(400):
        mutated = _mutate(body, rng)
        for _mutation in range(rng.randrange(3)):
            mutated = _mutate(mutated, rng) if isinstance(mutated, dict) else mutated
        error = _reference(mutated, schema)
        expected = (error is None, None if error is None else str(error))
        assert _checked(checkers, mutated, schema) == expected, mutated
        refused += error is not None
    assert refused > 130  # the mutations do test refusals
