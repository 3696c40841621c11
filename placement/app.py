"""The Flask application factory.

Request pipeline, in upstream's order (outermost first): request id ->
access log -> metrics (/metrics) -> healthcheck (/healthcheck) -> CORS ->
keystone -> microversion -> auth (noauth2) -> context -> accept check ->
handler. Every error, including routing errors and unexpected exceptions,
leaves as upstream's JSON error body.
"""

import json
import logging
import uuid

import flask
import markupsafe
import sqlalchemy as sa
import werkzeug.exceptions

from placement import conf as conf_mod
from placement import context as context_mod
from placement import db as db_mod
from placement import disconnect
from placement import errors
from placement import healthcheck
from placement import host
from placement import metrics
from placement import microversion
from placement import migration
from placement import policy
from placement import request_id
from placement import request_log
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


def create_app(conf=None, db=None, sync=None, check_database=True):
    """Build the WSGI app.

    :param conf: an oslo.config ConfigOpts (placement.conf.make_conf()).
    :param db: an existing placement.db.Database to share (tests, the demo).
    :param sync: run migrations and sync standard classes/traits first; by
        default when ``sync_on_startup`` is set or the database is SQLite.
        Without it a database not at the head revision raises
        ``migration.SchemaNotCurrent`` naming the command to run.
    :param check_database: False when the caller already did all of that
        (placement-api's master, before forking its workers): the app then
        touches no database until a request comes, so a worker (re)started
        while the database is down boots and answers 503s.
    """
    conf = conf or conf_mod.make_conf()
    if db is None:
        db = db_mod.Database.from_conf(conf, conf_mod.connection_url(conf))
    if sync is None:
        sync = conf.placement_database.sync_on_startup or not db.is_postgres
    if check_database:
        if sync:
            migration.check_current(db, behind_ok=True)
            migration.upgrade(db)
        else:
            # An empty or old database would otherwise fail at the first
            # request that touches a missing table or column.
            migration.check_current(db)
        db_mod.sync_standard_classes_and_traits(db)

    app = flask.Flask("placement")
    app.json.sort_keys = False
    # A chunked body (no Content-Length) is cut off as soon as it passes the
    # limit: werkzeug raises RequestEntityTooLarge while the handler reads it.
    app.config["MAX_CONTENT_LENGTH"] = conf.api.max_request_body_size
    app.extensions["placement"] = Deps(conf, db, policy.Enforcer(conf))

    app.before_request(_before_request)
    app.after_request(_after_request)
    app.teardown_request(_teardown_request)
    app.register_error_handler(errors.ApiError, _api_error)
    app.register_error_handler(sa.exc.SQLAlchemyError, _database_error)
    app.register_error_handler(disconnect.ClientDisconnected, _client_disconnected)
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
    # Operator endpoints, outside auth: a load balancer or a scraper has no token.
    app.wsgi_app = healthcheck.HealthcheckLayer(app.wsgi_app, conf)
    if conf.metrics.enabled:
        app.wsgi_app = metrics.MetricsMiddleware(app.wsgi_app, app.url_map, conf, db.engine)
    app.wsgi_app = request_log.RequestLogMiddleware(app.wsgi_app)
    app.wsgi_app = request_id.RequestIdMiddleware(app.wsgi_app)
    return app


def _before_request():
    g = flask.g
    req = flask.request
    g.request_id = req.environ.setdefault(request_id.ENVIRON_KEY, request_id.new_id())
    g.version = None
    try:
        g.version = microversion.extract(req.headers)
    except ValueError as exc:
        raise errors.ApiError(406, f"Invalid microversion: {exc}", explanation=_not_acceptable(req))
    except TypeError as exc:
        raise errors.ApiError(400, f"Invalid microversion: {exc}")

    # A write about to commit for a client that hung up rolls back instead.
    g.commit_guard_token = db_mod.before_commit.set(disconnect.commit_guard(req.environ))

    deps = flask.current_app.extensions["placement"]
    environ = req.environ
    noauth = deps.conf.api.auth_strategy == "noauth2"
    if noauth and not deps.conf.api.allow_insecure_noauth:
        host.check_loopback(environ)
    # Refused before anything reads it: a declared length over the limit.
    limit = deps.conf.api.max_request_body_size
    if (req.content_length or 0) > limit:
        raise errors.ApiError(
            413,
            f"The request body is larger than {limit} bytes ([api] max_request_body_size).",
            code=errors.REQUEST_TOO_LARGE,
            headers={"Connection": "close"},
        )
    if noauth and req.path != "/":
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

    # PostgreSQL text cannot hold NUL; a lookup with one would be a driver error.
    # A path with one names nothing that can exist (404); a query is malformed (400).
    if "\x00" in req.path:
        raise errors.not_found("No resource can have a NUL character in its path.")
    if any("\x00" in key or "\x00" in value for key, value in req.args.items(multi=True)):
        raise errors.bad_request("NUL characters are not allowed in the query string.")

    # What follows upstream does in its handlers (their errors carry Vary).
    g.dispatched = True

    # Upstream checks Accept in the handlers, after routing: an unknown path or a
    # wrong method answers 404/405 whatever the Accept header says.
    if req.method == "GET" and req.headers.get("Accept") and req.routing_exception is None:
        if req.accept_mimetypes.best_match(["application/json"]) is None:
            raise errors.ApiError(
                406, "Only application/json is provided", explanation=_not_acceptable(req)
            )

    # Upstream routes only the methods it declares: HEAD is not one of them
    # (Flask would answer HEAD with the GET handler).
    if req.method == "HEAD" and req.routing_exception is None:
        raise _method_not_allowed()


def _not_acceptable(req):
    """webob's 406 explanation, naming the Accept header upstream saw."""
    return (
        "The resource could not be generated that was acceptable to your browser "
        f"(content of type {_effective_accept(req)}."
    )


def _effective_accept(req):
    # Upstream's request log middleware turns a missing or "*/*" Accept into
    # application/json before anything else looks at it.
    accept = req.headers.get("Accept")
    return "application/json" if not accept or accept == "*/*" else accept


def _method_not_allowed():
    """A 405 naming the methods of the requested path, in routes.py order."""
    req = flask.request
    adapter = flask.current_app.url_map.bind_to_environ(req.environ)
    allowed = []
    for method in ("GET", "PUT", "POST", "DELETE", "PATCH"):
        try:
            rule, _args = adapter.match(method=method, return_rule=True)
        except werkzeug.exceptions.HTTPException:
            continue
        allowed = list(routes.ROUTES.get(rule.rule, {}))
        break
    return _method_not_allowed_error(allowed)


def _method_not_allowed_error(allowed):
    return errors.ApiError(
        405,
        "The method specified is not allowed for this resource.",
        headers={"Allow": ", ".join(allowed)},
        explanation=f"The method {flask.request.method} is not allowed for this resource.",
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
        if _varies(resp):
            # Upstream's value is the lower-case header name.
            resp.headers.add("Vary", microversion.HEADER.lower())
    return resp


def _varies(resp):
    """Whether upstream would send Vary: what its handlers answer, errors
    included, but not what its outer layers refuse first (auth, bad
    microversion, content-length, unknown path) nor a policy denial."""
    if resp.status_code < 400:
        return True
    if not getattr(flask.g, "dispatched", False) or resp.status_code == 403:
        return False
    return not isinstance(flask.request.routing_exception, werkzeug.exceptions.NotFound)


def error_response(exc):
    """Render an ApiError as upstream does: JSON, HTML or plain text by Accept."""
    req = flask.request
    version = getattr(flask.g, "version", None)
    request_id = getattr(flask.g, "request_id", None) or "req-" + str(uuid.uuid4())
    items = []
    for one in [exc, *exc.also]:
        item = {"status": one.status, "title": one.title, "detail": one.body_detail()}
        if version is not None and version.matches((1, 23)):
            item["code"] = one.code
        item["request_id"] = request_id
        item.update(one.extra)
        items.append(item)
    item = items[0]
    if exc.status == 406 and version is None:
        item["max_version"] = microversion.MAX_VERSION
        item["min_version"] = microversion.MIN_VERSION
    media_type = _error_media_type(req)
    status = f"{exc.status} {exc.title}"
    if media_type == "text/html":
        esc = markupsafe.escape
        body = (
            f"<html>\n <head>\n  <title>{status}</title>\n </head>\n <body>\n"
            f"  <h1>{status}</h1>\n  {esc(exc.head())}<br /><br />\n{esc(exc.detail)}\n\n"
            " </body>\n</html>"
        )
        resp = flask.Response(body, status=exc.status, content_type="text/html; charset=UTF-8")
    elif media_type == "text/plain":
        resp = flask.Response(
            f"{status}\n\n{exc.body_detail()}",
            status=exc.status,
            content_type="text/plain; charset=UTF-8",
        )
    else:
        # json.dumps, not jsonify: upstream's spacing and no trailing newline.
        resp = flask.Response(
            json.dumps({"errors": items}), status=exc.status, content_type="application/json"
        )
    for name, value in exc.headers.items():
        resp.headers[name] = value
    return resp


def _error_media_type(req):
    """webob's choice for an error body: the better of text/html and
    application/json by quality (HTML on a tie, e.g. a browser's Accept),
    text/plain when the client accepts neither."""
    accept = _effective_accept(req)
    q_html = _quality(req, accept, "text/html")
    q_json = _quality(req, accept, "application/json")
    if q_html == 0 and q_json == 0:
        return "text/plain"
    return "text/html" if q_html >= q_json else "application/json"


def _quality(req, accept, offer):
    """Quality of ``offer`` under its most specific matching media range (RFC 7231)."""
    if accept == "application/json":
        return 1.0 if offer == "application/json" else 0.0
    kind = offer.split("/")[0]
    best = None  # (specificity, quality)
    for value, quality in req.accept_mimetypes:
        value = value.split(";")[0].strip().lower()
        if value == offer:
            specificity = 2
        elif value == f"{kind}/*":
            specificity = 1
        elif value == "*/*":
            specificity = 0
        else:
            continue
        if best is None or specificity > best[0]:
            best = (specificity, quality)
    return best[1] if best else 0.0


def _api_error(exc):
    return error_response(exc)


def _http_error(exc):
    if isinstance(exc, werkzeug.exceptions.MethodNotAllowed):
        if exc is flask.request.routing_exception:
            return error_response(_method_not_allowed())
        # A handler refusing a method at this microversion names what is allowed.
        allowed = [m for m in (exc.valid_methods or []) if m not in ("HEAD", "OPTIONS")]
        return error_response(_method_not_allowed_error(allowed))
    if isinstance(exc, werkzeug.exceptions.NotFound):
        return error_response(errors.not_found(""))
    if isinstance(exc, werkzeug.exceptions.RequestEntityTooLarge):
        limit = flask.current_app.config["MAX_CONTENT_LENGTH"]
        return error_response(
            errors.ApiError(
                413,
                f"The request body is larger than {limit} bytes ([api] max_request_body_size).",
                code=errors.REQUEST_TOO_LARGE,
                headers={"Connection": "close"},
            )
        )
    return error_response(errors.ApiError(exc.code or 500, exc.description or ""))


def _teardown_request(_exc):
    token = flask.g.pop("commit_guard_token", None)
    if token is not None:
        db_mod.before_commit.reset(token)


def _database_error(exc):
    """The database cannot serve now (down, refusing connections, a time limit
    ran out): 503 with Retry-After, and one log line, no traceback."""
    reason = db_mod.unavailable_reason(exc)
    if reason is None:
        return _unexpected_error(exc)
    req = flask.request
    # The request id is on every line already (placement/request_log.py).
    LOG.warning("%s %s: database unavailable: %s", req.method, req.path, reason)
    return error_response(
        errors.ApiError(
            503,
            "The database is unavailable; retry later.",
            code=errors.DATABASE_UNAVAILABLE,
            headers={"Retry-After": str(errors.DATABASE_RETRY_AFTER)},
        )
    )


def _client_disconnected(_exc):
    req = flask.request
    LOG.warning(
        "%s %s: client closed the connection before the write committed; rolled back",
        req.method,
        req.path,
    )
    # Nobody reads this; the access log shows nginx's "client closed request".
    return error_response(errors.ApiError(499, "Client closed the connection."))


def _unexpected_error(exc):
    LOG.exception("Uncaught exception")
    return error_response(errors.ApiError(500, f"Uncaught exception: {exc.__class__.__name__}"))
