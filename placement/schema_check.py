"""Checking a body or query against its JSON schema, fast when it is valid.

jsonschema decides what is valid and says why not: its ``best_match`` error
is the text of every 400 (as upstream's). It is also slow: a POST
/allocations of 64 consumers took 32 ms to validate (a VM under load),
and placement's CPU per scheduled instance fell by about a tenth without
it (docs/benchmarks.md). So a schema is also compiled to
Python with fastjsonschema when first used, and a body that compiled check
accepts is accepted; anything it refuses goes through jsonschema, which
accepts it or gives the error. Only the fast "yes" is trusted, so the
compiled check is used only for schemas whose every keyword means the same
to both (``_FAST_KEYWORDS``): fastjsonschema speaks draft 7, jsonschema the
2020-12 draft these schemas are read as, and they differ on ``$ref``
siblings and on keywords one of them does not know; an ``enum`` of anything
but strings and null (Python's ``1 == True`` would let a boolean through);
and formats other than ``uuid`` (ours, the same regular expression for
both).
"""

import fastjsonschema
import jsonschema
import jsonschema.exceptions
import jsonschema.validators

# Keywords whose meaning is the same in draft 7 (fastjsonschema) and
# 2020-12 (jsonschema) for the values this project's schemas give them.
_FAST_KEYWORDS = frozenset(
    {
        "additionalProperties",
        "allOf",
        "anyOf",
        "description",
        "enum",
        "format",
        "items",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "not",
        "oneOf",
        "pattern",
        "patternProperties",
        "properties",
        "propertyNames",
        "required",
        "title",
        "type",
        "uniqueItems",
    }
)
# Keywords whose value is a map of names to schemas.
_SCHEMA_MAPS = ("properties", "patternProperties")

_MAX_CACHED = 512


class Checker:
    """One schema's check: ``check(instance)`` raises jsonschema's
    ``ValidationError`` (its best match) or returns."""

    def __init__(self, schema, format_checker, uuid_pattern):
        self.schema = schema
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        self._reference = cls(schema, format_checker=format_checker)
        # Compiled at the first check (about 10 ms for the largest schema):
        # jsonschema on a first bulk body of 500 finishes costs more.
        self._fast = None
        if fast_compatible(schema):
            self._fast = fastjsonschema.compile(schema, formats={"uuid": uuid_pattern})

    def check(self, instance):
        fast = self._fast
        if fast is not None:
            try:
                fast(instance)
                return
            except fastjsonschema.JsonSchemaException:
                pass  # jsonschema decides, and says why
        error = jsonschema.exceptions.best_match(self._reference.iter_errors(instance))
        if error is not None:
            raise error


def fast_compatible(schema):
    """Whether every keyword of ``schema`` means the same to fastjsonschema
    as to jsonschema (see the module's docstring)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return False
        for key, value in node.items():
            if key not in _FAST_KEYWORDS:
                return False
            if key in _SCHEMA_MAPS:
                if not isinstance(value, dict):
                    return False
                stack.extend(value.values())
            elif key in ("allOf", "anyOf", "oneOf"):
                if not isinstance(value, list):
                    return False
                stack.extend(value)
            elif key in ("items", "additionalProperties", "not", "propertyNames"):
                if isinstance(value, list):  # draft 7's tuple form: 2020-12 differs
                    return False
                stack.append(value)
            elif key == "enum":
                if not all(item is None or isinstance(item, str) for item in value):
                    return False
            elif key == "format":
                if value != "uuid":
                    return False
    return True


class Checkers:
    """Checkers cached per schema object (a schema is built once, at import)."""

    def __init__(self, format_checker, uuid_pattern):
        self._format_checker = format_checker
        self._uuid_pattern = uuid_pattern
        self._by_id = {}

    def check(self, instance, schema):
        checker = self._by_id.get(id(schema))
        if checker is None or checker.schema is not schema:
            checker = Checker(schema, self._format_checker, self._uuid_pattern)
            if len(self._by_id) > _MAX_CACHED:  # schemas built per request must not pile up
                self._by_id.clear()
            self._by_id[id(schema)] = checker
        checker.check(instance)
