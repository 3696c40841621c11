"""Who is asking: the request context built from the auth headers."""

from oslo_context import context as oslo_context

from placement import errors


class RequestContext(oslo_context.RequestContext):
    """An oslo.context RequestContext with a policy check bound to it."""

    def __init__(self, *args, enforcer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.enforcer = enforcer

    def can(self, action, target=None, fatal=True):
        """Check the policy rule ``action``; raise a 403 ApiError when denied.

        ``target`` defaults to the caller's own project and user, as upstream.
        Returns the verdict when ``fatal`` is False.
        """
        if target is None:
            target = {"project_id": self.project_id, "user_id": self.user_id}
        if self.enforcer is None:
            return True
        allowed = self.enforcer.authorize(action, target, self)
        if not allowed and fatal:
            raise errors.forbidden(f"Policy does not allow {action} to be performed.")
        return allowed


def from_environ(environ, enforcer=None):
    """Build the context from the headers noauth2 or keystonemiddleware set."""
    ctx = RequestContext.from_environ(environ, enforcer=enforcer)
    ctx.enforcer = enforcer
    return ctx
