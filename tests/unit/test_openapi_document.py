"""docs/api/openapi.yaml is valid OpenAPI 3.1 and cannot drift from the code.

Its paths and methods are those of placement/routes.py (plus the two paths
the middleware serves), its request bodies are the schemas of
placement/schemas/ the handlers validate with, its error codes those of
placement/errors.py, and its microversions those of placement/microversion.py.
tests/functional/api/test_openapi.py holds the running server to it.
"""

import copy
import pathlib
import re

import pytest
import yaml

from placement import errors
from placement import microversion
from placement import routes
from tools import openapi_request_schemas

DOCUMENT = pathlib.Path(__file__).resolve().parents[2] / "docs" / "api" / "openapi.yaml"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
# Served in front of the Flask app (placement/healthcheck.py, placement/metrics.py).
MIDDLEWARE_PATHS = {"/healthcheck", "/metrics"}


@pytest.fixture(scope="module")
def document():
    return yaml.safe_load(DOCUMENT.read_text())


def _operations(document):
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def _version(text):
    return microversion.Version.parse(text)


def test_is_valid_openapi_3_1(document):
    assert document["openapi"].startswith("3.1.")
    import schemathesis  # the test extra has it

    schemathesis.openapi.from_path(str(DOCUMENT)).validate()


def test_is_valid_by_openapi_spec_validator(document):
    import openapi_spec_validator  # the test extra has it

    openapi_spec_validator.validate(copy.deepcopy(document))


def test_paths_and_methods_are_the_routes(document):
    want = {
        re.sub(r"<([a-z_]+)>", r"{\1}", path): {m.lower() for m in methods}
        for path, methods in routes.ROUTES.items()
    }
    got = {
        path: {m for m in METHODS if m in item}
        for path, item in document["paths"].items()
        if path not in MIDDLEWARE_PATHS
    }
    assert got == want
    for path in MIDDLEWARE_PATHS:
        assert document["paths"][path]["x-placement-layer"] == "middleware"


def test_path_parameters_are_declared(document):
    for path, item in document["paths"].items():
        names = set(re.findall(r"{([a-z_]+)}", path))
        refs = item.get("parameters", [])
        params = [document["components"]["parameters"][r["$ref"].split("/")[-1]] for r in refs]
        assert {p["name"] for p in params if p["in"] == "path"} == names, path


def test_operations_carry_their_microversions(document):
    ids = set()
    for path, method, op in _operations(document):
        where = f"{method.upper()} {path}"
        assert op["operationId"] not in ids, where
        ids.add(op["operationId"])
        assert op.get("summary"), where
        if path in MIDDLEWARE_PATHS:
            continue
        low = _version(op["x-openstack"]["min-ver"])
        assert str(low) in microversion.VERSIONS, where
        refs = [p.get("$ref") for p in op.get("parameters", [])]
        assert "#/components/parameters/ApiVersion" in refs, where
        for param in op.get("parameters", []):
            if "x-openstack" in param:
                assert _version(param["x-openstack"]["min-ver"]) >= low, (where, param["name"])


def test_microversion_header_lists_every_version(document):
    enum = document["components"]["parameters"]["ApiVersion"]["schema"]["enum"]
    assert enum == [f"placement {v}" for v in microversion.VERSIONS] + ["placement latest"]
    assert document["info"]["version"] == microversion.MAX_VERSION


def test_error_codes_are_those_of_the_api(document):
    codes = {
        value
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, str) and value.startswith("placement.")
    }
    enum = document["components"]["schemas"]["ErrorCode"]["enum"]
    assert len(enum) == len(set(enum))
    assert set(enum) == codes
    for path, method, op in _operations(document):
        for status, listed in op.get("x-placement-error-codes", {}).items():
            assert status in op["responses"], (method, path, status)
            assert set(listed) <= codes, (method, path, status)


def _resolve(value, schemas):
    """``value`` with every local $ref replaced by its target, annotations dropped."""
    if isinstance(value, dict):
        if set(value) == {"$ref"}:
            return _resolve(schemas[value["$ref"].split("/")[-1]], schemas)
        return {
            k: _resolve(v, schemas)
            for k, v in value.items()
            if k not in ("x-placement-schema", "x-openstack")
        }
    if isinstance(value, list):
        return [_resolve(v, schemas) for v in value]
    return value


def test_request_schemas_are_the_handlers_schemas(document):
    schemas = document["components"]["schemas"]
    marked = {name: s for name, s in schemas.items() if "x-placement-schema" in s}
    listed = {name for name, _dotted, _versions in openapi_request_schemas.SCHEMAS}
    assert set(marked) == listed
    for name, schema in marked.items():
        dotted = schema["x-placement-schema"].removeprefix("placement.schemas.")
        assert _resolve(schema, schemas) == openapi_request_schemas.load(dotted), name


def test_request_schema_block_is_current():
    assert openapi_request_schemas.main(["--check"]) == 0


def test_every_request_body_names_its_schemas(document):
    """A body is a request schema of placement/schemas/ or a microversion anyOf of them."""
    schemas = document["components"]["schemas"]
    for path, method, op in _operations(document):
        if "requestBody" not in op:
            continue
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        refs = [b["$ref"] for b in schema.get("anyOf", [schema])]
        for ref in refs:
            assert "x-placement-schema" in schemas[ref.split("/")[-1]], (method, path, ref)
        if "anyOf" in schema:
            assert schema["x-openstack"] == {"discriminator": "microversion"}, (method, path)
