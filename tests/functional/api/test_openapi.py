"""The running server against its OpenAPI document (docs/api/openapi.yaml).

schemathesis (its CLI, ``st run``) sends generated requests, valid and
invalid, to a real ``placement-api`` on SQLite and on PostgreSQL, and checks
every response: no 5xx, a status code the document lists for the
operation, its content type, its required headers and its body schema. Two
runs per backend: one where the ``OpenStack-API-Version`` header is
generated from the document (absent, i.e. 1.0, or any microversion), one
pinned to ``placement latest``. Before them the database gets a small tree
(a root provider with a child, inventories, traits, an aggregate, an
allocation, node data, a custom class and trait, a server group, a build
request, a scheduling report) whose identifiers schemathesis mixes into the
path parameters, so requests reach the handlers' real work and not only
their 404s.

The number of examples is bounded (the coverage phase's cases at the
latest microversion, EXAMPLES random ones per operation and run, a fixed
seed), so both backends take two to three minutes together on two cores.
"""

import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest
import requests
import yaml

from tests import processes

BIN = os.path.dirname(sys.executable)
DOCUMENT = os.path.join(
    os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "docs", "api", "openapi.yaml"
)
TOKEN = "admin"
EXAMPLES = 3
SEED = 20240601
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)

pytest.importorskip("schemathesis")


Api = processes.PlacementApi


@pytest.fixture
def api(db_url, tmp_path):
    server = Api(tmp_path, db_url)
    yield server
    server.stop()


@pytest.fixture
def sqlite_api(sqlite_template, tmp_path):
    """The server on SQLite only (what does not depend on the backend)."""
    path = tmp_path / "placement.sqlite"
    shutil.copy(sqlite_template, path)
    server = Api(tmp_path, f"sqlite:///{path}")
    yield server
    server.stop()


def _call(api, method, path, body=None, expect=(200, 201, 204)):
    resp = requests.request(
        method,
        api.url + path,
        json=body,
        headers={"X-Auth-Token": TOKEN, "OpenStack-API-Version": "placement latest"},
        timeout=30,
    )
    assert resp.status_code in expect, (method, path, resp.status_code, resp.text)
    return resp.json() if resp.content else None


def seed(api):
    """A small world for the generated requests to find; its identifiers by name."""
    root = _call(api, "POST", "/resource_providers", {"name": "openapi-root"})["uuid"]
    child = _call(
        api, "POST", "/resource_providers", {"name": "openapi-child", "parent_provider_uuid": root}
    )["uuid"]
    _call(api, "PUT", "/resource_classes/CUSTOM_OPENAPI")
    _call(api, "PUT", "/traits/CUSTOM_OPENAPI")
    inventories = {
        "VCPU": {"total": 16},
        "MEMORY_MB": {"total": 4096},
        "CUSTOM_OPENAPI": {"total": 4},
    }
    _call(
        api,
        "PUT",
        f"/resource_providers/{root}/inventories",
        {"resource_provider_generation": 0, "inventories": inventories},
    )
    _call(
        api,
        "PUT",
        f"/resource_providers/{root}/traits",
        {"resource_provider_generation": 1, "traits": ["CUSTOM_OPENAPI", "HW_CPU_X86_AVX"]},
    )
    _call(
        api,
        "PUT",
        f"/resource_providers/{root}/aggregates",
        {"resource_provider_generation": 2, "aggregates": [str(uuid.uuid4())]},
    )
    consumer, instance = str(uuid.uuid4()), str(uuid.uuid4())
    group = _call(
        api,
        "POST",
        "/server_groups",
        {"name": "openapi", "policy": "anti-affinity", "project_id": "p", "user_id": "u"},
    )["uuid"]
    _call(
        api,
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": {root: {"resources": {"VCPU": 2}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
            "server_group": group,
        },
    )
    _call(api, "PUT", f"/nodes/{root}", {"cell": "cell1", "labels": {"rack": "r1"}})
    _call(api, "PUT", f"/nodes/{root}/hardware", {"cpu_model": "x86", "memory_gib": 64})
    _call(api, "PUT", f"/nodes/{root}/twin", {"profile": "performance"})
    spec = {
        "version": "1.0",
        "request_id": "req-openapi",
        "instance_uuids": [instance],
        "workload_class": "standard",
        "resources": {"VCPU": 1},
        "project_id": "p",
        "user_id": "u",
    }
    _call(
        api,
        "POST",
        "/build_requests",
        {"instance_uuid": instance, "request_id": "req-openapi", "spec": spec},
    )
    _call(api, "PUT", "/scheduling_reports/req-openapi", {"report": {"hosts": 1}})
    return {
        "uuids": [root, child, group],
        "consumers": [consumer],
        "instances": [instance, consumer],
        "classes": ["VCPU", "MEMORY_MB", "CUSTOM_OPENAPI"],
        "names": ["CUSTOM_OPENAPI", "VCPU", "HW_CPU_X86_AVX"],
        "requests": ["req-openapi"],
    }


def _toml_list(values):
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def write_config(path, ids):
    """A schemathesis.toml that mixes the seeded identifiers into path parameters."""
    lines = []
    for name, values in ids.items():
        lines += [f"[dictionaries.{name}]", f"values = {_toml_list(values)}", ""]
    # One undeclared method per path is enough to see its 405 and Allow header.
    lines += ["[phases.coverage]", 'unexpected-methods = ["PATCH"]', "", "[parameters]"]
    for param, name in (
        ("uuid", "uuids"),
        ("consumer_uuid", "consumers"),
        ("instance_uuid", "instances"),
        ("resource_class", "classes"),
        ("name", "names"),
        ("request_id", "requests"),
    ):
        lines.append(f'"path.{param}" = {{ dictionary = "{name}", probability = 0.5 }}')
    path.write_text("\n".join(lines) + "\n")
    return path


def run_schemathesis(api, config, *extra, document=DOCUMENT):
    """``st run`` against ``api``; (exit code, its output). It runs in the
    config file's directory, where it keeps its cache."""
    cmd = [
        os.path.join(BIN, "st"),
        "--config-file",
        str(config),
        "run",
        os.path.abspath(document),
        "--url",
        api.url,
        "--header",
        f"X-Auth-Token: {TOKEN}",
        "--checks",
        CHECKS,
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--workers",
        "2",
        "--no-color",
        "--output-truncate",
        "false",
        *extra,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=config.parent)
    return done.returncode, done.stdout + done.stderr


def _server_errors(api):
    return [line for line in api.output().splitlines() if " status: 5" in line]


def _check(api, config, *extra):
    code, output = run_schemathesis(api, config, *extra)
    assert code == 0, output[-20000:]
    assert not _server_errors(api), "\n".join(_server_errors(api)[:20])
    return output


def test_server_conforms_to_document(api, tmp_path):
    config = write_config(tmp_path / "schemathesis.toml", seed(api))
    # Every operation at the latest microversion, where all of them exist:
    # the coverage phase's boundary and invalid values, then random ones.
    latest = ("--header", "OpenStack-API-Version: placement latest")
    _check(api, config, *latest, "--phases", "coverage,fuzzing")
    # The header as the document has it: absent (1.0) or any microversion.
    _check(api, config, "--phases", "fuzzing")


def test_a_wrong_document_fails(sqlite_api, tmp_path):
    """The harness can fail: a document whose provider generation is a
    string does not describe GET /resource_providers."""
    api = sqlite_api
    config = write_config(tmp_path / "schemathesis.toml", seed(api))
    document = yaml.safe_load(open(DOCUMENT))
    schema = document["components"]["schemas"]["ResourceProvider"]
    schema["properties"]["generation"] = {"type": "string"}
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(document))
    code, output = run_schemathesis(
        api,
        config,
        "--header",
        "OpenStack-API-Version: placement latest",
        "--include-path",
        "/resource_providers",
        "--include-method",
        "GET",
        "--phases",
        "fuzzing",
        document=broken,
    )
    assert code == 1, output[-5000:]
    assert "Response violates schema" in output
    assert re.search(r"is not of type ['\"]string['\"]", output), output[-5000:]
