"""Write the request body schemas of docs/api/openapi.yaml from placement/schemas/.

The handlers validate every request body with a JSON schema of
``placement.schemas``; the OpenAPI document carries the very same schemas
(OpenAPI 3.1 schemas are JSON Schema 2020-12, the dialect the handlers
validate with), each marked ``x-placement-schema: <module>.<NAME>``. This
tool rewrites the block between the ``BEGIN``/``END`` marker lines of the
document from the Python objects; a part equal to a schema listed earlier
becomes a ``$ref`` to it, so the allocation and reshaper bodies read as the
microversion history they are.

    python -m tools.openapi_request_schemas            # rewrite the block
    python -m tools.openapi_request_schemas --check    # exit 1 when stale

tests/unit/test_openapi_document.py holds the document to these objects
(with every ``$ref`` resolved), so an edit of a schema that is not carried
into the document fails there.
"""

import argparse
import importlib
import json
import pathlib
import sys

import yaml

DOCUMENT = pathlib.Path(__file__).resolve().parent.parent / "docs" / "api" / "openapi.yaml"
BEGIN = "    # BEGIN request schemas (python -m tools.openapi_request_schemas)\n"
END = "    # END request schemas\n"

# (component name, placement.schemas object, microversion range or None).
# Earlier entries are referenced by later ones where equal.
SCHEMAS = [
    ("ResourceProviderCreate", "resource_provider.POST_RP", ("1.0", "1.13")),
    ("ResourceProviderCreate_1_14", "resource_provider.POST_RP_1_14", ("1.14", None)),
    ("ResourceProviderUpdate", "resource_provider.PUT_RP", ("1.0", "1.13")),
    ("ResourceProviderUpdate_1_14", "resource_provider.PUT_RP_1_14", ("1.14", None)),
    ("ResourceClassBody", "resource_class.RESOURCE_CLASS", None),
    ("InventoryUpdate", "inventory.BASE_INVENTORY", None),
    ("InventoryCreate", "inventory.POST_INVENTORY", None),
    ("InventoriesReplace", "inventory.PUT_INVENTORIES", None),
    ("AggregatesUpdate_1_1", "aggregate.PUT_AGGREGATES_1_1", ("1.1", "1.18")),
    ("AggregatesUpdate_1_19", "aggregate.PUT_AGGREGATES_1_19", ("1.19", None)),
    ("ProviderTraitsUpdate", "trait.SET_PROVIDER_TRAITS", None),
    ("ConsumerAllocations_1_0", "allocation.ALLOCATION_SCHEMA", ("1.0", "1.7")),
    ("ConsumerAllocations_1_8", "allocation.ALLOCATION_SCHEMA_V1_8", ("1.8", "1.11")),
    ("ConsumerAllocations_1_12", "allocation.ALLOCATION_SCHEMA_V1_12", ("1.12", "1.27")),
    ("ConsumerAllocations_1_28", "allocation.ALLOCATION_SCHEMA_V1_28", ("1.28", "1.33")),
    ("ConsumerAllocations_1_34", "allocation.ALLOCATION_SCHEMA_V1_34", ("1.34", "1.37")),
    ("ConsumerAllocations_1_38", "allocation.ALLOCATION_SCHEMA_V1_38", ("1.38", None)),
    ("ManyAllocations_1_13", "allocation.POST_ALLOCATIONS_V1_13", ("1.13", "1.27")),
    ("ManyAllocations_1_28", "allocation.POST_ALLOCATIONS_V1_28", ("1.28", "1.33")),
    ("ManyAllocations_1_34", "allocation.POST_ALLOCATIONS_V1_34", ("1.34", "1.37")),
    ("ManyAllocations_1_38", "allocation.POST_ALLOCATIONS_V1_38", ("1.38", None)),
    ("Reshape_1_30", "reshaper.POST_RESHAPER_SCHEMA", ("1.30", "1.33")),
    ("Reshape_1_34", "reshaper.POST_RESHAPER_SCHEMA_V1_34", ("1.34", "1.37")),
    ("Reshape_1_38", "reshaper.POST_RESHAPER_SCHEMA_V1_38", ("1.38", None)),
    ("NodeUpdate", "node.PUT_NODE", None),
    ("HardwareUpdate", "node.PUT_HARDWARE", None),
    ("TwinUpdate", "node.PUT_TWIN", None),
    ("TwinsUpdate", "node.POST_TWINS", None),
    ("BuildOutcome", "node.POST_BUILD_OUTCOME", None),
    ("BuildOutcomes", "node.POST_BUILD_OUTCOMES", None),
    ("Heartbeat", "node.POST_HEARTBEAT", None),
    ("BuildRequestCreate", "build_request.POST_BUILD_REQUEST", None),
    ("BuildRequestFinish", "build_request.PUT_BUILD_REQUEST", None),
    ("BuildRequestsFinish", "build_request.PUT_BUILD_REQUESTS", None),
    ("BuildRequestLease", "build_request.PUT_LEASE", None),
    ("BuildRequestInstanceState", "build_request.PUT_INSTANCE_STATE", None),
    ("BuildRequestLeases", "build_request.PUT_LEASES", None),
    ("SchedulingReportPut", "scheduling_report.PUT_REPORT", None),
    ("SchedulingReportsPost", "scheduling_report.POST_REPORTS", None),
    ("ServerGroupCreate", "server_group.POST_SERVER_GROUP", None),
]


def load(dotted):
    """The schema object ``<module>.<NAME>`` of placement.schemas, as plain JSON data."""
    module, name = dotted.rsplit(".", 1)
    obj = getattr(importlib.import_module(f"placement.schemas.{module}"), name)
    return json.loads(json.dumps(obj))


def _referenced(value, known):
    """``value`` with every proper part equal to a known schema replaced by a $ref."""
    if isinstance(value, dict):
        return {k: _ref_or_value(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_ref_or_value(v, known) for v in value]
    return value


def _ref_or_value(value, known):
    for name, schema in known:
        if isinstance(value, dict) and value == schema:
            return {"$ref": f"#/components/schemas/{name}"}
    return _referenced(value, known)


def components():
    """{component name: schema with $refs and its x- annotations}, in SCHEMAS order."""
    known, out = [], {}
    for name, dotted, versions in SCHEMAS:
        schema = load(dotted)
        body = _referenced(schema, known)
        body["x-placement-schema"] = f"placement.schemas.{dotted}"
        if versions is not None:
            low, high = versions
            body["x-openstack"] = {"min-ver": low} | ({"max-ver": high} if high else {})
        out[name] = body
        known.append((name, schema))
    return out


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def render():
    text = yaml.dump(
        components(), Dumper=_Dumper, sort_keys=False, width=96, default_flow_style=None
    )
    return "".join(f"    {line}\n" if line else "\n" for line in text.splitlines())


def rewritten(document):
    head, sep, rest = document.partition(BEGIN)
    _old, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{DOCUMENT}: marker lines not found")
    return head + BEGIN + render() + END + tail


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the document is stale")
    args = parser.parse_args(argv)
    current = DOCUMENT.read_text()
    new = rewritten(current)
    if args.check:
        if new != current:
            print(f"{DOCUMENT.name}: request schemas are stale; run {__spec__.name}")
            return 1
        return 0
    if new != current:
        DOCUMENT.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
