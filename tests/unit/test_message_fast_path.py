"""joule.message_fast_path answers as the schemas do, or leaves it to them.

For every message, well-formed or not: the fast path either declines
(None) or builds exactly what the marshmallow schema loads (or dumps), and
it never accepts what the schema refuses. The plain messages the services
send every instance must take the fast path, or its saving is gone.
"""

import copy
import dataclasses
import uuid

import hypothesis
import marshmallow
import pytest
from hypothesis import strategies as st

from joule import message_fast_path as fast
from joule import request_spec as rs

HOST = "31372e26-89b4-431e-81f5-951b1aa4acd2"
OTHER = "7d3b6c1e-0f5a-4b7e-9a55-0c1d2e3f4a5b"
INST = "d8469bc6-5882-5ca3-b65f-3e3c94ae45da"
SPEC_LIMITS = (rs.REQUEST_ID_MAX, rs.ID_MAX, rs.MAX_INSTANCES, rs.MAX_SPEC_LIST)


def _selection(host, claimed):
    return {
        "instance_uuid": INST,
        "host_uuid": host,
        "host_name": "node-1",
        "cell": "cell1",
        "allocation_request": {
            "allocations": {host: {"resources": {"VCPU": 4, "MEMORY_MB": 8192}}},
            "mappings": {"": [host]},
        },
        "claimed": claimed,
        "schedulable_class": "standard",
        "family": "cpu:AMD EPYC 9965",
        "allocation_request_version": "1.36",
    }


SELECTIONS = {
    "version": "1.0",
    "request_id": "req-1",
    "selections": [[_selection(HOST, True), _selection(OTHER, False)]],
}
SPEC = {
    "version": "1.4",
    "request_id": "req-1",
    "project_id": "p",
    "user_id": "u",
    "workload_class": "performance",
    "num_instances": 2,
    "instance_uuids": [INST, OTHER],
    "resources": {"VCPU": 4, "MEMORY_MB": 8192},
    "required": ["HW_CPU_X86_AVX2"],
    "forbidden": ["CUSTOM_SLOW"],
    "consumer_type": "INSTANCE",
}

# Values that break some field's rule, or that the schema accepts in a
# form the fast path leaves to it (an upper-case uuid, a string "true").
ODD_VALUES = [
    None,
    "",
    "x",
    "X\n",
    "a/b",
    "req-1\n",
    HOST.upper(),
    HOST.replace("-", ""),
    "not-a-uuid",
    0,
    -1,
    1,
    True,
    False,
    "true",
    2.5,
    [],
    [HOST],
    [HOST, HOST],
    ["HW_CPU_X86_AVX2"],
    ["lower"],
    {},
    {"VCPU": 0},
    {"VCPU": True},
    {"vcpu": 1},
    {HOST: {"resources": {"VCPU": 1}}},
    {HOST: {}},
    "1.999",
    "2.0",
    "0.9",
    "x" * 300,
]


def _paths(data, prefix=()):
    """Every (path) to a value inside ``data`` (dict keys and list indexes)."""
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _set(data, path, value):
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


_DELETE = object()


def _variants(base):
    paths = list(_paths(base))
    for path in paths:
        for value in [_DELETE, *ODD_VALUES]:
            if value is _DELETE and isinstance(path[-1], int):
                continue
            yield _set(base, path, value)
    yield {**base, "unknown": 1}
    yield _set(base, paths[0], base[paths[0][0]])  # unchanged: the plain message


def _without_random_ids(loaded, data):
    """A spec without a request id gets a random one (and random instance
    uuids when it names none): compare the rest."""
    if not isinstance(loaded, rs.RequestSpec) or data.get("request_id") is not None:
        return loaded
    if data.get("instance_uuids") is None:
        loaded = dataclasses.replace(loaded, instance_uuids=len(loaded.instance_uuids))
    return dataclasses.replace(loaded, request_id=None)


def _schema_load(schema, data):
    try:
        return True, schema.load(copy.deepcopy(data))
    except marshmallow.ValidationError:
        return False, None


@pytest.mark.parametrize(
    ("base", "schema", "fast_load"),
    [
        (
            SELECTIONS,
            rs._SELECTIONS,
            lambda d: fast.load_selections(
                d, rs.Selections, rs.Selection, rs.REQUEST_ID_MAX, rs.ID_MAX
            ),
        ),
        (SPEC, rs._REQUEST_SPEC, lambda d: fast.load_request_spec(d, rs._plain_spec, SPEC_LIMITS)),
    ],
    ids=["selections", "request_spec"],
)
def test_every_variant_is_declined_or_loaded_as_the_schema_loads_it(base, schema, fast_load):
    taken = 0
    for data in _variants(base):
        got = fast_load(copy.deepcopy(data))
        if got is None:
            continue
        taken += 1
        ok, expected = _schema_load(schema, data)
        assert ok, f"the fast path accepted what the schema refuses: {data}"
        assert _without_random_ids(got, data) == _without_random_ids(expected, data), data
    assert taken >= 10  # the plain message and its harmless variants go fast


def test_the_messages_the_services_send_take_the_fast_path():
    assert fast.load_selections(
        SELECTIONS, rs.Selections, rs.Selection, rs.REQUEST_ID_MAX, rs.ID_MAX
    ) == rs._SELECTIONS.load(SELECTIONS)
    spec = rs.load_request_spec(SPEC)
    wire = rs.dump_request_spec(spec)
    assert fast.load_request_spec(wire, rs._plain_spec, SPEC_LIMITS) == spec
    # What build-submit sends: no uuids, so they are derived from the request id.
    plain = {k: v for k, v in SPEC.items() if k != "instance_uuids"}
    assert fast.load_request_spec(plain, rs._plain_spec, SPEC_LIMITS) == rs._REQUEST_SPEC.load(
        plain
    )
    selections = rs.load_selections(SELECTIONS).selections
    assert fast.dump_selections("req-1", selections, rs.SELECTIONS_VERSION) == rs._SELECTIONS.dump(
        rs.Selections("req-1", selections)
    )


_text = st.one_of(st.none(), st.text(max_size=5), st.sampled_from(["cell1", "a.b", "A-1"]))
_uuids = st.sampled_from([HOST, OTHER, HOST.upper(), "x"]) | st.uuids().map(str)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    claimed=st.one_of(st.booleans(), st.integers(0, 2), st.just("true")),
    cell=_text,
    host=_uuids,
    amount=st.one_of(st.integers(-1, 3), st.booleans()),
    rc=st.sampled_from(["VCPU", "vcpu", "CUSTOM_X", ""]),
    version=st.one_of(st.none(), st.sampled_from(["1.0", "1.12", "1.9999", "1.x"])),
    request_id=st.one_of(st.sampled_from(["req-1", "r\n", "-r"]), st.text(max_size=3)),
)
def test_random_selections_agree_with_the_schema(
    claimed, cell, host, amount, rc, version, request_id
):
    one = {
        "instance_uuid": INST,
        "host_uuid": host,
        "cell": cell,
        "allocation_request": {"allocations": {host: {"resources": {rc: amount}}}},
        "claimed": claimed,
        "allocation_request_version": version,
    }
    data = {"version": "1.0", "request_id": request_id, "selections": [[one]]}
    got = fast.load_selections(data, rs.Selections, rs.Selection, rs.REQUEST_ID_MAX, rs.ID_MAX)
    if got is not None:
        ok, expected = _schema_load(rs._SELECTIONS, data)
        assert ok and got == expected


def test_a_spec_without_request_id_or_uuids_gets_fresh_ones_as_the_schema_gives():
    data = {"version": "1.4", "project_id": "p", "user_id": "u", "resources": {"VCPU": 1}}
    spec = rs.load_request_spec(data)
    assert spec.request_id.startswith("req-") and len(spec.instance_uuids) == 1
    uuid.UUID(spec.instance_uuids[0])
    assert spec.workload_class == "standard" and spec.consumer_type == "INSTANCE"
