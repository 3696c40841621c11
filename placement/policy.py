"""Policy enforcement with oslo.policy, rule names and defaults as upstream.

Each app owns its enforcer (never a process global), so two apps in one
process (tests, the demo) can run different policy settings. Options live in
``[oslo_policy]``: ``enforce_new_defaults`` picks the secure-RBAC defaults
(False: legacy, each base rule also accepts ``role:admin``), ``policy_file``
overrides rules.
"""

import logging
import time

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo_policy

from placement import policies

LOG = logging.getLogger(__name__)

# oslo.policy 4.5 removed [oslo_policy] enforce_scope and always enforces
# scope types. Deployments (and upstream's docs) still set it, so it is
# accepted; False cannot switch scope checks off and only earns a warning.
compat_opts = [
    cfg.BoolOpt(
        "enforce_scope",
        default=True,
        deprecated_for_removal=True,
        deprecated_reason="oslo.policy always enforces scope types now.",
        help="Accepted for compatibility. Scope types are always enforced: every "
        "placement rule is project-scoped, so system-scoped tokens are refused, as "
        "upstream Placement does.",
    ),
]


def register_opts(conf):
    """Register the [oslo_policy] options (oslo.policy's and ours) on ``conf``."""
    policy_opts.set_defaults(conf)
    conf.register_opts(compat_opts, group="oslo_policy")


# How often a request looks whether the policy file or directories changed.
# oslo.policy looks on every check (a search of the config directories, a
# stat of each file and a pass over every registered rule): about 3 % of
# placement's CPU on a small read (py-spy, GET /build_requests?limit=1).
# A changed file now applies within this long.
RELOAD_CHECK_SECONDS = 1.0


class _ThrottledEnforcer(oslo_policy.Enforcer):
    """oslo.policy's Enforcer that looks for changed policy files at most
    every RELOAD_CHECK_SECONDS (a forced reload, or rules not loaded yet,
    always look)."""

    _checked_at = None

    def load_rules(self, force_reload=False):
        now = time.monotonic()
        if (
            not force_reload
            and self.rules
            and self._checked_at is not None
            and now - self._checked_at < RELOAD_CHECK_SECONDS
        ):
            return
        super().load_rules(force_reload)
        self._checked_at = now


class Enforcer:
    """Wraps oslo.policy's Enforcer for one app."""

    def __init__(self, conf, rules=None):
        register_opts(conf)
        if not conf.oslo_policy.enforce_scope:
            LOG.warning(
                "[oslo_policy] enforce_scope = False is ignored: scope types are always enforced"
            )
        self._enforcer = _ThrottledEnforcer(conf)
        # Every base rule changed its default; one warning per rule per start
        # would bury real messages (upstream suppresses them too).
        self._enforcer.suppress_default_change_warnings = True
        self._enforcer.suppress_deprecation_warnings = True
        self._enforcer.register_defaults(rules if rules is not None else policies.list_rules())
        # Read the policy file now: a broken file stops start-up with its error
        # instead of failing every request later.
        self._enforcer.load_rules()

    def authorize(self, action, target, context):
        """True when ``context`` may perform ``action`` on ``target``.

        A token of the wrong scope (e.g. system scope on a project rule) is a
        plain denial, as upstream. An unregistered rule raises
        PolicyNotRegistered: that is a bug in a handler, never a 403.
        """
        try:
            return bool(self._enforcer.authorize(action, target, context, do_raise=False))
        except oslo_policy.InvalidScope:
            return False

    def set_rules(self, rules, overwrite=True):
        """Replace rules in memory (tests): ``{"rule name": "check string"}``."""
        self._enforcer.set_rules(
            oslo_policy.Rules.from_dict(rules), overwrite=overwrite, use_conf=False
        )

    @property
    def oslo(self):
        return self._enforcer


def get_enforcer():
    """``oslo.policy.enforcer`` entry point for oslopolicy-checker and friends.

    Those tools parse their own command line into the global CONF first; this
    only registers placement's rules on it.
    """
    conf = cfg.CONF
    try:
        conf.config_file  # noqa: B018 - only exists once the command line is parsed
    except cfg.NoSuchOptError:
        conf([], project="placement")
    return Enforcer(conf).oslo
