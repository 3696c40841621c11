"""The wire contract (joule.request_spec): what loads, what is refused and why."""

import json
import pathlib

import marshmallow
import pytest

from joule import request_spec as rs
from tests import specs

AGG = "11111111-2222-3333-4444-555555555555"
INST = "9e1c1f52-5b55-4b2a-8f35-7d9f4e5a1b11"
SAMPLE = pathlib.Path(__file__).parents[2] / "etc" / "scheduler" / "request-specs.sample.jsonl"


base = specs.spec_builder(resources={"VCPU": 2, "MEMORY_MB": 1024}, project_id="p", user_id="u")


def problems_of(data):
    with pytest.raises(rs.InvalidRequestSpec) as err:
        rs.load_request_spec(data)
    return err.value


def test_valid_spec_loads_builds_the_query_and_round_trips():
    spec = rs.load_request_spec(
        base(
            required=["HW_CPU_X86_AVX2"],
            forbidden=["CUSTOM_SLOW"],
            member_of=[[AGG], AGG],
            groups={"_GPU": {"resources": {"VGPU": 1}}},
            workload_class="performance",
            num_instances=3,
        )
    )
    assert spec.num_instances == 3 and len(set(spec.instance_uuids)) == 3
    assert spec.request_id.startswith("req-") and spec.is_performance
    assert spec.candidate_query() == [
        ("resources", "MEMORY_MB:1024,VCPU:2"),
        ("required", "HW_CPU_X86_AVX2,!CUSTOM_SLOW"),
        ("member_of", f"in:{AGG}"),
        ("member_of", f"in:{AGG}"),
        ("resources_GPU", "VGPU:1"),
    ]
    wire = rs.dump_request_spec(spec)
    assert wire["version"] == rs.REQUEST_SPEC_VERSION
    assert json.loads(json.dumps(wire)) == wire  # plain JSON
    assert rs.load_request_spec(wire) == spec


def test_defaults_and_canonical_uuids():
    spec = rs.load_request_spec(base(instance_uuids=[INST.upper().replace("-", "")]))
    assert spec.instance_uuids == (INST,)
    assert (spec.workload_class, spec.consumer_type, spec.cell, spec.group_policy) == (
        "standard",
        "INSTANCE",
        None,
        None,
    )
    assert spec.groups == {} and spec.node_selector == {}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"resources": {}}, "resources: at least one resource class is required"),
        ({"resources": {"VCPU": 0}}, "resources.VCPU: must be a positive integer"),
        ({"resources": {"vcpu": 1}}, "'vcpu' is not a resource class name"),
        ({"resources": {"VCPU": True}}, "resources.VCPU: must be a positive integer"),
        ({"resources": {"VCPU": 1.5}}, "resources.VCPU: must be a positive integer"),
        ({"workload_class": "batch"}, "workload_class: must be one of performance, standard"),
        ({"project_id": None}, "project_id: Field may not be null"),
        ({"num_instances": 0}, "num_instances: must be an integer from 1 to 1000"),
        ({"num_instances": 1001}, "num_instances: must be an integer from 1 to 1000"),
        ({"num_instances": 2, "instance_uuids": [AGG]}, "num_instances: is 2 but 1"),
        ({"instance_uuids": [AGG, AGG]}, "instance_uuids: must not repeat"),
        ({"instance_uuids": []}, "instance_uuids: must list 1 to 1000"),
        ({"required": ["A"], "forbidden": ["A"]}, "traits both required and forbidden"),
        ({"member_of": [["not-a-uuid"]]}, "member_of.0.0: 'not-a-uuid' is not a uuid"),
        ({"member_of": [[]]}, "member_of.0: must name at least one aggregate"),
        (
            {"groups": {"1": {"resources": {"VGPU": 1}}, "2": {"resources": {"VGPU": 1}}}},
            "group_policy: is required with more than one numbered group",
        ),
        ({"groups": {"_G": {"required": ["X"]}}}, "groups._G.resources: a numbered group needs"),
        ({"groups": {"a.b": {"resources": {"VGPU": 1}}}}, "group suffix 'a.b' must be"),
        ({"node_selector": ["a"]}, "node_selector: Not a valid mapping type"),
        ({"node_selector": {"rack": "r\n1"}}, "no control characters"),
        ({"consumer_type": "instance"}, "is not a consumer type"),
    ],
)
def test_bad_specs_say_what_is_wrong(changes, message):
    assert message in str(problems_of(base(**changes)))


def test_every_problem_is_listed_at_once():
    err = problems_of({"version": "1.0", "resources": {"VCPU": -1}, "workload_class": "x"})
    fields = {p.split(":")[0] for p in err.problems}
    assert {"resources.VCPU", "workload_class", "project_id", "user_id"} <= fields


@pytest.mark.parametrize("data", [[1], "spec", None, 3])
def test_not_an_object(data):
    assert str(problems_of(data)) == "invalid request spec: must be a JSON object"


@pytest.mark.parametrize("field", ["colour", "hints"])
def test_unknown_field_is_an_error_not_a_silent_drop(field):
    err = problems_of(base(**{field: {}}))
    assert err.problems == [
        f"{field}: unknown field: this receiver does not know it (this receiver speaks "
        f"request_spec {rs.REQUEST_SPEC_VERSION}, the message says 1.0; a field added in a "
        "later minor version "
        "needs a receiver of that version)"
    ]
    assert "unknown field" in str(
        problems_of(base(groups={"_G": {"resources": {"VGPU": 1}, "colour": 1}}))
    )


@pytest.mark.parametrize("version", ["2.0", "10.3"])
def test_newer_major_is_refused_with_a_clear_message(version):
    err = problems_of(base(version=version, colour="ignored, not reported"))
    assert err.unsupported_version
    assert err.problems == [
        f"version: request_spec {version} is newer than this receiver understands (it "
        f"speaks {rs.REQUEST_SPEC_VERSION}, any 1.x); upgrade the receiver or send a 1.x "
        "message"
    ]


@pytest.mark.parametrize(
    "version, message",
    [
        (None, "version: is required"),
        ("1", "version: must be a string \"MAJOR.MINOR\", got '1'"),
        (1.0, 'version: must be a string "MAJOR.MINOR", got 1.0'),
        ("0.9", "version: request_spec 0.9 is no longer understood"),
    ],
)
def test_missing_or_malformed_version(version, message):
    data = base()
    if version is None:
        del data["version"]
    else:
        data["version"] = version
    err = problems_of(data)
    assert str(err).startswith(f"invalid request spec: {message}")
    assert err.unsupported_version == (version == "0.9")


def test_newer_minor_loads_when_it_uses_no_newer_field():
    spec = rs.load_request_spec(base(version="1.7", request_id="req-minor"))
    assert spec.request_id == "req-minor"


_MINOR = int(rs.REQUEST_SPEC_VERSION.split(".")[1])
NEXT = f"1.{_MINOR + 1}"
AFTER_NEXT = f"1.{_MINOR + 2}"


class _NextMinor(rs.RequestSpecSchema):
    """What the next minor's receiver looks like: one optional field with a default."""

    VERSION = NEXT
    colour_hints = marshmallow.fields.Dict(load_default=dict, metadata={"since": NEXT})

    @marshmallow.post_load
    def _make(self, data, **kwargs):
        hints = data.pop("colour_hints")
        return super()._make(data, **kwargs), hints


def test_older_minor_is_accepted_by_a_newer_receiver_and_newer_field_needs_it():
    (spec, hints) = _NextMinor().load(base(version="1.0", request_id="req-old"))
    assert spec.request_id == "req-old" and hints == {}
    (_spec, hints) = _NextMinor().load(base(version=AFTER_NEXT, colour_hints={"a": "b"}))
    assert hints == {"a": "b"}
    # ...and today's receiver refuses the next minor's field, naming both versions.
    err = problems_of(base(version=NEXT, colour_hints={"a": "b"}))
    assert (
        f"this receiver speaks request_spec {rs.REQUEST_SPEC_VERSION}, the message says {NEXT}"
    ) in str(err)
    # A message that says 1.0 but uses the newer field is refused with the rest.
    with pytest.raises(marshmallow.ValidationError) as err:
        _NextMinor().load(base(version="1.0", colour_hints={}, resources={"VCPU": 0}))
    assert err.value.messages["colour_hints"] == [
        f"is new in request_spec {NEXT}; the message says 1.0 (say {NEXT} or later to use it)"
    ]
    assert "resources" in err.value.messages


def test_server_group_is_new_in_1_1():
    group = "0f0e0d0c-0b0a-4909-8807-060504030201"
    spec = rs.load_request_spec(base(version="1.1", server_group=group.replace("-", "")))
    assert spec.server_group == group
    assert rs.dump_request_spec(spec)["server_group"] == group
    assert rs.load_request_spec(base()).server_group is None
    assert "server_group" not in rs.dump_request_spec(rs.load_request_spec(base()))
    err = problems_of(base(version="1.0", server_group=group))
    assert err.problems == [
        "server_group: is new in request_spec 1.1; the message says 1.0 (say 1.1 or later "
        "to use it)"
    ]
    err = problems_of(base(version="1.1", server_group="group-1"))
    assert err.problems == ["server_group: 'group-1' is not a uuid"]


# The fields of each message at 1.0. A field added later is optional, says
# the minor it came in, and that minor is at most the message's version.
FIELDS_1_0 = {
    rs.RequestSpecSchema: {
        "version",
        "request_id",
        "project_id",
        "user_id",
        "workload_class",
        "num_instances",
        "instance_uuids",
        "resources",
        "required",
        "forbidden",
        "member_of",
        "groups",
        "group_policy",
        "cell",
        "node_selector",
        "consumer_type",
    },
    rs.SelectionsSchema: {"version", "request_id", "selections"},
    rs.BuildResultSchema: {
        "version",
        "instance_uuid",
        "request_id",
        "workload_class",
        "status",
        "host_uuid",
        "host_name",
        "schedulable_class",
        "family",
        "reason",
        "attempts",
        "rescheduled",
    },
}


@pytest.mark.parametrize("schema", list(FIELDS_1_0))
def test_fields_added_after_1_0_follow_the_minor_version_rule(schema):
    instance = schema()
    assert instance.VERSION.startswith("1.")
    assert FIELDS_1_0[schema] <= set(instance.fields), "a 1.0 field is gone: a major change"
    for name, field in instance.fields.items():
        if name in FIELDS_1_0[schema]:
            continue
        since = field.metadata.get("since")
        assert since, f"{name}: a field added after 1.0 says since which minor"
        assert rs._version_tuple(since) <= rs._version_tuple(instance.VERSION), name
        assert not field.required and field.load_default is not marshmallow.missing, (
            f"{name}: a field added in a minor version needs a default"
        )


HOSTILE = [
    "../traits/CUSTOM_X",
    "..",
    ".",
    "a/b",
    "a?b",
    "a#b",
    "a%2Fb",
    "a b",
    "a\tb",
    "a\nb",
    "a\x00b",
    "\x7f",
    "",
    "-lead",
    "x" * 300,
    "caf\u00e9",
    "a;b",
    "a\\b",
]


@pytest.mark.parametrize("field", ["request_id", "project_id", "user_id", "cell"])
@pytest.mark.parametrize("value", HOSTILE)
def test_ids_that_end_up_in_paths_are_strict(field, value):
    err = problems_of(base(**{field: value}))
    assert any(p.startswith(f"{field}:") for p in err.problems), err.problems


@pytest.mark.parametrize(
    "value",
    HOSTILE + ["11111111-2222-3333-4444-55555555555/", "{11111111-2222-3333-4444-555555555555}"],
)
def test_instance_uuids_are_strict(value):
    err = problems_of(base(instance_uuids=[value]))
    assert err.problems[0].startswith("instance_uuids.0:")


@pytest.mark.parametrize(
    "value", ["req-1", "req-9e1c1f52-5b55-4b2a-8f35-7d9f4e5a1b11", "a", "A.b_c-9", "x" * 64]
)
def test_good_request_ids(value):
    assert rs.load_request_spec(base(request_id=value)).request_id == value
    assert rs.is_safe_id(value, rs.REQUEST_ID_MAX)


def test_request_id_longer_than_placement_stores_is_refused():
    assert "request_id: must be a request id of 1-64" in str(problems_of(base(request_id="x" * 65)))


def _selection(**kw):
    sel = rs.Selection(
        INST,
        AGG,
        "h1",
        "cell1",
        {"allocations": {AGG: {"resources": {"VCPU": 2}}}, "mappings": {"": [AGG]}},
        True,
        "performance",
        "epyc",
        "1.39",
    )
    for k, v in kw.items():
        setattr(sel, k, v)
    return sel


def test_selections_round_trip_and_carry_what_a_later_claim_needs():
    alt = _selection(claimed=False, host_name="h2")
    wire = rs.dump_selections("req-1", [[_selection(), alt]])
    assert wire["version"] == rs.SELECTIONS_VERSION
    assert wire["selections"][0][1]["allocation_request"] == alt.allocation_request
    back = rs.load_selections(json.loads(json.dumps(wire)))
    assert back.request_id == "req-1" and back.selections == [[_selection(), alt]]


def test_bad_selections_are_refused():
    wire = rs.dump_selections("req-1", [[_selection()]])
    wire["selections"][0][0]["allocation_request"]["allocations"] = {"../x": {}}
    with pytest.raises(
        rs.InvalidMessage,
        match=r"invalid selections: selections\.0\.0\."
        r"allocation_request\.allocations\.\.\./x: '\.\./x' is not a uuid",
    ):
        rs.load_selections(wire)
    wire = rs.dump_selections("req-1", [[]])
    with pytest.raises(rs.InvalidMessage, match="each instance needs a selected host"):
        rs.load_selections(wire)
    with pytest.raises(rs.InvalidMessage, match="selections 2.0 is newer") as err:
        rs.load_selections({"version": "2.0"})
    assert err.value.unsupported_version


def test_build_result_round_trip_and_refusals():
    res = rs.BuildResult(
        INST,
        "req-1",
        "standard",
        "placed",
        host_uuid=AGG,
        host_name="h1",
        attempts=2,
        rescheduled=1,
    )
    wire = rs.dump_build_result(res)
    assert wire["version"] == rs.BUILD_RESULT_VERSION and wire["rescheduled"] == 1
    assert rs.load_build_result(wire) == res
    with pytest.raises(rs.InvalidMessage, match="status: Must be one of"):
        rs.load_build_result({**wire, "status": "maybe"})
    with pytest.raises(rs.InvalidMessage, match="colour: unknown field"):
        rs.load_build_result({**wire, "colour": 1})


def test_the_sample_file_loads_line_by_line():
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()]
    assert len(lines) >= 3
    specs = [rs.load_request_spec(json.loads(line)) for line in lines]
    assert {s.workload_class for s in specs} == {"performance", "standard"}
    assert any(s.groups for s in specs) and any(s.node_selector for s in specs)


def test_documentation_lists_every_request_spec_field():
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    section = doc.split("### The request spec", 1)[1].split("\n## ", 1)[0]
    for name in rs.RequestSpecSchema().fields:
        assert f"| `{name}` |" in section, name


def test_canonical_specs_of_one_request_match_loading_each_alone():
    import uuid as uuid_lib

    uuids = [str(uuid_lib.uuid4()) for _ in range(5)]
    items = [base(request_id="req-bulk", instance_uuids=[u.upper()]) for u in uuids]
    items.append(base(request_id="req-other", instance_uuids=[uuids[0]], cell="c1"))
    got = list(rs.canonical_request_specs(items))
    for (spec, wire), data in zip(got, items, strict=True):
        alone = rs.load_request_spec(data)
        assert spec == alone and wire == rs.dump_request_spec(alone)
    assert [s.instance_uuids for s, _ in got[:5]] == [(u,) for u in uuids]


@pytest.mark.parametrize(
    "bad_uuids, message",
    [
        (["../x"], "instance_uuids.0: '../x' is not a uuid"),
        ([INST, INST], "instance_uuids: must not repeat"),
        ([], "instance_uuids: must list 1 to 1000"),
        ([7], "instance_uuids.0: Not a valid string"),
    ],
)
def test_canonical_specs_refuse_what_a_single_load_refuses(bad_uuids, message):
    items = [
        base(request_id="req-bulk", instance_uuids=[AGG]),
        base(request_id="req-bulk", instance_uuids=bad_uuids),
    ]
    specs = rs.canonical_request_specs(items)
    next(specs)
    with pytest.raises(rs.InvalidRequestSpec, match=message):
        next(specs)


def test_instance_uuids_derive_from_the_request_id_so_a_resubmission_names_the_same():
    first = rs.load_request_spec(base(request_id="req-stream-7", num_instances=3))
    again = rs.load_request_spec(base(request_id="req-stream-7", num_instances=3))
    other = rs.load_request_spec(base(request_id="req-stream-8", num_instances=3))
    assert first.instance_uuids == again.instance_uuids
    assert len(set(first.instance_uuids)) == 3
    assert set(first.instance_uuids).isdisjoint(other.instance_uuids)
    # Dumped (as build requests record it) they stay what they were.
    assert rs.load_request_spec(rs.dump_request_spec(first)).instance_uuids == first.instance_uuids
    # Without a request id nothing can recognise a resubmission: fresh ones.
    assert (
        rs.load_request_spec(base(num_instances=2)).instance_uuids
        != rs.load_request_spec(base(num_instances=2)).instance_uuids
    )


# -- workload (1.4) ---------------------------------------------------------------


def _workload_spec(workload, version="1.4"):
    return specs.request_spec(version=version, workload=workload)


def test_a_workload_loads_and_dumps_back_the_same():
    workload = {"command": ["sleep", "30"], "env": {"MODE": "batch"}, "cwd": "/tmp"}
    spec = rs.load_request_spec(_workload_spec(workload))
    assert spec.workload == rs.Workload(("sleep", "30"), {"MODE": "batch"}, "/tmp")
    assert rs.dump_request_spec(spec)["workload"] == workload
    assert spec.workload.to_agent() == workload
    # A spec without one dumps without one (an older receiver takes it).
    plain = rs.load_request_spec(specs.request_spec())
    assert plain.workload is None and "workload" not in rs.dump_request_spec(plain)


def test_a_workload_in_a_message_older_than_1_4_is_refused():
    with pytest.raises(rs.InvalidRequestSpec, match="new in request_spec 1.4"):
        rs.load_request_spec(_workload_spec({"command": ["true"]}, version="1.3"))


@pytest.mark.parametrize(
    "workload, problem",
    [
        ({}, "Missing data for required field"),
        ({"command": []}, "must list 1 to 256 arguments"),
        ({"command": "sleep 30"}, "Not a valid list"),
        ({"command": ["a\0b"]}, "must not hold a NUL"),
        ({"command": ["x" * 5000]}, "at most 4096 characters"),
        ({"command": ["true"], "env": {"1BAD": "x"}}, "must match"),
        ({"command": ["true"], "cwd": "relative/dir"}, "must be an absolute path"),
        ({"command": ["true"], "shell": True}, "workload.shell: unknown field"),
    ],
)
def test_a_bad_workload_is_refused_with_its_reason(workload, problem):
    with pytest.raises(rs.InvalidRequestSpec, match=problem):
        rs.load_request_spec(_workload_spec(workload))
