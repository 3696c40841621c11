"""Bad input never gets a 500, always gets upstream's error body, and changes nothing.

Issue 2/3 acceptance: malformed JSON, wrong types, unknown fields, bad uuids,
oversized names, unknown resource classes and malformed query strings get a
4xx in the error format and leave the database as it was; no input gets a 5xx.
Issue 13 adds JSON nested hundreds of levels deep, unpaired UTF-16 surrogates,
amounts of 2**63 and more, and bodies over [api] max_request_body_size.

A hypothesis-driven fuzz sends mutated requests to every route of
``placement/routes.py`` (bodies derived from a valid one per route by
replacing values with wrong types, huge or negative numbers, NaN, NUL and
non-ASCII strings, very long strings and extra keys; bad path parameters;
random query strings with repeated keys; microversions 1.0 to 1.39) against
an app holding a little seeded data, and after every 4xx compares a snapshot
of every table. The examples are bounded and derandomized so the file runs in
seconds per backend. Specific regression tests for what it found follow.
"""

import collections
import json
import math
import os
import urllib.parse
import uuid as uuid_lib

import hypothesis
import pytest
import sqlalchemy as sa
from hypothesis import strategies as st

from placement import models as m
from placement import routes
from tests import builders

MAX_MINOR = 39
BODY_LIMIT = 1024 * 1024  # [api] max_request_body_size's default
PROJECT = "6e7a3ed8-7f0c-4a2e-9d64-1b2b8c0d7a11"
USER = "2c1f7f1e-4f7a-4a0e-8a3f-3b7e0c8d6e22"


# --- seeded data -----------------------------------------------------------


def _seed(client, db):
    """A provider tree with inventories, traits, an aggregate, a consumer with
    allocations, a node record with hardware and twin, a build request and a
    scheduling report; returns the names the fuzz draws path parameters from."""
    root = builders.create_provider(db, name="fuzz-root")
    child = builders.create_provider(db, name="fuzz-child", parent_uuid=root)
    other = builders.create_provider(db, name="fuzz-other")
    builders.set_inventory(db, root, "VCPU", 16)
    builders.set_inventory(db, root, "MEMORY_MB", 65536, max_unit=8192)
    builders.set_inventory(db, child, "CUSTOM_FUZZ_GPU", 4)
    builders.set_inventory(db, other, "DISK_GB", 1000)

    def ok(resp, *codes):
        assert resp.status_code in codes, (resp.status_code, resp.get_data(as_text=True))
        return resp.get_json() if resp.data else None

    ok(client.put("/traits/CUSTOM_FUZZ"), 201)
    gen = ok(client.get(f"/resource_providers/{root}"), 200)["generation"]
    gen = ok(
        client.put(
            f"/resource_providers/{root}/traits",
            json={
                "traits": ["CUSTOM_FUZZ", "HW_CPU_X86_AVX2"],
                "resource_provider_generation": gen,
            },
        ),
        200,
    )["resource_provider_generation"]
    agg = str(uuid_lib.uuid4())
    ok(
        client.put(
            f"/resource_providers/{root}/aggregates",
            json={"aggregates": [agg], "resource_provider_generation": gen},
        ),
        200,
    )
    consumer = str(uuid_lib.uuid4())
    ok(
        client.put(
            f"/allocations/{consumer}",
            json={
                "allocations": {
                    root: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}},
                    child: {"resources": {"CUSTOM_FUZZ_GPU": 1}},
                },
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        ),
        204,
    )
    ok(client.put(f"/nodes/{root}", json={"cell": "cell1", "labels": {"rack": "r1"}}), 201)
    ok(
        client.put(
            f"/nodes/{root}/hardware",
            json={
                "cpu_model": "EPYC",
                "cpu_sockets": 2,
                "cpu_cores": 64,
                "memory_gib": 512,
                "gpu_vendor": "nvidia",
                "gpu_model": "H100",
                "gpu_count": 4,
                "gpu_min_cap_watts": 200.0,
                "gpu_max_cap_watts": 400.0,
            },
        ),
        201,
    )
    ok(client.put(f"/nodes/{root}/twin", json={"profile": "performance"}), 201)
    instance = str(uuid_lib.uuid4())
    ok(
        client.post(
            "/build_requests",
            json={
                "instance_uuid": instance,
                "request_id": "req-fuzz",
                "workload_class": "performance",
                "spec": {
                    "version": "1.0",
                    "request_id": "req-fuzz",
                    "instance_uuids": [instance],
                    "workload_class": "performance",
                    "resources": {"VCPU": 1},
                    "project_id": PROJECT,
                    "user_id": USER,
                },
            },
        ),
        201,
    )
    ok(
        client.put(
            "/scheduling_reports/req-fuzz", json={"project_id": PROJECT, "report": {"hosts": 3}}
        ),
        201,
    )
    group = ok(
        client.post(
            "/server_groups",
            json={
                "name": "fuzz-group",
                "policy": "anti-affinity",
                "rules": {"max_server_per_host": 2},
                "project_id": PROJECT,
                "user_id": USER,
            },
        ),
        201,
    )["uuid"]
    return {
        "root": root,
        "child": child,
        "other": other,
        "agg": agg,
        "consumer": consumer,
        "instance": instance,
        "request_id": "req-fuzz",
        "group": group,
    }


def _snapshot(db):
    """Every row of every table (row counts, provider generations, allocations...)."""
    out = {}
    with db.read() as conn:
        for table in m.metadata.sorted_tables:
            rows = conn.execute(sa.select(table)).all()
            out[table.name] = sorted(repr(tuple(r)) for r in rows)
    return out


def _diff(before, after):
    lines = []
    for name in before:
        if before[name] != after[name]:
            gone = sorted(set(before[name]) - set(after[name]))
            new = sorted(set(after[name]) - set(before[name]))
            lines.append(f"{name}: -{gone[:3]} +{new[:3]}")
    return "; ".join(lines)


# --- strategies ------------------------------------------------------------

BAD_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "CUSTOM_\x00",
    "é",
    "ünïcødé ☃",
    "\U0001f600",
    "x" * 256,
    "x" * 5000,
    "CUSTOM_" + "A" * 300,
    "VCPU",
    "CUSTOM_NOPE",
    "in:",
    "!",
    "null",
    "1e400",
    "-1",
    "0",
    "9" * 30,
    "../..",
    "%",
    "%00",
    "'; DROP TABLE traits; --",
    "{}",
    "[]",
    "not-a-uuid",
    "00000000-0000-0000-0000-00000000000g",
    "{12345678-1234-5678-1234-567812345678}",
    "12345678123456781234567812345678",
    "in:not-a-uuid,",
    ",",
    "a,,b",
    ":",
    "1:",
    "VCPU:",
    "VCPU:-1",
    "VCPU:1.5",
    "VCPU:99999999999999999999",
    "VCPU:1,VCPU:2",
    "!CUSTOM_FUZZ",
    "in:CUSTOM_FUZZ,!HW_CPU_X86_AVX2",
    "any",
    "none",
    "isolate",
    "true",
    "1.5",
]

ints = st.one_of(
    st.integers(-3, 3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**400]),
)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, -0.0, 1e308, -1e-308, 1.0000001]),
)
texts = st.one_of(
    st.sampled_from(BAD_STRINGS), st.text(max_size=12), st.text(min_size=250, max_size=300)
)
# Unpaired UTF-16 surrogates: valid JSON escapes, but no database can store them.
LONE_SURROGATES = ["\ud800", "a\udfffb", "\udc00\ud800", "CUSTOM_\udbff"]
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts, st.sampled_from(LONE_SURROGATES))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)


def _seeded_uuid(ctx):
    return st.sampled_from(
        [
            ctx["root"],
            ctx["child"],
            ctx["other"],
            ctx["consumer"],
            ctx["instance"],
            ctx["agg"],
            ctx["group"],
        ]
    )


def path_param(ctx, kind):
    bad = st.one_of(
        st.sampled_from(BAD_STRINGS).filter(lambda s: s and "/" not in s),
        st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s),
        st.uuids().map(str),
        st.uuids().map(lambda u: u.hex.upper()),
    )
    if kind in ("uuid", "consumer_uuid", "instance_uuid"):
        return st.one_of(_seeded_uuid(ctx), bad)
    if kind == "resource_class":
        return st.one_of(
            st.sampled_from(["VCPU", "MEMORY_MB", "CUSTOM_FUZZ_GPU", "DISK_GB", "CUSTOM_MISSING"]),
            bad,
        )
    if kind == "name":
        return st.one_of(
            st.sampled_from(
                ["CUSTOM_FUZZ", "CUSTOM_FUZZ_GPU", "VCPU", "HW_CPU_X86_AVX2", "CUSTOM_NEW_ONE"]
            ),
            bad,
        )
    return st.one_of(st.just(ctx["request_id"]), bad)


def _valid_bodies(ctx, gens):
    """A valid body for each write route (what the mutations start from)."""
    root, child, other = ctx["root"], ctx["child"], ctx["other"]
    rg = gens.get(root, 0)
    new_instance = str(uuid_lib.uuid4())
    alloc = {
        "allocations": {root: {"resources": {"VCPU": 1}}},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": 1,
        "consumer_type": "INSTANCE",
    }
    twin = {
        "profile": "eco",
        "schedulable_class": "eco",
        "cpu_cap_watts": 100.0,
        "gpu_cap_watts": None,
        "managed_by": "fuzz",
        "generation": 0,
    }
    return {
        ("POST", "/resource_providers"): {
            "name": "fuzz-new",
            "uuid": str(uuid_lib.uuid4()),
            "parent_provider_uuid": root,
        },
        ("PUT", "/resource_providers/<uuid>"): {
            "name": "fuzz-renamed",
            "parent_provider_uuid": root,
        },
        ("POST", "/resource_classes"): {"name": "CUSTOM_FUZZ_NEW"},
        ("PUT", "/resource_classes/<name>"): {"name": "CUSTOM_FUZZ_NEW"},
        ("POST", "/resource_providers/<uuid>/inventories"): {
            "resource_class": "DISK_GB",
            "total": 100,
            "reserved": 0,
            "min_unit": 1,
            "max_unit": 10,
            "step_size": 1,
            "allocation_ratio": 1.0,
        },
        ("PUT", "/resource_providers/<uuid>/inventories"): {
            "resource_provider_generation": rg,
            "inventories": {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 65536, "max_unit": 8192}},
        },
        ("PUT", "/resource_providers/<uuid>/inventories/<resource_class>"): {
            "resource_provider_generation": rg,
            "total": 32,
            "reserved": 1,
            "allocation_ratio": 2.0,
        },
        ("PUT", "/resource_providers/<uuid>/aggregates"): {
            "aggregates": [ctx["agg"]],
            "resource_provider_generation": rg,
        },
        ("POST", "/allocations"): {
            ctx["consumer"]: alloc,
            str(uuid_lib.uuid4()): {**alloc, "consumer_generation": None},
        },
        ("PUT", "/allocations/<consumer_uuid>"): alloc,
        ("PUT", "/resource_providers/<uuid>/traits"): {
            "traits": ["CUSTOM_FUZZ"],
            "resource_provider_generation": rg,
        },
        ("POST", "/reshaper"): {
            "inventories": {
                root: {"resource_provider_generation": rg, "inventories": {"VCPU": {"total": 16}}},
                child: {
                    "resource_provider_generation": gens.get(child, 0),
                    "inventories": {"CUSTOM_FUZZ_GPU": {"total": 4}},
                },
            },
            "allocations": {ctx["consumer"]: alloc},
        },
        ("POST", "/nodes/twins"): {"twins": [{**twin, "uuid": root}, {**twin, "uuid": other}]},
        ("PUT", "/nodes/<uuid>"): {
            "cell": "cell2",
            "labels": {"a": "b"},
            "reserved": False,
            "unschedulable": True,
            "generation": 0,
        },
        ("PUT", "/nodes/<uuid>/hardware"): {
            "cpu_model": "x",
            "cpu_sockets": 1,
            "gpu_count": 0,
            "cpu_min_cap_watts": 10,
            "cpu_max_cap_watts": 20,
        },
        ("PUT", "/nodes/<uuid>/twin"): twin,
        ("POST", "/build_requests"): {
            "instance_uuid": new_instance,
            "request_id": "req-2",
            "workload_class": "standard",
            "spec": {
                "version": "1.0",
                "request_id": "req-2",
                "instance_uuids": [new_instance],
                "resources": {"VCPU": 1},
                "project_id": PROJECT,
                "user_id": USER,
            },
        },
        ("PUT", "/build_requests/<instance_uuid>"): {
            "status": "placed",
            "host_uuid": root,
            "reason": None,
        },
        ("PUT", "/build_requests"): {
            "build_requests": [
                {"instance_uuid": ctx["instance"], "status": "failed", "reason": "fuzz"}
            ]
        },
        ("PUT", "/build_requests/<instance_uuid>/lease"): {
            "owner": "conductor-fuzz",
            "generation": 0,
            "lease_seconds": 30,
            "hand_off": False,
        },
        ("PUT", "/build_requests/<instance_uuid>/instance_state"): {
            "state": "finished",
            "host_uuid": root,
            "exit_status": 0,
            "reason": None,
        },
        ("PUT", "/build_requests/leases"): {
            "build_requests": [{"instance_uuid": ctx["instance"], "generation": 0}],
            "owner": "conductor-fuzz",
            "lease_seconds": 30,
            "hand_off": False,
        },
        ("POST", "/nodes/<uuid>/build_outcome"): {"succeeded": False},
        ("POST", "/nodes/<uuid>/heartbeat"): {
            "twin_status": {
                "observed_generation": 0,
                "profile": "eco",
                "cpu": {"method": "rapl", "result": "applied", "applied_watts": 100},
            }
        },
        ("POST", "/nodes/build_outcomes"): {"outcomes": [{"uuid": root, "succeeded": False}]},
        ("POST", "/server_groups"): {
            "name": "fuzz-group-2",
            "policy": "anti-affinity",
            "rules": {"max_server_per_host": 1},
            "uuid": str(uuid_lib.uuid4()),
            "project_id": PROJECT,
            "user_id": USER,
        },
        ("PUT", "/scheduling_reports/<request_id>"): {
            "project_id": PROJECT,
            "report": {"hosts": 1},
        },
        ("POST", "/scheduling_reports"): {
            "reports": [{"request_id": "req-fuzz-2", "project_id": PROJECT, "report": {"hosts": 1}}]
        },
    }


QUERY_KEYS = {
    "/resource_providers": [
        "name",
        "uuid",
        "member_of",
        "resources",
        "in_tree",
        "required",
        "limit",
    ],
    "/allocation_candidates": [
        "resources",
        "resources1",
        "resources_X",
        "required",
        "required1",
        "member_of",
        "member_of1",
        "in_tree",
        "in_tree1",
        "limit",
        "group_policy",
        "root_required",
        "same_subtree",
        "page_size",
        "page_marker",
        "page_start",
        "node_data",
    ],
    "/usages": ["project_id", "user_id", "consumer_type"],
    "/traits": ["name", "associated"],
    "/resource_providers/<uuid>/usages": ["consumer_type"],
    "/build_requests": [
        "status",
        "workload_class",
        "request_id",
        "owner",
        "lease_expired",
        "limit",
    ],
    "/nodes": ["cell", "limit"],
    "/workload_usages": ["in_tree", "limit"],
    "/server_groups": ["project_id"],
}
QUERY_VALUES = {
    "resources": ["VCPU:1", "VCPU:1,MEMORY_MB:512", "CUSTOM_FUZZ_GPU:1"],
    "required": ["CUSTOM_FUZZ", "!CUSTOM_FUZZ", "in:CUSTOM_FUZZ,HW_CPU_X86_AVX2"],
    "name": ["fuzz-root", "in:CUSTOM_FUZZ,HW_CPU_X86_AVX2", "startswith:CUSTOM"],
    "page_size": ["1", "2", "0", "1000000000000"],
    "page_marker": ["abc", "", "eyJ4IjoxfQ=="],
    "page_start": ["0", "0.5", "1", "-0.5", "x"],
    "node_data": ["true", "false", "1", "yes"],
    "limit": ["1", "0", "-1", "99999999999999999999"],
    "group_policy": ["none", "isolate"],
    "lease_expired": ["true", "false", "yes"],
}


def _good_values(ctx, key):
    base = key.rstrip("1").split("_X")[0]
    if base in ("uuid", "in_tree", "member_of", "project_id", "user_id"):
        return [ctx["root"], ctx["child"], "in:" + ctx["agg"], PROJECT]
    return QUERY_VALUES.get(base, ["1"])


@st.composite
def query_strings(draw, ctx, route, bad):
    """A query string of the route's keys; with ``bad``, odd keys, values and repeats."""
    keys = QUERY_KEYS.get(route, [])
    if bad:
        keys = keys + ["bogus", "", "in_tree", "limit"]
    if not keys:
        return ""
    pairs = draw(st.lists(st.sampled_from(keys), min_size=1 if bad else 0, max_size=4))
    out = []
    for key in pairs:
        good = st.sampled_from(_good_values(ctx, key))
        value = draw(
            st.one_of(good, st.sampled_from(BAD_STRINGS), st.text(max_size=10)) if bad else good
        )
        out.append((key, value))
        if bad and draw(st.integers(0, 4)) == 0:
            out.append((key, value))  # repeated key
    return urllib.parse.urlencode(out, quote_via=urllib.parse.quote)


def _set_path(body, keys, value):
    """Replace the value at ``keys`` (a path of dict keys/list indexes) in a copy of body."""
    if not keys:
        return value
    body = json.loads(json.dumps(body))
    target = body
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return body


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _paths(sub, prefix + (key,))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _paths(sub, prefix + (index,))


@st.composite
def bodies(draw, valid):
    """(kind, payload): "json" with a Python value, or "raw" with bytes."""
    choice = draw(st.integers(0, 19))
    if choice == 0:
        raw = draw(
            st.sampled_from(
                [
                    b"",
                    b"{",
                    b"{'a': 1}",
                    b"[1,",
                    b"\xff\xfe",
                    b"nul",
                    b'{"a": NaN}',
                    b'{"a": Infinity}',
                    b'{"a": 1e999}',
                    b'{"a": "\\ud800"}',
                    b'{"a": 1, "a": 2}',
                    b"[" * 1000 + b"]" * 1000,
                    b'{"a":' * 450 + b"1" + b"}" * 450,
                    b" " * BODY_LIMIT + b"{}",
                ]
            )
        )
        return "raw", raw
    if choice == 1 or valid is None:
        return "json", draw(json_values)
    body = valid
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(body))
        where = draw(st.sampled_from(paths))
        action = draw(st.integers(0, 5))
        if action == 0 and isinstance(body, dict):  # an extra key, at the top or deeper
            target = draw(st.sampled_from([p for p in paths if isinstance(_get(body, p), dict)]))
            extra = _get(body, target)
            extra = {**extra, draw(texts): draw(json_values)}
            body = _set_path(body, target, extra)
        elif action == 1 and where:  # drop a key
            parent = _get(body, where[:-1])
            if isinstance(parent, dict):
                parent = {k: v for k, v in parent.items() if k != where[-1]}
                body = _set_path(body, where[:-1], parent)
        elif action == 2:  # NaN / infinity as a number (Python's json accepts them)
            body = _set_path(body, where, draw(st.sampled_from([math.nan, math.inf, -math.inf])))
        else:
            body = _set_path(body, where, draw(json_values))
    return "json", body


def _get(body, keys):
    for key in keys:
        body = body[key]
    return body


def microversions(bad):
    good = st.one_of(st.integers(0, MAX_MINOR).map(lambda n: f"1.{n}"), st.just("latest"))
    if not bad:
        return good
    return st.sampled_from(
        [
            "1.40",
            "2.0",
            "1.",
            "1.01",
            "abc",
            "1.999999999999999999999",
            "",
            "placement",
            "1.-1",
            "１.５",
        ]
    )


def _minor(version):
    if version == "latest":
        return MAX_MINOR
    major, _, minor = version.partition(".")
    if major == "1" and minor.isdigit() and not (len(minor) > 1 and minor[0] == "0"):
        return int(minor)
    return None


EXTENSION_PREFIXES = (
    "/nodes",
    "/build_requests",
    "/scheduling_reports",
    "/workload_usages",
    "/server_groups",
)


def _route_list(extensions):
    out = []
    for path, methods in routes.ROUTES.items():
        if path.startswith(EXTENSION_PREFIXES) != extensions:
            continue
        for method in methods:
            out.append((method, path))
    return out


FAULTS = ["path", "query", "version", "body", "body", "body", "body", "all"]


@st.composite
def requests(draw, ctx, gens, extensions):
    """One request with one kind of fault (or all of them at once)."""
    method, route = draw(st.sampled_from(_route_list(extensions)))
    fault = draw(st.sampled_from(FAULTS))
    bad = {kind: fault in (kind, "all") for kind in ("path", "query", "version", "body")}
    path = route
    for part in route.split("/"):
        if part.startswith("<"):
            kind = part[1:-1]
            if bad["path"]:
                strategy = path_param(ctx, kind)
            else:
                strategy = st.sampled_from(GOOD_PARAMS[kind](ctx))
            if method == "DELETE":
                # Deleting a seeded object is good input, not the point here.
                if bad["path"]:
                    strategy = strategy.filter(
                        lambda v: (
                            v not in ctx.values() and v not in ("CUSTOM_FUZZ", "CUSTOM_FUZZ_GPU")
                        )
                    )
                else:
                    strategy = st.one_of(st.uuids().map(str), st.just("CUSTOM_NEW_ONE"))
            path = path.replace(part, urllib.parse.quote(draw(strategy), safe=""), 1)
    query = draw(query_strings(ctx, route, bad["query"]))
    if query:
        path = f"{path}?{query}"
    body = None
    valid = _valid_bodies(ctx, gens).get((method, route))
    if method in ("PUT", "POST"):
        body = draw(bodies(valid)) if bad["body"] or valid is None else ("json", valid)
    elif bad["body"] and draw(st.booleans()):
        body = ("json", draw(json_values))
    return method, route, path, body, draw(microversions(bad["version"]))


GOOD_PARAMS = {
    "uuid": lambda ctx: [ctx["root"], ctx["child"], ctx["other"], ctx["group"]],
    "consumer_uuid": lambda ctx: [ctx["consumer"]],
    "instance_uuid": lambda ctx: [ctx["instance"]],
    "resource_class": lambda ctx: ["VCPU", "MEMORY_MB", "CUSTOM_FUZZ_GPU", "DISK_GB"],
    "name": lambda ctx: ["CUSTOM_FUZZ", "CUSTOM_FUZZ_GPU", "HW_CPU_X86_AVX2"],
    "request_id": lambda ctx: [ctx["request_id"]],
}


# --- the fuzz ----------------------------------------------------------------


def _generations(db):
    with db.read() as conn:
        rp = m.resource_providers
        return dict(conn.execute(sa.select(rp.c.uuid, rp.c.generation)).all())


def _send(client, method, path, body, version):
    # The service role lets the fuzz past the reshaper's (service-only) policy.
    headers = {
        "openstack-api-version": f"placement {version}" if version else None,
        "x-roles": "admin,service",
    }
    if body is None:
        return client.request(method, path, headers=headers, version="")
    kind, payload = body
    headers["content-type"] = "application/json"
    if kind == "raw":
        data = payload
    else:
        data = json.dumps(payload).encode()
    return client.request(method, path, headers=headers, version="", data=data)


def _refuse(name):
    raise AssertionError(f"response holds {name}, which is not JSON")


def _strict_json(text):
    return json.loads(text, parse_constant=_refuse)


def _check(resp, method, path, body, version, before, db):
    where = f"{method} {path[:300]!r} version={version!r} body={str(body)[:500]!r}"
    status = resp.status_code
    assert status < 500, f"{status} for {where}: {resp.get_data(as_text=True)[:800]}"
    if resp.mimetype == "application/json":
        _strict_json(resp.get_data(as_text=True))  # no NaN/Infinity goes out
    if status < 400:
        return None
    data = resp.get_json(silent=True)
    assert isinstance(data, dict) and data.get("errors"), (
        f"{status} without an error body for {where}: {resp.get_data(as_text=True)[:300]}"
    )
    error = data["errors"][0]
    assert error.get("status") == status, where
    assert isinstance(error.get("title"), str) and error["title"], where
    assert isinstance(error.get("detail"), str), where
    minor = _minor(version) if version else 0
    if minor is not None and minor >= 23 and status != 406:
        assert isinstance(error.get("code"), str) and error["code"].startswith("placement."), (
            f"no code at {version} for {where}: {error}"
        )
    after = _snapshot(db)
    assert after == before, f"{status} changed the database for {where}: {_diff(before, after)}"
    return after


# PLACEMENT_FUZZ_EXAMPLES=2000 runs a longer, random (not derandomized) hunt and
# prints the statuses seen per route (with -s).
HUNT = int(os.environ.get("PLACEMENT_FUZZ_EXAMPLES", "0"))


def _fuzz(client, db, extensions, max_examples):
    ctx = _seed(client, db)
    state = {"snapshot": _snapshot(db)}
    seen = collections.Counter()

    @hypothesis.settings(
        max_examples=HUNT or max_examples,
        deadline=None,
        derandomize=not HUNT,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(data=st.data())
    def run(data):
        gens = _generations(db)
        method, route, path, body, version = data.draw(requests(ctx, gens, extensions))
        resp = _send(client, method, path, body, version)
        seen[(method, route, resp.status_code)] += 1
        before = state["snapshot"]
        if _check(resp, method, path, body, version, before, db) is None:
            state["snapshot"] = _snapshot(db)  # a 2xx may change things; that is fine

    try:
        run()
    finally:
        if HUNT:
            for key, count in sorted(seen.items()):
                print(*key, count)


def test_fuzz_placement_routes(client, db):
    _fuzz(client, db, extensions=False, max_examples=180)


def test_fuzz_extension_routes(client, db):
    _fuzz(client, db, extensions=True, max_examples=90)


def test_fuzz_covers_every_route():
    """A new route in placement/routes.py is fuzzed too (or this fails)."""
    covered = set(_route_list(False)) | set(_route_list(True))
    every = {(meth, path) for path, methods in routes.ROUTES.items() for meth in methods}
    assert covered == every
    writes = {key for key in every if key[0] in ("PUT", "POST")}
    ctx = dict.fromkeys(
        ["root", "child", "other", "agg", "consumer", "instance", "group"], str(uuid_lib.uuid4())
    )
    ctx["request_id"] = "r"
    no_template = writes - set(_valid_bodies(ctx, {}))
    # Bodyless writes (PUT /traits/{name}) and the pre-1.7 resource class PUT.
    assert no_template == {("PUT", "/traits/<name>")}


# --- regressions found by the fuzz --------------------------------------------


@pytest.mark.parametrize("field", ["profile", "schedulable_class"])
@pytest.mark.parametrize("value", [["eco"], {"eco": 1}])
def test_post_twins_unhashable_enum_value_is_400(client, db, field, value):
    """The fast twin check tested membership in a frozenset: a list or object
    profile/schedulable_class raised TypeError (a 500) instead of a 400."""
    rp = builders.create_provider(db, name="cn1")
    before = _snapshot(db)
    twin = {"uuid": rp, "profile": "eco", field: value}
    resp = client.post("/nodes/twins", json={"twins": [twin]})
    assert resp.status_code == 400, resp.get_data(as_text=True)
    assert "JSON does not validate" in resp.get_json()["errors"][0]["detail"]
    assert _snapshot(db) == before


@pytest.mark.parametrize(
    "method,path,raw",
    [
        (
            "POST",
            "/resource_providers/{rp}/inventories",
            '{"resource_class": "VCPU", "total": 8, "allocation_ratio": NaN}',
        ),
        (
            "PUT",
            "/resource_providers/{rp}/inventories/DISK_GB",
            '{"resource_provider_generation": 1, "total": 8, "allocation_ratio": NaN}',
        ),
        ("PUT", "/nodes/{rp}/twin", '{"profile": "eco", "cpu_cap_watts": NaN}'),
        ("PUT", "/nodes/{rp}/hardware", '{"cpu_min_cap_watts": NaN, "cpu_max_cap_watts": 5}'),
        ("PUT", "/scheduling_reports/r1", '{"report": {"a": NaN}}'),
        ("PUT", "/scheduling_reports/r1", '{"report": {"a": -Infinity}}'),
        ("PUT", "/scheduling_reports/r1", '{"report": {"a": 1e999}}'),
        (
            "POST",
            "/build_requests",
            '{"instance_uuid": "9e1c1f52-5b55-4b2a-8f35-7d9f4e5a1b11", '
            '"request_id": "x", "spec": {"a": Infinity}}',
        ),
    ],
)
def test_nan_and_infinity_are_malformed_json(client, db, method, path, raw):
    """Python's json takes NaN/Infinity (and 1e999 as inf): an allocation_ratio
    of NaN was a 500 (int(NaN) in the capacity check), and NaN twin watts or
    report values were stored and served back as invalid JSON."""
    rp = builders.create_provider(db, name="cn1")
    builders.set_inventory(db, rp, "DISK_GB", 10)
    before = _snapshot(db)
    resp = client.request(
        method, path.format(rp=rp), data=raw.encode(), headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400, resp.get_data(as_text=True)
    detail = resp.get_json()["errors"][0]["detail"]
    assert "Malformed JSON" in detail and (
        "not a JSON number" in detail or "out of range" in detail
    ), detail
    assert _snapshot(db) == before


@pytest.mark.parametrize("key,record", [("", None), ("vcpu", {"total": 1}), ("VCPU!", 3)])
def test_reshaper_inventory_key_not_a_class_name_is_400(client, db, key, record):
    """The reshaper's per-provider inventories took any key, its record
    unchecked: {"": null} reached dict.update(None), a 500."""
    rp = builders.create_provider(db, name="cn1")
    builders.set_inventory(db, rp, "VCPU", 8)
    before = _snapshot(db)
    resp = client.post(
        "/reshaper",
        headers={"x-roles": "admin,service"},
        json={
            "inventories": {
                rp: {
                    "resource_provider_generation": 1,
                    "inventories": {"VCPU": {"total": 8}, key: record},
                }
            },
            "allocations": {},
        },
    )
    assert resp.status_code == 400, resp.get_data(as_text=True)
    detail = resp.get_json()["errors"][0]["detail"]
    assert "JSON does not validate" in detail and "does not match any of the regexes" in detail
    assert _snapshot(db) == before


# --- issue 13: deep JSON, lone surrogates, huge numbers, oversized bodies ------


def _write_routes(ctx, gens, read_body=True):
    """(method, route), valid body; with ``read_body`` only the routes that
    read a body at 1.39 (from 1.7 PUT /resource_classes/{name} ignores it)."""
    return sorted(
        item
        for item in _valid_bodies(ctx, gens).items()
        if not read_body or item[0] != ("PUT", "/resource_classes/<name>")
    )


def _assert_refused(resp, status, where, before, db, code=None):
    assert resp.status_code == status, (
        f"{where}: {resp.status_code} {resp.get_data(as_text=True)[:300]}"
    )
    error = resp.get_json()["errors"][0]
    assert error["status"] == status
    if code:
        assert error["code"] == code, where
    assert _snapshot(db) == before, where
    return error


def _fill(method, route, ctx):
    path = route
    for part in route.split("/"):
        if part.startswith("<"):
            path = path.replace(part, GOOD_PARAMS[part[1:-1]](ctx)[0], 1)
    return path


def test_deeply_nested_json_is_400_on_every_write_route(client, db):
    """JSON nested 65 to 100,000 levels: a RecursionError (a 500) while
    decoding from ~1000 levels, and while validating or formatting the
    validation error from ~400; now a 400 "nested deeper than 64 levels"."""
    ctx = _seed(client, db)
    before = _snapshot(db)
    for (method, route), valid in _write_routes(ctx, _generations(db)):
        path = _fill(method, route, ctx)
        key = next(iter(valid))
        for depth in (65, 400, 1000, 100_000):
            nested = "[" * depth + "]" * depth
            raw = json.dumps({**valid, key: "X"}).replace('"X"', nested, 1)
            resp = _send(client, method, path, ("raw", raw.encode()), "1.39")
            error = _assert_refused(resp, 400, f"{method} {path} depth {depth}", before, db)
            assert "nested deeper than 64 levels" in error["detail"]


def test_64_levels_of_free_form_json_are_accepted(client, db):
    """The bound leaves room: a scheduling report nested 63 levels inside its
    body (64 in all) is stored and served back whole."""
    report = {}
    inner = report
    for _ in range(61):
        inner["n"] = {}
        inner = inner["n"]
    resp = client.put("/scheduling_reports/deep", json={"report": report})
    assert resp.status_code == 201, resp.get_data(as_text=True)
    assert client.get("/scheduling_reports/deep").get_json()["report"] == report


def _leaves(value, prefix=()):
    """Paths of every string (and of every key, as ("key", path))."""
    if isinstance(value, str):
        yield prefix
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield ("key", prefix + (key,))
            yield from _leaves(sub, prefix + (key,))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _leaves(sub, prefix + (index,))


def _rename(body, keys, new):
    body = json.loads(json.dumps(body))
    parent = _get(body, keys[:-1])
    parent[new] = parent.pop(keys[-1])
    return body


def test_lone_surrogates_are_400_on_every_write_route(client, db):
    """An unpaired surrogate ("\\ud800") in a name or any other string or key
    was a UnicodeEncodeError (a 500) on POST/PUT /resource_providers, PUT
    /allocations, /nodes, /nodes/hardware, /nodes/twin and /build_requests,
    and a DataError on PostgreSQL's json columns; every string and key of
    every write body is tried."""
    ctx = _seed(client, db)
    before = _snapshot(db)
    tried = 0
    for (method, route), valid in _write_routes(ctx, _generations(db)):
        path = _fill(method, route, ctx)
        for leaf in _leaves(valid):
            if leaf and leaf[0] == "key":
                body = _rename(valid, leaf[1], leaf[1][-1] + "\udc00")
            else:
                body = _set_path(valid, leaf, "\ud800" + str(_get(valid, leaf)))
            resp = _send(client, method, path, ("json", body), "1.39")
            _assert_refused(resp, 400, f"{method} {path} at {leaf}", before, db)
            tried += 1
    assert tried > 80
    # A valid pair (one astral character) is no surrogate: stored and served.
    rp = builders.create_provider(db, name="astral")
    resp = client.put(f"/resource_providers/{rp}", json={"name": "rp \U0001f600"})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert client.get(f"/resource_providers/{rp}").get_json()["name"] == "rp \U0001f600"


def _int_leaves(value, prefix=()):
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield prefix
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _int_leaves(sub, prefix + (key,))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _int_leaves(sub, prefix + (index,))


def test_huge_numbers_are_refused_on_every_write_route(client, db):
    """Every integer of every write body (but inside the free-form spec and
    report documents) as 2**63, 2**64, 10**30 and -(2**63)-1: a 4xx that
    changes nothing (a 400, or the 409 upstream answers for an allocation no
    inventory can hold), never a driver overflow."""
    ctx = _seed(client, db)
    before = _snapshot(db)
    for (method, route), valid in _write_routes(ctx, _generations(db)):
        path = _fill(method, route, ctx)
        for leaf in _int_leaves(valid):
            if any(key in ("spec", "report") for key in leaf[:-1]):
                continue  # free-form JSON documents: any number is data, stored as text
            for number in (2**63, 2**64, 10**30, -(2**63) - 1):
                body = _set_path(valid, leaf, number)
                resp = _send(client, method, path, ("json", body), "1.39")
                assert resp.status_code in (400, 409), (
                    method,
                    path,
                    leaf,
                    number,
                    resp.get_data(as_text=True)[:300],
                )
                _assert_refused(resp, resp.status_code, f"{method} {path}", before, db)


@pytest.mark.parametrize("path", ["/resource_providers", "/allocation_candidates"])
@pytest.mark.parametrize("amount", [2**63, 2**64, 10**30])
def test_query_amount_beyond_64_bits_is_400(client, db, path, amount):
    """GET /resource_providers?resources=VCPU:2**63 was an OverflowError on
    SQLite and a DataError on PostgreSQL (500s)."""
    builders.set_inventory(db, builders.create_provider(db, name="cn1"), "VCPU", 8)
    resp = client.get(f"{path}?resources=VCPU:{amount}")
    assert resp.status_code == 400, resp.get_data(as_text=True)
    assert "out of range" in resp.get_json()["errors"][0]["detail"]
    resp = client.get(f"{path}?resources=VCPU:{2**63 - 1}")
    assert resp.status_code == 200, resp.get_data(as_text=True)


def test_bodies_over_the_limit_are_413_on_every_write_route(client, db):
    """A body one byte over [api] max_request_body_size is a 413 with a stable
    code before anything reads it, whatever the route, the token or the body."""
    ctx = _seed(client, db)
    before = _snapshot(db)
    for (method, route), valid in _write_routes(ctx, _generations(db), read_body=False):
        path = _fill(method, route, ctx)
        raw = json.dumps(valid).encode()
        raw += b" " * (BODY_LIMIT + 1 - len(raw))
        resp = _send(client, method, path, ("raw", raw), "1.39")
        error = _assert_refused(
            resp, 413, f"{method} {path}", before, db, code="placement.request.too_large"
        )
        assert str(BODY_LIMIT) in error["detail"]
        # Exactly at the limit it is read and handled as usual.
        resp = _send(client, method, path, ("raw", raw[:-1]), "1.39")
        assert resp.status_code != 413, f"{method} {path}"
        before = _snapshot(db)
