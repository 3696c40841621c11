"""The real OpenStack CLI (python-openstackclient + osc-placement) against a live server.

Each ``openstack`` start costs about two seconds of CPU, so the test makes
two: the documented one-shot form with command-line options, then one
interactive session (commands on stdin, options from the equivalent OS_*
variables) that walks through every command the issue lists.
"""

import json
import os
import subprocess
import sys

import pytest

OPENSTACK = os.path.join(os.path.dirname(sys.executable), "openstack")

pytestmark = pytest.mark.skipif(
    not os.path.exists(OPENSTACK), reason="openstack CLI not installed (pip install .[test])"
)


def _env(extra=None):
    # Whatever OS_* the developer has set must not steer the CLI elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(extra or {})
    return env


def _json_docs(text):
    """Every JSON document in ``text``, in order (the session prints several)."""
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while True:
        start = min((i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0), default=-1)
        if start < 0:
            return docs
        doc, pos = decoder.raw_decode(text, start)
        docs.append(doc)


def test_openstack_cli(live_server):
    agg = "83a3d69d-8920-48e2-8914-cadfd8fa2f91"
    cn2 = "0621521c-ad3a-4f9c-9b72-2933788fab19"
    one_shot = subprocess.run(
        [
            OPENSTACK,
            "--os-auth-type",
            "none",
            "--os-endpoint",
            live_server.url,
            "--os-placement-api-version",
            "1.39",
            "resource",
            "provider",
            "create",
            "cn1",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert one_shot.returncode == 0, one_shot.stderr
    cn1 = json.loads(one_shot.stdout)
    assert cn1["name"] == "cn1" and cn1["generation"] == 0
    rp = cn1["uuid"]

    script = "\n".join(
        [
            "resource class create CUSTOM_GOLD",
            "resource class list -f json",
            "trait create CUSTOM_FAST",
            "trait list -f json",
            f"resource provider create --uuid {cn2} cn2 -f json",
            "resource provider set --name compute-1 -f json " + rp,
            "resource provider show -f json " + rp,
            "resource provider inventory set --resource VCPU=8 --resource MEMORY_MB=4096 "
            "--resource CUSTOM_GOLD=2 -f json " + rp,
            "resource provider inventory delete --resource-class CUSTOM_GOLD " + rp,
            "resource provider inventory list -f json " + rp,
            "resource provider trait set --trait CUSTOM_FAST --trait HW_CPU_X86_AVX -f json " + rp,
            "resource provider trait list -f json " + rp,
            # create 0, rename 0, inventory set 1, inventory delete 2, trait set 3
            f"resource provider aggregate set --aggregate {agg} --generation 3 -f json " + rp,
            "resource provider aggregate list -f json " + rp,
            f"resource provider delete {cn2}",
            "resource provider list -f json",
            "",
        ]
    )
    session = subprocess.run(
        [OPENSTACK],
        input=script,
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(
            {
                "OS_AUTH_TYPE": "none",
                "OS_ENDPOINT": live_server.url,
                "OS_PLACEMENT_API_VERSION": "1.39",
            }
        ),
    )
    # A failing command in the session prints its error and the session goes
    # on, so count the JSON answers: one per command that prints one.
    docs = _json_docs(session.stdout)
    assert len(docs) == 12, session.stdout + session.stderr
    (
        classes,
        traits,
        created,
        renamed,
        shown,
        inv_set,
        inv_list,
        trait_set,
        trait_list,
        agg_set,
        agg_list,
        providers,
    ) = docs

    assert "CUSTOM_GOLD" in {rc["name"] for rc in classes}
    assert "CUSTOM_FAST" in {t["name"] for t in traits}
    assert created["name"] == "cn2" and created["uuid"] == cn2
    assert renamed["name"] == "compute-1" and shown["name"] == "compute-1"
    assert {i["resource_class"] for i in inv_set} == {"VCPU", "MEMORY_MB", "CUSTOM_GOLD"}
    assert {i["resource_class"]: i["total"] for i in inv_list} == {"VCPU": 8, "MEMORY_MB": 4096}
    assert {t["name"] for t in trait_set} == {"CUSTOM_FAST", "HW_CPU_X86_AVX"}
    assert {t["name"] for t in trait_list} == {"CUSTOM_FAST", "HW_CPU_X86_AVX"}
    assert [a["uuid"] for a in agg_set] == [agg] and [a["uuid"] for a in agg_list] == [agg]
    # cn2 was deleted; the renamed cn1 remains.
    assert [(p["uuid"], p["name"]) for p in providers] == [(rp, "compute-1")]
