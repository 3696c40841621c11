"""Policy enforcement with oslo.policy, rule names and defaults as upstream."""

from oslo_policy import policy as oslo_policy

from placement import policies


class Enforcer:
    """Wraps oslo.policy's Enforcer for one app (never a process global)."""

    def __init__(self, conf):
        self._enforcer = oslo_policy.Enforcer(conf)
        self._enforcer.suppress_default_change_warnings = True
        self._enforcer.suppress_deprecation_warnings = True
        self._enforcer.register_defaults(policies.list_rules())

    def authorize(self, action, target, context):
        try:
            return self._enforcer.authorize(action, target, context, do_raise=False)
        except oslo_policy.InvalidScope:
            return False

    @property
    def oslo(self):
        return self._enforcer
