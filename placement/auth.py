"""Keystone authentication for ``[api] auth_strategy = keystone``.

keystonemiddleware's auth_token validates the ``X-Auth-Token`` of every
request against the identity service configured in ``[keystone_authtoken]``
(``www_authenticate_uri``, ``auth_url``, ``auth_type`` and the credentials of
placement's own service user), strips any identity headers the client sent,
and sets ``X-User-Id``, ``X-Project-Id``, ``X-Roles`` and
``OpenStack-System-Scope`` from the token, which ``placement.context`` turns
into the request context. An invalid or expired token gets keystonemiddleware's
401 with a ``WWW-Authenticate`` header pointing at keystone, as upstream.

``GET /`` (version discovery) stays open, as upstream: clients read it
before they have a token.
"""

import json
import uuid

from keystonemiddleware import auth_token

# The paths keystonemiddleware never sees (the root document).
OPEN_PATHS = ("", "/")

_UNAUTHORIZED_DETAIL = (
    "This server could not verify that you are authorized to access the document you "
    "requested. Either you supplied the wrong credentials (e.g., bad password), or your "
    "browser does not understand how to supply the credentials required.\n\n "
    "The request carries no authenticated user.  "
)


def keystone_middleware(wsgi_app, conf):
    """Wrap ``wsgi_app`` in keystonemiddleware's auth_token, configured from ``conf``.

    ``conf`` is the app's ConfigOpts; auth_token registers its
    ``[keystone_authtoken]`` options (and those of the chosen ``auth_type``)
    on it and reads them from the same config files, so nothing comes from
    oslo.config's global CONF.
    """
    protected = auth_token.AuthProtocol(_require_user(wsgi_app), {"oslo_config_config": conf})

    def app(environ, start_response):
        if environ.get("PATH_INFO", "") in OPEN_PATHS:
            return wsgi_app(environ, start_response)
        return protected(environ, start_response)

    # Tests and operators may want to reach the middleware (e.g. its cache).
    app.auth_token = protected
    return app


def _require_user(wsgi_app):
    """401 unless auth_token established a user.

    With ``delay_auth_decision = True`` auth_token lets requests with no or a
    bad token through, marked ``X-Identity-Status: Invalid``; placement has
    nothing to offer an anonymous caller beyond ``/``, so it refuses them
    here (upstream does the same when it builds the context).
    """

    def app(environ, start_response):
        if environ.get("HTTP_X_USER_ID") or environ.get("HTTP_X_USER"):
            return wsgi_app(environ, start_response)
        body = json.dumps(
            {
                "errors": [
                    {
                        "status": 401,
                        "title": "Unauthorized",
                        "detail": _UNAUTHORIZED_DETAIL,
                        "request_id": "req-" + str(uuid.uuid4()),
                    }
                ]
            }
        ).encode()
        start_response(
            "401 Unauthorized",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
            ],
        )
        return [body]

    return app
