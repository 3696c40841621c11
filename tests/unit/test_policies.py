"""Policy rules: names, defaults and verdicts per role, legacy and secure RBAC.

The expectations are upstream Placement's policy reference and its RBAC
gabbits (``*-legacy-rbac.yaml``, ``*-secure-rbac.yaml``): every endpoint is
project-scoped, so system-scoped tokens are refused everywhere; admin and
service may do everything except reshape (service only under the secure
defaults); a project reader or member may read only the usages of its own
project. Extension rules (nodes, build requests, scheduling reports, workload
usages) give project readers nothing.
"""

import os
import subprocess
import sys

import pytest
from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from placement import conf as conf_mod
from placement import context as context_mod
from placement import policies
from placement import policy

PROJECT = "9d7d2bc0a1f94d6c8a4f3b3e2d1c0b0a"
ALT_PROJECT = "1b2c3d4e5f60718293a4b5c6d7e8f901"
SERVICE_PROJECT = "5e7a9c1b3d5f47b69d1e3f5a7c9e1b3d"

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ADMIN_OR_SERVICE = "rule:admin_or_service_api"

# Upstream's rule names with their default check strings.
UPSTREAM_RULES = {
    "admin_api": "role:admin",
    "service_api": "role:service",
    "admin_or_service_api": "role:admin or role:service",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
    "admin_or_project_reader_or_service_api": (
        "role:admin or rule:project_reader_api or role:service"
    ),
    "placement:resource_providers:list": ADMIN_OR_SERVICE,
    "placement:resource_providers:create": ADMIN_OR_SERVICE,
    "placement:resource_providers:show": ADMIN_OR_SERVICE,
    "placement:resource_providers:update": ADMIN_OR_SERVICE,
    "placement:resource_providers:delete": ADMIN_OR_SERVICE,
    "placement:resource_classes:list": ADMIN_OR_SERVICE,
    "placement:resource_classes:create": ADMIN_OR_SERVICE,
    "placement:resource_classes:show": ADMIN_OR_SERVICE,
    "placement:resource_classes:update": ADMIN_OR_SERVICE,
    "placement:resource_classes:delete": ADMIN_OR_SERVICE,
    "placement:resource_providers:inventories:list": ADMIN_OR_SERVICE,
    "placement:resource_providers:inventories:create": ADMIN_OR_SERVICE,
    "placement:resource_providers:inventories:show": ADMIN_OR_SERVICE,
    "placement:resource_providers:inventories:update": ADMIN_OR_SERVICE,
    "placement:resource_providers:inventories:delete": ADMIN_OR_SERVICE,
    "placement:resource_providers:aggregates:list": ADMIN_OR_SERVICE,
    "placement:resource_providers:aggregates:update": ADMIN_OR_SERVICE,
    "placement:resource_providers:usages": ADMIN_OR_SERVICE,
    "placement:usages": "rule:admin_or_project_reader_or_service_api",
    "placement:traits:list": ADMIN_OR_SERVICE,
    "placement:traits:show": ADMIN_OR_SERVICE,
    "placement:traits:update": ADMIN_OR_SERVICE,
    "placement:traits:delete": ADMIN_OR_SERVICE,
    "placement:resource_providers:traits:list": ADMIN_OR_SERVICE,
    "placement:resource_providers:traits:update": ADMIN_OR_SERVICE,
    "placement:resource_providers:traits:delete": ADMIN_OR_SERVICE,
    "placement:allocations:manage": ADMIN_OR_SERVICE,
    "placement:allocations:list": ADMIN_OR_SERVICE,
    "placement:allocations:update": ADMIN_OR_SERVICE,
    "placement:allocations:delete": ADMIN_OR_SERVICE,
    "placement:resource_providers:allocations:list": ADMIN_OR_SERVICE,
    "placement:allocation_candidates:list": ADMIN_OR_SERVICE,
    "placement:reshaper:reshape": "rule:service_api",
}

EXTENSION_RULES = [
    "placement:nodes:list",
    "placement:nodes:show",
    "placement:nodes:update",
    "placement:nodes:delete",
    "placement:build_requests:list",
    "placement:build_requests:update",
    "placement:scheduling_reports:show",
    "placement:scheduling_reports:update",
    "placement:workload_usages:list",
    "placement:server_groups:list",
    "placement:server_groups:show",
    "placement:server_groups:create",
    "placement:server_groups:delete",
    "placement:server_groups:members:delete",
]

# Who asks: (roles, project, system scope).
PERSONAS = {
    "system_admin": (["admin", "member", "reader"], None, "all"),
    "system_reader": (["reader"], None, "all"),
    "project_admin": (["admin", "member", "reader"], PROJECT, None),
    "project_member": (["member", "reader"], PROJECT, None),
    "project_reader": (["reader"], PROJECT, None),
    "alt_project_admin": (["admin", "member", "reader"], ALT_PROJECT, None),
    "alt_project_member": (["member", "reader"], ALT_PROJECT, None),
    "alt_project_reader": (["reader"], ALT_PROJECT, None),
    "service": (["service"], SERVICE_PROJECT, None),
    "no_role": ([], PROJECT, None),
}

ADMIN_OR_SERVICE_ALLOWED = {"project_admin", "alt_project_admin", "service"}

# Who passes each kind of rule, under (legacy, secure) defaults. The target of
# placement:usages is the project PROJECT (the project_id query parameter).
ALLOWED = {
    "admin_or_service": (ADMIN_OR_SERVICE_ALLOWED, ADMIN_OR_SERVICE_ALLOWED),
    "service": (ADMIN_OR_SERVICE_ALLOWED, {"service"}),
    "usages": (
        ADMIN_OR_SERVICE_ALLOWED | {"project_member", "project_reader"},
        ADMIN_OR_SERVICE_ALLOWED | {"project_member", "project_reader"},
    ),
}


def _kind(rule):
    if rule == "placement:reshaper:reshape":
        return "service"
    if rule == "placement:usages":
        return "usages"
    return "admin_or_service"


def _conf(secure, **oslo_policy_opts):
    conf = conf_mod.make_conf()
    conf.set_override("enforce_new_defaults", secure, group="oslo_policy")
    conf.set_override("policy_file", "/nonexistent/policy.yaml", group="oslo_policy")
    for name, value in oslo_policy_opts.items():
        conf.set_override(name, value, group="oslo_policy")
    return conf


def _context(persona, enforcer):
    roles, project, system = PERSONAS[persona]
    return context_mod.RequestContext(
        user_id="u-" + persona,
        project_id=project,
        roles=roles,
        system_scope=system,
        enforcer=enforcer,
    )


@pytest.fixture(scope="module", params=[False, True], ids=["legacy", "secure"])
def enforcer(request):
    return request.param, policy.Enforcer(_conf(request.param))


def test_upstream_rule_names_and_defaults():
    registered = {rule.name: rule for rule in policies.list_rules()}
    for name, check_str in UPSTREAM_RULES.items():
        assert name in registered, name
        assert registered[name].check_str == check_str, name
        if name.startswith("placement:"):
            assert registered[name].scope_types == ["project"], name
    deprecated = {n for n, r in registered.items() if r.deprecated_rule is not None}
    # The base rules carry upstream's deprecated "role:admin" fallback.
    assert deprecated == {
        "service_api",
        "admin_or_service_api",
        "project_reader_api",
        "admin_or_project_reader_or_service_api",
    }


def test_extension_rules_registered_project_scoped_admin_or_service():
    registered = {rule.name: rule for rule in policies.list_rules()}
    for name in EXTENSION_RULES:
        assert registered[name].check_str == ADMIN_OR_SERVICE, name
        assert registered[name].scope_types == ["project"], name
    assert set(registered) == set(UPSTREAM_RULES) | set(EXTENSION_RULES)


@pytest.mark.parametrize(
    "rule",
    sorted(
        set(UPSTREAM_RULES)
        - {
            "admin_api",
            "service_api",
            "admin_or_service_api",
            "project_reader_api",
            "admin_or_project_reader_or_service_api",
        }
    )
    + EXTENSION_RULES,
)
def test_verdicts_per_persona(enforcer, rule):
    secure, enf = enforcer
    expected = ALLOWED[_kind(rule)][1 if secure else 0]
    target = {"project_id": PROJECT} if rule == "placement:usages" else None
    verdicts = {}
    for persona in PERSONAS:
        ctx = _context(persona, enf)
        verdicts[persona] = ctx.can(rule, target=target, fatal=False)
    allowed = {p for p, ok in verdicts.items() if ok}
    assert allowed == expected


def test_denial_is_403_naming_the_rule(enforcer):
    _secure, enf = enforcer
    ctx = _context("project_reader", enf)
    with pytest.raises(Exception) as info:
        ctx.can("placement:nodes:show")
    assert info.value.status == 403
    assert info.value.detail == "Policy does not allow placement:nodes:show to be performed."


def test_usages_default_target_is_the_callers_project(enforcer):
    # Without a target a reader is checked against its own project.
    _secure, enf = enforcer
    assert _context("project_reader", enf).can("placement:usages", fatal=False)
    assert not _context("project_reader", enf).can(
        "placement:usages", target={"project_id": None}, fatal=False
    )


def test_unregistered_rule_is_a_bug_not_a_denial():
    enf = policy.Enforcer(_conf(True))
    with pytest.raises(oslo_policy.PolicyNotRegistered):
        _context("project_admin", enf).can("placement:no_such_rule")


def test_enforce_scope_false_still_refuses_system_scope():
    # The option is accepted for old config files; scope checks stay on, as
    # upstream with oslo.policy >= 4.5.
    enf = policy.Enforcer(_conf(False, enforce_scope=False))
    assert not _context("system_admin", enf).can("placement:resource_providers:list", fatal=False)
    assert _context("project_admin", enf).can("placement:resource_providers:list", fatal=False)


def test_policy_file_overrides_defaults(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(
        '"placement:nodes:show": "role:reader"\n"placement:resource_providers:list": "!"\n'
    )
    conf = _conf(True)
    conf.set_override("policy_file", str(path), group="oslo_policy")
    enf = policy.Enforcer(conf)
    assert _context("project_reader", enf).can("placement:nodes:show", fatal=False)
    assert not _context("project_admin", enf).can("placement:resource_providers:list", fatal=False)
    # Rules the file does not mention keep their defaults.
    assert not _context("project_reader", enf).can("placement:nodes:list", fatal=False)


def test_a_changed_policy_file_applies_within_the_reload_check(tmp_path, monkeypatch):
    # The file is looked at no more than every RELOAD_CHECK_SECONDS (a look
    # on every request was about 3 % of a small read's CPU), and a change
    # applies at the next look.
    clock = [1000.0]
    monkeypatch.setattr(policy.time, "monotonic", lambda: clock[0])
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:nodes:show": "role:reader"\n')
    conf = _conf(True)
    conf.set_override("policy_file", str(path), group="oslo_policy")
    enf = policy.Enforcer(conf)
    reader = _context("project_reader", enf)
    assert reader.can("placement:nodes:show", fatal=False)
    looks = []
    real = enf.oslo._load_policy_file
    monkeypatch.setattr(
        enf.oslo, "_load_policy_file", lambda *a, **k: looks.append(1) or real(*a, **k)
    )
    path.write_text('"placement:nodes:show": "!"\n')
    later = path.stat().st_mtime + 5  # a newer mtime, whatever the file system's grain
    os.utime(path, (later, later))
    clock[0] += policy.RELOAD_CHECK_SECONDS / 2
    for _ in range(20):
        assert reader.can("placement:nodes:show", fatal=False)
    assert looks == []
    clock[0] += policy.RELOAD_CHECK_SECONDS
    assert not reader.can("placement:nodes:show", fatal=False)
    assert len(looks) == 1


def test_broken_policy_file_fails_at_startup(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:nodes:show": [unclosed\n')
    conf = _conf(True)
    conf.set_override("policy_file", str(path), group="oslo_policy")
    with pytest.raises(ValueError):
        policy.Enforcer(conf)


def test_each_enforcer_is_independent():
    legacy = policy.Enforcer(_conf(False))
    secure = policy.Enforcer(_conf(True))
    assert _context("project_admin", legacy).can("placement:reshaper:reshape", fatal=False)
    assert not _context("project_admin", secure).can("placement:reshaper:reshape", fatal=False)


def _generate(tmp_path, tool, generator_conf):
    """Run a sample generator as tox's genconfig env does, into tmp_path."""
    out = tmp_path / "sample"
    code = (
        "import sys\n"
        f"from {tool[0]} import {tool[1]} as gen\n"
        f"sys.exit(gen.{tool[2]}(['--config-file', {generator_conf!r}, "
        f"'--output-file', {str(out)!r}]))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, timeout=120
    )
    return out.read_text()


@pytest.mark.parametrize(
    "sample,tool,generator_conf",
    [
        (
            "etc/placement/policy.yaml.sample",
            ("oslo_policy", "generator", "generate_sample"),
            "etc/placement/policy-generator.conf",
        ),
        (
            "etc/placement/placement.conf.sample",
            ("oslo_config", "generator", "main"),
            "etc/placement/config-generator.conf",
        ),
    ],
    ids=["policy", "config"],
)
def test_samples_are_current(tmp_path, sample, tool, generator_conf):
    """The committed samples match the code; regenerate with ``tox -e genconfig``."""
    with open(os.path.join(REPO, sample)) as f:
        committed = f.read()
    assert _generate(tmp_path, tool, generator_conf) == committed, (
        f"{sample} is stale: run tox -e genconfig"
    )


def test_get_enforcer_entry_point_has_every_rule(monkeypatch):
    monkeypatch.setattr(cfg, "CONF", cfg.ConfigOpts())
    enf = policy.get_enforcer()
    assert set(enf.registered_rules) == {r.name for r in policies.list_rules()}
