"""The Flask application factory.

Request pipeline, in upstream's order (outermost first): request id ->
microversion -> auth (noauth2 or keystone) -> context -> accept check ->
handler. Every error, including routing errors and unexpected exceptions,
leaves as upstream's JSON error body.
"""

import logging
import uuid

import flask
import markupsafe
import werkzeug.exceptions

from placement import conf as conf_mod
from placement import context as context_mod
from placement import db as db_mod
from placement import errors
from placement import microversion
from placement import migration
from placement import policy
from placement import routes

LOG = logging.getLogger(__name__)

# Keystoneauth's "none" plugin (openstack --os-auth-type none) always sends this
# token; noauth2 treats it as the admin token so the documented standalone CLI
# usage works. Upstream treats it as a role-less user (every call 403).
NOAUTH_ADMIN_TOKENS = ("admin", "notused")


class Deps:
    """What handlers need: configuration, database, policy enforcer."""

    def __init__(self, conf, db, enforcer):
        self.conf = conf
        self.db = db
        self.enforcer = enforcer


def create_app(conf=None, db=None, sync=None):
    """Build the WSGI app.

    :param conf: an oslo.config ConfigOpts (placement.conf.make_conf()).
    :param db: an existing placement.db.Database to share (tests, the demo).
    :param sync: run migrations and sync standard classes/traits first; by
        default when ``sync_on_startup`` is set or the database is SQLite.
    """
    conf = conf or conf_mod.make_conf()
    if db is None:
        db = db_mod.Database(
            conf_mod.connection_url(conf), pool_size=conf.placement_database.pool_size
        )
    if sync is None:
        sync = conf.placement_database.sync_on_startup or not db.is_postgres
    if sync:
        migration.upgrade(db)
    db_mod.sync_standard_classes_and_traits(db)

    app = flask.Flask("placement")
    app.json.sort_keys = False
    app.extensions["placement"] = Deps(conf, db, policy.Enforcer(conf))

    app.before_request(_before_request)
    app.after_request(_after_request)
    app.register_error_handler(errors.ApiError, _api_error)
    app.register_error_handler(werkzeug.exceptions.HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
    routes.register(app)

    if conf.api.auth_strategy == "keystone":
        from placement import auth

        app.wsgi_app = auth.keystone_middleware(app.wsgi_app, conf)
    if conf.cors.allowed_origin:
        # Outermost, as upstream: a CORS preflight needs no token, and CORS
        # headers reach every answer, 401s included.
        from oslo_middleware import cors

        app.wsgi_app = cors.CORS(app.wsgi_app, conf)
    return app


def _before_request():
    g = flask.g
    req = flask.request
    g.request_id = "req-" + str(uuid.uuid4())
    g.version = None
    try:
        g.version = microversion.extract(req.headers)
    except ValueError as exc:
        raise errors.ApiError(
            406, f"Invalid microversion: {exc}",
            explanation="The resource could not be generated that was acceptable by "
            "your request.",
        )
    except TypeError as exc:
        raise errors.ApiError(400, f"Invalid microversion: {exc}")

    deps = flask.current_app.extensions["placement"]
    environ = req.environ
    if deps.conf.api.auth_strategy == "noauth2" and req.path != "/":
        _noauth2(environ)
    g.context = context_mod.from_environ(environ, enforcer=deps.enforcer)
    g.context.request_id = g.request_id

    # As upstream, before routing: a body must say what it is, and a
    # content-length must be a number.
    clen = req.headers.get("Content-Length")
    if clen:
        try:
            has_body = int(clen) > 0
        except ValueError:
            raise errors.bad_request("content-length header must be an integer")
        if has_body and not req.headers.get("Content-Type"):
            raise errors.bad_request("content-type header required when content-length > 0")

    # Upstream checks Accept in the handlers, after routing: an unknown path or a
    # wrong method answers 404/405 whatever the Accept header says.
    if (req.method == "GET" and req.headers.get("Accept")
            and req.routing_exception is None):
        if req.accept_mimetypes.best_match(["application/json"]) is None:
            raise errors.ApiError(
                406, "Only application/json is provided",
                explanation="The resource could not be generated that was acceptable "
                "by your request.",
            )


def _noauth2(environ):
    """Upstream's noauth2: any token authenticates; 'admin' is an admin."""
    token = environ.get("HTTP_X_AUTH_TOKEN")
    if token is None:
        raise errors.ApiError(401, "")
    user_id, _sep, project_id = token.partition(":")
    project_id = project_id or user_id
    if "HTTP_X_ROLES" in environ:
        roles = environ["HTTP_X_ROLES"].split(",")
    elif user_id in NOAUTH_ADMIN_TOKENS:
        roles = ["admin"]
    else:
        roles = []
    environ["HTTP_X_USER_ID"] = user_id
    if not environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE"):
        environ["HTTP_X_TENANT_ID"] = project_id
        environ.setdefault("HTTP_X_PROJECT_ID", project_id)
    environ["HTTP_X_ROLES"] = ",".join(roles)


def _after_request(resp):
    g = flask.g
    request_id = getattr(g, "request_id", None) or "req-" + str(uuid.uuid4())
    resp.headers["x-openstack-request-id"] = request_id
    version = getattr(g, "version", None)
    if version is not None:
        resp.headers[microversion.HEADER] = f"{microversion.SERVICE_TYPE} {version}"
        if resp.status_code < 400:
            # Upstream's value is the lower-case header name.
            resp.headers.add("Vary", microversion.HEADER.lower())
    return resp


def error_response(exc):
    """Render an ApiError as upstream does (JSON, or HTML when only HTML is accepted)."""
    req = flask.request
    version = getattr(flask.g, "version", None)
    item = {"status": exc.status, "title": exc.title, "detail": exc.body_detail()}
    if version is not None and version.matches((1, 23)):
        item["code"] = exc.code
    item["request_id"] = getattr(flask.g, "request_id", None) or "req-" + str(uuid.uuid4())
    if exc.status == 406 and version is None:
        item["max_version"] = microversion.MAX_VERSION
        item["min_version"] = microversion.MIN_VERSION
    if _prefers_html(req):
        body = (
            f"<html><head><title>{exc.status} {exc.title}</title></head><body>"
            f"<h1>{exc.status} {exc.title}</h1>{markupsafe.escape(exc.body_detail())}"
            "</body></html>"
        )
        resp = flask.Response(body, status=exc.status, content_type="text/html; charset=UTF-8")
    else:
        resp = flask.jsonify({"errors": [item]})
        resp.status_code = exc.status
    for name, value in exc.headers.items():
        resp.headers[name] = value
    return resp


def _prefers_html(req):
    """Upstream answers errors in HTML only to a client that asks for HTML, not JSON."""
    if not req.headers.get("Accept"):
        return False
    return req.accept_mimetypes.best_match(["application/json", "text/html"]) == "text/html" \
        and req.accept_mimetypes["application/json"] == 0


def _api_error(exc):
    return error_response(exc)


def _http_error(exc):
    if isinstance(exc, werkzeug.exceptions.MethodNotAllowed):
        allowed = sorted(m for m in (exc.valid_methods or []) if m not in ("HEAD", "OPTIONS"))
        err = errors.ApiError(
            405,
            "The method specified is not allowed for this resource.",
            headers={"Allow": ", ".join(allowed)},
            explanation=f"The method {flask.request.method} is not allowed for this "
            "resource. ",
        )
        return _method_not_allowed(err)
    if isinstance(exc, werkzeug.exceptions.NotFound):
        return error_response(errors.not_found(""))
    if isinstance(exc, werkzeug.exceptions.RequestEntityTooLarge):
        return error_response(errors.ApiError(413, ""))
    return error_response(errors.ApiError(exc.code or 500, exc.description or ""))


def _method_not_allowed(err):
    # webob's 405 detail has no trailing blanks: "<explanation>\n\n <detail>".
    resp = error_response(err)
    if resp.is_json:
        body = resp.get_json()
        body["errors"][0]["detail"] = f"{err.explanation}\n\n {err.detail}"
        resp.set_data(flask.json.dumps(body))
    return resp


def _unexpected_error(exc):
    LOG.exception("Uncaught exception")
    return error_response(errors.ApiError(500, f"Uncaught exception: {exc.__class__.__name__}"))
