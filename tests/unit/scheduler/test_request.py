import pytest

from scheduler.request import InvalidRequestSpec
from scheduler.request import RequestSpec

AGG = "11111111-2222-3333-4444-555555555555"


def base(**kw):
    spec = {"resources": {"VCPU": 2, "MEMORY_MB": 1024}, "project_id": "p", "user_id": "u"}
    spec.update(kw)
    return spec


def test_valid_spec_builds_the_candidate_query():
    spec = RequestSpec.from_dict(base(
        required=["HW_CPU_X86_AVX2"], forbidden=["CUSTOM_SLOW"], member_of=[[AGG]],
        groups={"_GPU": {"resources": {"VGPU": 1}}}, workload_class="performance",
        num_instances=3))
    assert spec.num_instances == 3 and len(set(spec.instance_uuids)) == 3
    assert spec.is_performance
    assert spec.candidate_query() == [
        ("resources", "MEMORY_MB:1024,VCPU:2"),
        ("required", "HW_CPU_X86_AVX2,!CUSTOM_SLOW"),
        ("member_of", f"in:{AGG}"),
        ("resources_GPU", "VGPU:1"),
    ]
    again = RequestSpec.from_dict(spec.to_dict())
    assert again == spec


@pytest.mark.parametrize("changes, message", [
    ({"resources": {}}, "at least one resource class"),
    ({"resources": {"VCPU": 0}}, "resources.VCPU must be a positive integer"),
    ({"resources": {"vcpu": 1}}, "is not a resource class name"),
    ({"resources": {"VCPU": True}}, "positive integer"),
    ({"workload_class": "batch"}, "workload_class must be one of"),
    ({"project_id": None}, "project_id is required"),
    ({"num_instances": 0}, "num_instances must be an integer"),
    ({"num_instances": 2, "instance_uuids": [AGG]}, "num_instances is 2 but 1"),
    ({"instance_uuids": [AGG, AGG]}, "must not repeat"),
    ({"required": ["A"], "forbidden": ["A"]}, "both required and forbidden"),
    ({"member_of": [["not-a-uuid"]]}, "member_of entries"),
    ({"groups": {"1": {"resources": {"VGPU": 1}}, "2": {"resources": {"VGPU": 1}}}},
     "group_policy is required"),
    ({"colour": "red"}, "unknown keys ['colour']"),
    ({"node_selector": ["a"]}, "node_selector must be an object"),
])
def test_bad_specs_say_what_is_wrong(changes, message):
    with pytest.raises(InvalidRequestSpec) as err:
        RequestSpec.from_dict(base(**changes))
    assert message in str(err.value)


def test_every_problem_is_listed_at_once():
    with pytest.raises(InvalidRequestSpec) as err:
        RequestSpec.from_dict({"resources": {"VCPU": -1}, "workload_class": "x"})
    assert len(err.value.problems) >= 4  # VCPU, workload_class, project_id, user_id


def test_not_an_object():
    with pytest.raises(InvalidRequestSpec, match="JSON object"):
        RequestSpec.from_dict([1])
