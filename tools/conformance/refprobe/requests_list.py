"""The probe's request sequence: (method, path, microversion, body, extra headers).

Stateful (later requests see earlier writes) with fixed UUIDs, so both apps
walk the same states. Version lists sit on each feature's boundary (the
microversion history in upstream's rest_api_version_history.rst).
"""

# ruff: noqa: E501 (request bodies read best on one line)
RP1 = "11111111-1111-4111-8111-111111111111"
RP2 = "22222222-2222-4222-8222-222222222222"
RP3 = "33333333-3333-4333-8333-333333333333"
SH = "44444444-4444-4444-8444-444444444444"
AGG1 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
AGG2 = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
C1 = "c1c1c1c1-c1c1-4c1c-8c1c-c1c1c1c1c1c1"
C2 = "c2c2c2c2-c2c2-4c2c-8c2c-c2c2c2c2c2c2"
C3 = "c3c3c3c3-c3c3-4c3c-8c3c-c3c3c3c3c3c3"
P1 = "99999999-9999-4999-8999-999999999999"
U1 = "88888888-8888-4888-8888-888888888888"
R = []


def r(m, p, v="latest", b=None, h=None):
    R.append((m, p, v, b, h or {}))


# root & microversions
for v in (None, "1.0", "latest", "1.39", "1.40", "0.9", "1.x", "2.0"):
    r("GET", "/", v)
r("GET", "/resource_providers", "1.0", h={"accept": "text/plain"})
r("GET", "/nope")
r("PATCH", "/resource_providers")
r("POST", "/traits")
r("GET", "/resource_providers", None)
# providers
r("POST", "/resource_providers", "1.0", {"name": "rp1", "uuid": RP1})
r("POST", "/resource_providers", "1.19", {"name": "rp2", "uuid": RP2})
r("POST", "/resource_providers", "1.20", {"name": "sh", "uuid": SH})
r("POST", "/resource_providers", "1.20", {"name": "rp1"})
r("POST", "/resource_providers", "1.20", {"name": "rpx", "uuid": RP1})
r("POST", "/resource_providers", "1.13", {"name": "c", "parent_provider_uuid": RP1})
r("POST", "/resource_providers", "1.14", {"name": "rp3", "uuid": RP3, "parent_provider_uuid": RP1})
r("POST", "/resource_providers", "1.14", {"name": "orphan", "parent_provider_uuid": C1})
r("POST", "/resource_providers", "1.20", {"name": ""})
r("POST", "/resource_providers", "1.20", {"name": "x" * 201})
r("POST", "/resource_providers", "1.20", {"uuid": RP1})
r("POST", "/resource_providers", "1.20", {"name": "bad", "uuid": "not-a-uuid"})
r("POST", "/resource_providers", "1.20", {"name": "bad", "extra": 1})
r("POST", "/resource_providers", "1.20", "not json", {"content-type": "application/json"})
r("POST", "/resource_providers", "1.20", "{}", {"content-type": "text/plain"})
for v in ("1.0", "1.13", "1.14", "1.15", "1.11", "1.10"):
    r("GET", f"/resource_providers/{RP1}", v)
r("GET", "/resource_providers/notauuid")
r("GET", f"/resource_providers/{C1}")
r("PUT", f"/resource_providers/{RP2}", "1.0", {"name": "rp2b"})
r("PUT", f"/resource_providers/{RP2}", "1.0", {"name": "rp1"})
r("PUT", f"/resource_providers/{RP2}", "1.14", {"name": "rp2", "parent_provider_uuid": RP1})
r("PUT", f"/resource_providers/{RP3}", "1.14", {"name": "rp3", "parent_provider_uuid": None})
r("PUT", f"/resource_providers/{RP3}", "1.14", {"name": "rp3", "parent_provider_uuid": RP2})
r("PUT", f"/resource_providers/{RP3}", "1.37", {"name": "rp3", "parent_provider_uuid": RP2})
r("PUT", f"/resource_providers/{RP3}", "1.37", {"name": "rp3", "parent_provider_uuid": RP1})
r("PUT", f"/resource_providers/{RP1}", "1.37", {"name": "rp1", "parent_provider_uuid": RP3})
r("PUT", f"/resource_providers/{RP1}", "1.37", {"name": "rp1", "parent_provider_uuid": RP1})
r("PUT", f"/resource_providers/{C1}", "1.37", {"name": "zz"})
r("PUT", f"/resource_providers/{RP1}", "1.37", {})
r("DELETE", f"/resource_providers/{RP1}")
for q in (
    "",
    "?name=rp1",
    f"?uuid={RP1}",
    "?uuid=bad",
    f"?in_tree={RP1}",
    f"?in_tree={C1}",
    "?resources=VCPU:1",
    "?resources=FOO:1",
    "?resources=VCPU",
    "?required=HW_CPU_X86_AVX",
    "?required=!HW_CPU_X86_AVX",
    "?required=in:HW_CPU_X86_AVX,HW_CPU_X86_SSE",
    f"?member_of={AGG1}",
    f"?member_of=in:{AGG1},{AGG2}",
    f"?member_of=!{AGG1}",
    "?member_of=bad",
    "?foo=bar",
    "?name=",
):
    for v in (
        "1.0",
        "1.3",
        "1.4",
        "1.13",
        "1.14",
        "1.17",
        "1.18",
        "1.21",
        "1.22",
        "1.24",
        "1.32",
        "1.38",
        "1.39",
    ):
        r("GET", "/resource_providers" + q, v)
# resource classes
for v in ("1.1", "1.2", "1.6", "1.7", "1.15"):
    r("GET", "/resource_classes", v)
    r("GET", "/resource_classes/VCPU", v)
r("POST", "/resource_classes", "1.2", {"name": "CUSTOM_GOLD"})
r("POST", "/resource_classes", "1.2", {"name": "CUSTOM_GOLD"})
r("POST", "/resource_classes", "1.2", {"name": "GOLD"})
r("POST", "/resource_classes", "1.2", {"name": "CUSTOM_gold"})
r("PUT", "/resource_classes/CUSTOM_GOLD", "1.2", {"name": "CUSTOM_SILVER"})
r("PUT", "/resource_classes/CUSTOM_SILVER", "1.2", {"name": "CUSTOM_GOLD"})
r("PUT", "/resource_classes/VCPU", "1.2", {"name": "CUSTOM_X"})
r("PUT", "/resource_classes/CUSTOM_BRONZE", "1.6", {"name": "CUSTOM_BRONZE"})
r("PUT", "/resource_classes/CUSTOM_BRONZE", "1.7")
r("PUT", "/resource_classes/CUSTOM_BRONZE", "1.7")
r("PUT", "/resource_classes/CUSTOM_BRONZE", "1.7", {"name": "CUSTOM_BRONZE"})
r("PUT", "/resource_classes/VCPU", "1.7")
r("PUT", "/resource_classes/BRONZE", "1.7")
r("GET", "/resource_classes/CUSTOM_NOPE", "1.2")
r("GET", "/resource_classes/CUSTOM_GOLD", "1.15")
r("DELETE", "/resource_classes/VCPU", "1.2")
r("DELETE", "/resource_classes/CUSTOM_NOPE", "1.2")
# inventories
r("GET", f"/resource_providers/{RP1}/inventories", "1.0")
r("PUT", f"/resource_providers/{RP1}/inventories", "1.0", {"inventories": {"VCPU": {"total": 8}}})
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.0",
    {"resource_provider_generation": 99, "inventories": {"VCPU": {"total": 8}}},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.0",
    {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024, "reserved": 1024}},
    },
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024, "reserved": 1024}},
    },
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {
        "resource_provider_generation": 0,
        "inventories": {
            "VCPU": {"total": 8, "max_unit": 4},
            "MEMORY_MB": {"total": 1024, "min_unit": 2, "max_unit": 1},
        },
    },
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 0}}},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {"resource_provider_generation": 0, "inventories": {"NOPE": {"total": 1}}},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {"resource_provider_generation": 0, "inventories": {"CUSTOM_NOPE": {"total": 1}}},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8, "allocation_ratio": 0}},
    },
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8, "step_size": 0}}},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8, "reserved": 9}}},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories",
    "1.26",
    {
        "resource_provider_generation": 0,
        "inventories": {
            "VCPU": {"total": 16, "allocation_ratio": 2.0},
            "MEMORY_MB": {"total": 4096},
            "DISK_GB": {"total": 100},
        },
    },
)
r(
    "PUT",
    f"/resource_providers/{SH}/inventories",
    "1.26",
    {"resource_provider_generation": 0, "inventories": {"DISK_GB": {"total": 1000}}},
)
r(
    "PUT",
    f"/resource_providers/{RP3}/inventories",
    "1.26",
    {
        "resource_provider_generation": 1,
        "inventories": {"VCPU": {"total": 4}, "CUSTOM_GOLD": {"total": 2}},
    },
)
for v in ("1.0", "1.15"):
    r("GET", f"/resource_providers/{RP1}/inventories", v)
    r("GET", f"/resource_providers/{RP1}/inventories/VCPU", v)
r("GET", f"/resource_providers/{RP1}/inventories/CUSTOM_GOLD")
r("GET", f"/resource_providers/{RP1}/inventories/NOPE")
r("GET", f"/resource_providers/{C1}/inventories")
r("POST", f"/resource_providers/{RP1}/inventories", "1.0", {"resource_class": "VCPU", "total": 3})
r(
    "POST",
    f"/resource_providers/{RP1}/inventories",
    "1.0",
    {"resource_class": "CUSTOM_GOLD", "total": 3},
)
r(
    "POST",
    f"/resource_providers/{RP1}/inventories",
    "1.0",
    {"resource_class": "CUSTOM_NOPE", "total": 3},
)
r("POST", f"/resource_providers/{RP1}/inventories", "1.0", {"total": 3})
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories/CUSTOM_GOLD",
    "1.0",
    {"resource_provider_generation": 2, "total": 5},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories/CUSTOM_GOLD",
    "1.0",
    {"resource_provider_generation": 0, "total": 5},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories/CUSTOM_SILVER",
    "1.0",
    {"resource_provider_generation": 2, "total": 5},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/inventories/CUSTOM_GOLD",
    "1.0",
    {"resource_provider_generation": 2, "total": 5, "resource_class": "CUSTOM_GOLD"},
)
r("DELETE", f"/resource_providers/{RP1}/inventories/CUSTOM_GOLD", "1.0")
r("DELETE", f"/resource_providers/{RP1}/inventories/CUSTOM_GOLD", "1.0")
r("DELETE", f"/resource_providers/{RP2}/inventories", "1.4")
r("DELETE", f"/resource_providers/{RP2}/inventories", "1.5")
r("DELETE", "/resource_classes/CUSTOM_GOLD", "1.2")
# traits
r("GET", "/traits", "1.5")
for v in ("1.6", "1.15"):
    r("GET", "/traits?name=startswith:CUSTOM", v)
r("GET", "/traits?name=in:HW_CPU_X86_AVX,CUSTOM_NOPE")
r("GET", "/traits?name=bad")
r("GET", "/traits?associated=maybe")
r("GET", "/traits?associated=true")
r("PUT", "/traits/CUSTOM_FAST", "1.6")
r("PUT", "/traits/CUSTOM_FAST", "1.6")
r("PUT", "/traits/FAST", "1.6")
r("PUT", "/traits/HW_CPU_X86_AVX", "1.6")
r("GET", "/traits/CUSTOM_FAST", "1.6")
r("GET", "/traits/CUSTOM_FAST", "1.15")
r("GET", "/traits/CUSTOM_NOPE", "1.6")
r("DELETE", "/traits/HW_CPU_X86_AVX", "1.6")
r("DELETE", "/traits/CUSTOM_NOPE", "1.6")
r("GET", f"/resource_providers/{RP1}/traits", "1.5")
r("GET", f"/resource_providers/{RP1}/traits", "1.6")
r("PUT", f"/resource_providers/{RP1}/traits", "1.6", {"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX"]})
r(
    "PUT",
    f"/resource_providers/{RP1}/traits",
    "1.6",
    {"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX"], "resource_provider_generation": 0},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/traits",
    "1.6",
    {"traits": ["CUSTOM_NOPE"], "resource_provider_generation": 2},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/traits",
    "1.6",
    {"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX"], "resource_provider_generation": 2},
)
r(
    "PUT",
    f"/resource_providers/{RP3}/traits",
    "1.6",
    {"traits": ["HW_CPU_X86_SSE"], "resource_provider_generation": 2},
)
r("GET", f"/resource_providers/{RP1}/traits", "1.15")
r("GET", f"/resource_providers/{C1}/traits", "1.6")
r("DELETE", "/traits/CUSTOM_FAST", "1.6")
r("GET", "/traits?associated=true&name=startswith:CUSTOM")
r("GET", "/traits?associated=false&name=startswith:CUSTOM")
# aggregates
for v in ("1.0", "1.1", "1.15", "1.19"):
    r("GET", f"/resource_providers/{RP1}/aggregates", v)
r("PUT", f"/resource_providers/{RP1}/aggregates", "1.1", [AGG1])
r("PUT", f"/resource_providers/{RP1}/aggregates", "1.1", ["bad"])
r("PUT", f"/resource_providers/{RP1}/aggregates", "1.1", [AGG1, AGG1])
r("PUT", f"/resource_providers/{RP1}/aggregates", "1.19", [AGG1])
r("PUT", f"/resource_providers/{RP1}/aggregates", "1.19", {"aggregates": [AGG1, AGG2]})
r(
    "PUT",
    f"/resource_providers/{RP1}/aggregates",
    "1.19",
    {"aggregates": [AGG1, AGG2], "resource_provider_generation": 0},
)
r(
    "PUT",
    f"/resource_providers/{RP1}/aggregates",
    "1.19",
    {"aggregates": [AGG1, AGG2], "resource_provider_generation": 3},
)
r(
    "PUT",
    f"/resource_providers/{SH}/aggregates",
    "1.19",
    {"aggregates": [AGG1], "resource_provider_generation": 1},
)
r(
    "PUT",
    f"/resource_providers/{SH}/traits",
    "1.6",
    {"traits": ["MISC_SHARES_VIA_AGGREGATE"], "resource_provider_generation": 2},
)
r("GET", f"/resource_providers/{C1}/aggregates", "1.1")
for q in (
    f"?member_of={AGG1}",
    f"?member_of=in:{AGG1},{AGG2}",
    f"?member_of=!{AGG2}",
    f"?member_of=!in:{AGG2}",
    f"?member_of={AGG1}&member_of={AGG2}",
    "?required=CUSTOM_FAST",
    "?required=!CUSTOM_FAST,HW_CPU_X86_SSE",
    "?required=in:CUSTOM_FAST,HW_CPU_X86_SSE",
    "?resources=VCPU:4,DISK_GB:10",
    "?resources=VCPU:100",
    f"?in_tree={RP3}",
):
    for v in ("1.3", "1.4", "1.14", "1.18", "1.22", "1.24", "1.32", "1.39"):
        r("GET", "/resource_providers" + q, v)
# allocations
r(
    "PUT",
    f"/allocations/{C1}",
    "1.0",
    {
        "allocations": [
            {"resource_provider": {"uuid": RP1}, "resources": {"VCPU": 2, "MEMORY_MB": 512}}
        ]
    },
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.7",
    {
        "allocations": [{"resource_provider": {"uuid": RP1}, "resources": {"VCPU": 2}}],
        "project_id": P1,
        "user_id": U1,
    },
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.8",
    {"allocations": [{"resource_provider": {"uuid": RP1}, "resources": {"VCPU": 2}}]},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.11",
    {"allocations": {RP1: {"resources": {"VCPU": 2}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {"allocations": {RP1: {"resources": {"VCPU": 2}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {
        "allocations": {RP1: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
        "project_id": P1,
        "user_id": U1,
    },
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {"allocations": {RP1: {"resources": {"VCPU": 200}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {"allocations": {RP1: {"resources": {"VCPU": 0}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {"allocations": {RP1: {"resources": {"CUSTOM_NOPE": 1}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {"allocations": {C2: {"resources": {"VCPU": 1}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.12",
    {"allocations": {RP2: {"resources": {"VCPU": 1}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.28",
    {"allocations": {RP1: {"resources": {"VCPU": 2}}}, "project_id": P1, "user_id": U1},
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.28",
    {
        "allocations": {RP1: {"resources": {"VCPU": 2}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
    },
)
r(
    "PUT",
    f"/allocations/{C1}",
    "1.28",
    {
        "allocations": {RP1: {"resources": {"VCPU": 2}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": 1,
    },
)
r(
    "PUT",
    f"/allocations/{C2}",
    "1.28",
    {
        "allocations": {RP1: {"resources": {"VCPU": 1}}, SH: {"resources": {"DISK_GB": 10}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.38",
    {
        "allocations": {RP3: {"resources": {"VCPU": 1}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.38",
    {
        "allocations": {RP3: {"resources": {"VCPU": 1}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
        "consumer_type": "MIGRATION",
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.38",
    {
        "allocations": {RP3: {"resources": {"VCPU": 1}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
        "consumer_type": "bad type",
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.37",
    {
        "allocations": {RP3: {"resources": {"VCPU": 1}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
        "consumer_type": "MIGRATION",
    },
)
for v in ("1.0", "1.11", "1.12", "1.17", "1.28", "1.38"):
    r("GET", f"/allocations/{C1}", v)
    r("GET", f"/allocations/{C3}", v)
    r("GET", f"/resource_providers/{RP1}/allocations", v)
r("GET", f"/allocations/{P1}")
r("GET", "/allocations/bad")
r("GET", f"/resource_providers/{C1}/allocations")
r("POST", "/allocations", "1.12", {})
r(
    "POST",
    "/allocations",
    "1.13",
    {C2: {"allocations": {RP1: {"resources": {"VCPU": 1}}}, "project_id": P1, "user_id": U1}},
)
r(
    "POST",
    "/allocations",
    "1.28",
    {
        C2: {
            "allocations": {RP1: {"resources": {"VCPU": 1}}},
            "project_id": P1,
            "user_id": U1,
            "consumer_generation": 0,
        }
    },
)
r(
    "POST",
    "/allocations",
    "1.28",
    {
        C2: {
            "allocations": {RP1: {"resources": {"VCPU": 1}}},
            "project_id": P1,
            "user_id": U1,
            "consumer_generation": 1,
        }
    },
)
r(
    "POST",
    "/allocations",
    "1.38",
    {
        C2: {
            "allocations": {RP1: {"resources": {"VCPU": 1}}},
            "project_id": P1,
            "user_id": U1,
            "consumer_generation": 2,
            "consumer_type": "INSTANCE",
        }
    },
)
r(
    "POST",
    "/allocations",
    "1.38",
    {
        "bad": {
            "allocations": {},
            "project_id": P1,
            "user_id": U1,
            "consumer_generation": 2,
            "consumer_type": "INSTANCE",
        }
    },
)
r("GET", f"/allocations/{C2}", "1.38")
# usages
for v in ("1.0", "1.8", "1.9", "1.15", "1.38"):
    r("GET", f"/resource_providers/{RP1}/usages", v)
    r("GET", f"/usages?project_id={P1}", v)
r("GET", f"/usages?project_id={P1}&user_id={U1}", "1.9")
r("GET", f"/usages?project_id={P1}&consumer_type=MIGRATION", "1.38")
r("GET", f"/usages?project_id={P1}&consumer_type=all", "1.38")
r("GET", f"/usages?project_id={P1}&consumer_type=unknown", "1.38")
r("GET", f"/usages?project_id={P1}&consumer_type=MIGRATION", "1.37")
r("GET", "/usages", "1.9")
r("GET", f"/usages?user_id={U1}", "1.9")
r("GET", f"/resource_providers/{C1}/usages")
# allocation candidates
for q in (
    "?resources=VCPU:1",
    "?resources=VCPU:1,DISK_GB:10",
    "?resources=VCPU:1&limit=1",
    "?resources=VCPU:1&required=CUSTOM_FAST",
    "?resources=VCPU:1&required=!CUSTOM_FAST",
    f"?resources=VCPU:1&member_of={AGG1}",
    "?resources1=VCPU:1&resources2=MEMORY_MB:10&group_policy=isolate",
    "?resources1=VCPU:1&resources2=VCPU:1",
    "?resources_A=VCPU:1&group_policy=none",
    f"?resources=VCPU:1&in_tree={RP1}",
    "?resources=VCPU:1&root_required=CUSTOM_FAST",
    "?resources1=VCPU:1&resources2=VCPU:1&group_policy=none&same_subtree=1,2",
    "?resources=VCPU:1&required=in:CUSTOM_FAST,HW_CPU_X86_SSE",
    "?resources=NOPE:1",
    "?resources=VCPU:0",
    "",
    "?limit=1",
    "?resources=VCPU:1&limit=0",
    "?resources=VCPU:1&foo=1",
    "?resources=CUSTOM_GOLD:1",
):
    for v in (
        "1.9",
        "1.10",
        "1.12",
        "1.16",
        "1.17",
        "1.21",
        "1.22",
        "1.24",
        "1.25",
        "1.27",
        "1.29",
        "1.31",
        "1.33",
        "1.34",
        "1.35",
        "1.36",
        "1.39",
    ):
        r("GET", "/allocation_candidates" + q, v)
# reshaper
r("POST", "/reshaper", "1.29", {})
r("POST", "/reshaper", "1.30", {})
r(
    "POST",
    "/reshaper",
    "1.30",
    {
        "inventories": {
            RP2: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
        },
        "allocations": {},
    },
)
r("GET", f"/resource_providers/{RP2}", "1.30")
# deletes
r("DELETE", f"/allocations/{C1}")
r("DELETE", f"/allocations/{C1}")
r("DELETE", f"/resource_providers/{RP3}/inventories", "1.5")
r("DELETE", f"/allocations/{C3}")
r("DELETE", f"/resource_providers/{RP3}/inventories", "1.5")
r("DELETE", f"/resource_providers/{RP1}")
r("DELETE", f"/resource_providers/{C1}")
r("DELETE", f"/resource_providers/{RP3}")
r("DELETE", f"/resource_providers/{RP3}")

# second pass: flows with correct generations (fresh providers)
A = "a1a1a1a1-0000-4000-8000-000000000001"
B = "a1a1a1a1-0000-4000-8000-000000000002"
r("POST", "/resource_providers", "1.20", {"name": "A", "uuid": A})
r("POST", "/resource_providers", "1.20", {"name": "B", "uuid": B, "parent_provider_uuid": A})
r("PUT", f"/resource_providers/{A}", "1.20", {"name": ""})
r("GET", "/resource_providers?name=", "1.20")
r("PUT", f"/resource_providers/{A}", "1.20", {"name": "A"})
r(
    "PUT",
    f"/resource_providers/{A}/inventories",
    "1.20",
    {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 2048}},
    },
)
r(
    "PUT",
    f"/resource_providers/{B}/inventories",
    "1.20",
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}},
)
r(
    "PUT",
    f"/resource_providers/{A}/traits",
    "1.20",
    {"traits": ["HW_CPU_X86_SSE", "CUSTOM_NOPE2"], "resource_provider_generation": 1},
)
r("PUT", "/traits/CUSTOM_T1", "1.6")
r(
    "PUT",
    f"/resource_providers/{A}/traits",
    "1.20",
    {"traits": ["HW_CPU_X86_SSE", "CUSTOM_T1"], "resource_provider_generation": 1},
)
r(
    "PUT",
    f"/resource_providers/{A}/traits",
    "1.20",
    {"traits": ["HW_CPU_X86_SSE", "CUSTOM_T1"], "resource_provider_generation": 2},
)
r("DELETE", "/traits/CUSTOM_T1", "1.6")
r("PUT", f"/resource_providers/{A}/aggregates", "1.1", [AGG2])
r("GET", f"/resource_providers/{A}", "1.20")
r(
    "PUT",
    f"/resource_providers/{A}/aggregates",
    "1.19",
    {"aggregates": [AGG1], "resource_provider_generation": 2},
)
r("GET", f"/resource_providers/{A}/aggregates", "1.18")
r("GET", f"/resource_providers/{A}/aggregates", "1.19")
for q in (
    "?required=!CUSTOM_GONE,HW_CPU_X86_SSE",
    "?required=CUSTOM_GONE",
    "?required=!CUSTOM_GONE",
    f"?member_of={AGG1}",
    f"?member_of=!{AGG1}",
    "?required=CUSTOM_T1,HW_CPU_X86_SSE",
    "?required=in:CUSTOM_T1,HW_CPU_X86_AVX",
    "?resources=VCPU:8",
    "?resources=VCPU:9",
    "?resources=CUSTOM_GONE:1",
):
    for v in ("1.18", "1.22", "1.32", "1.39"):
        r("GET", "/resource_providers" + q, v)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.28",
    {
        "allocations": {A: {"resources": {"VCPU": 2}}, B: {"resources": {"VCPU": 1}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.28",
    {
        "allocations": {A: {"resources": {"VCPU": 2}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": None,
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.28",
    {
        "allocations": {A: {"resources": {"VCPU": 3}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": 1,
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.28",
    {
        "allocations": {A: {"resources": {"VCPU": 3}}},
        "project_id": P1,
        "user_id": U1,
        "consumer_generation": 5,
    },
)
r(
    "PUT",
    f"/allocations/{C3}",
    "1.12",
    {"allocations": {A: {"resources": {"VCPU": 3}}}, "project_id": P1, "user_id": U1},
)
for v in ("1.0", "1.12", "1.28", "1.38"):
    r("GET", f"/allocations/{C3}", v)
    r("GET", f"/resource_providers/{A}/allocations", v)
    r("GET", f"/resource_providers/{A}/usages", v)
    r("GET", f"/usages?project_id={P1}", v)
for q in (
    "?resources=VCPU:1",
    "?resources=VCPU:1,MEMORY_MB:100",
    "?resources1=VCPU:1&resources2=VCPU:1&group_policy=none",
    "?resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
    "?resources=VCPU:1&required=CUSTOM_GONE",
    f"?resources=VCPU:1&in_tree={B}",
    "?resources=VCPU:1&root_required=HW_CPU_X86_SSE",
    "?resources=VCPU:1&root_required=!HW_CPU_X86_SSE",
    f"?resources=VCPU:1&member_of={AGG1}",
    "?resources_X=VCPU:1&required_X=HW_CPU_X86_SSE&group_policy=none",
    "?resources1=VCPU:1&resources2=VCPU:1&group_policy=none&same_subtree=1,2",
    "?resources=VCPU:1&limit=1",
    "?resources=VCPU:5",
):
    for v in (
        "1.10",
        "1.17",
        "1.21",
        "1.25",
        "1.29",
        "1.31",
        "1.33",
        "1.34",
        "1.35",
        "1.36",
        "1.39",
    ):
        r("GET", "/allocation_candidates" + q, v)
r(
    "POST",
    "/reshaper",
    "1.30",
    {
        "inventories": {A: {"resource_provider_generation": 99, "inventories": {}}},
        "allocations": {},
    },
)
r(
    "POST",
    "/reshaper",
    "1.38",
    {
        "inventories": {},
        "allocations": {
            C3: {
                "allocations": {A: {"resources": {"VCPU": 1}}},
                "project_id": P1,
                "user_id": U1,
                "consumer_generation": 2,
                "consumer_type": "INSTANCE",
            }
        },
    },
)
r("DELETE", f"/resource_providers/{A}")
r("DELETE", f"/allocations/{C3}")
r("DELETE", f"/resource_providers/{B}")
r("DELETE", f"/resource_providers/{A}")
