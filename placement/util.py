"""Request and response helpers shared by every handler.

``extract_json`` is the one place where a request body becomes either a 400
(or 415) or validated data; ``json_response`` is the one place where a body
goes out, with the 1.15 caching headers.
"""

import datetime
import email.utils
import json
import re
import uuid as uuid_lib

import flask
import jsonschema

from placement import errors
from placement import json_codec
from placement import schema_check

UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)

_FORMAT_CHECKER = jsonschema.FormatChecker()

# Deepest nesting of lists and objects a request body may have. Placement's own
# bodies nest at most 6 levels; the free-form ones (build request specs,
# scheduling reports) get room to spare.
MAX_JSON_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


@_FORMAT_CHECKER.checks("uuid")
def _is_uuid(value):
    # Upstream accepts the dashed and the undashed forms of a UUID.
    return not isinstance(value, str) or bool(UUID_RE.match(value))


def deps():
    """The app's database, configuration and enforcer (set up by create_app)."""
    return flask.current_app.extensions["placement"]


def version():
    return flask.g.version


def want(major, minor):
    """True when the request's microversion is at least major.minor."""
    return flask.g.version.matches((major, minor))


def require_version(major, minor):
    """A plain 404 (empty detail) below major.minor, where the endpoint does
    not exist yet. Called first, before policy, content type or body, as
    upstream's version dispatch comes before all of them."""
    if not want(major, minor):
        raise errors.not_found("")


def context():
    return flask.g.context


def is_uuid(value):
    return isinstance(value, str) and bool(UUID_RE.match(value))


def normalize_uuid(value):
    """Dashed lower-case form of an accepted UUID (upstream stores it that way)."""
    return str(uuid_lib.UUID(value))


_CHECKERS = schema_check.Checkers(_FORMAT_CHECKER, UUID_RE.pattern)


def _validate(instance, schema):
    """Raise jsonschema's ValidationError (its best match) unless
    ``instance`` matches ``schema``; fast for valid ones
    (placement.schema_check)."""
    _CHECKERS.check(instance, schema)


def extract_json(schema, body=None):
    """Parse and validate the JSON request body.

    :raise ApiError 415: the content type is not application/json.
    :raise ApiError 400: the body is not JSON or does not match ``schema``.
    """
    req = flask.request
    if body is None:
        if req.mimetype != "application/json":
            shown = req.mimetype or "None"
            raise errors.ApiError(
                415,
                f"The media type {shown} is not supported, use application/json",
                explanation="The request media type "
                f"{req.headers.get('Content-Type') or shown} is not supported by this server.",
            )
        raw = req.get_data(as_text=False)
        try:
            body = json_codec.loads_body(raw, _standard_loads)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.bad_request(f"Malformed JSON: {exc}")
        except RecursionError:
            raise errors.bad_request(
                f"Malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels"
            ) from None
        # Nesting is bounded before validation, whose recursion (and the
        # formatting of its error) would otherwise fail from ~400 levels on.
        # Most bodies cannot nest that deep: they hold fewer brackets.
        if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _too_deep(body):
            raise errors.bad_request(f"Malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels")
        # PostgreSQL text cannot hold NUL, and a lone UTF-16 surrogate ("\ud800")
        # cannot be encoded for any database: refuse both before SQL sees them.
        # Strict JSON can only carry either as an escape, so most bodies skip the walk.
        if (b"\\u0000" in raw or _SURROGATE_ESCAPE.search(raw)) and _has_bad_char(body):
            raise errors.bad_request(
                "JSON does not validate: strings must not contain NUL "
                "characters or unpaired UTF-16 surrogates"
            )
    try:
        _validate(body, schema)
    except jsonschema.ValidationError as exc:
        raise errors.bad_request(f"JSON does not validate: {exc}")
    return body


def _standard_loads(raw):
    return json.loads(raw.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float)


def _no_constant(name):
    # Python's json takes NaN and Infinity, which JSON has not: NaN passed every
    # schema bound (an allocation_ratio of NaN was a 500) and came back out as
    # invalid JSON.
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


def _has_bad_char(value):
    """Whether any key or string holds NUL or a lone surrogate (the decoder
    joins a valid pair into one character, so what remains is unpaired)."""
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if _BAD_CHAR.search(value):
                return True
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _too_deep(value):
    """Whether ``value`` nests lists/objects deeper than MAX_JSON_DEPTH (no recursion)."""
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        if depth > MAX_JSON_DEPTH:
            return True
        stack.extend((item, depth + 1) for item in value)
    return False


def validate_query(schema, params=None):
    """Validate the query string (a dict of single values) against ``schema``."""
    if params is None:
        # webob (upstream) keeps the last value of a repeated key.
        params = {key: values[-1] for key, values in flask.request.args.lists()}
    try:
        _validate(params, schema)
    except jsonschema.ValidationError as exc:
        raise errors.bad_request(f"Invalid query string parameters: {exc}")
    return params


def http_date(when):
    if when is None:
        when = datetime.datetime.now(datetime.UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return email.utils.format_datetime(when, usegmt=True)


def last_modified_of(rows, default_now=True):
    """Latest of updated_at/created_at over ``rows`` (mappings or objects)."""
    latest = None
    for row in rows:
        get = row.get if isinstance(row, dict) else (lambda k, r=row: getattr(r, k, None))
        stamp = get("updated_at") or get("created_at")
        if stamp is not None and (latest is None or stamp > latest):
            latest = stamp
    if latest is None and default_now:
        latest = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return latest


def json_response(body, status=200, last_modified=None, headers=None, text=None):
    """A JSON response; from 1.15 with last-modified and cache-control headers.

    ``last_modified`` is a datetime or the string "now"; None means no header.
    ``text``: the body already encoded as JSON (``body`` is then ignored).
    """
    resp = flask.Response(
        json.dumps(body) if text is None else text, status=status, content_type="application/json"
    )
    if want(1, 15) and last_modified is not None:
        when = None if last_modified == "now" else last_modified
        resp.headers["last-modified"] = http_date(when)
        resp.headers["cache-control"] = "no-cache"
    for name, value in (headers or {}).items():
        resp.headers[name] = value
    return resp


def empty_response(status=204, headers=None):
    resp = flask.Response(status=status)
    # A 204 carries no content type (upstream removes it too).
    resp.headers.pop("Content-Type", None)
    for name, value in (headers or {}).items():
        resp.headers[name] = value
    return resp


def query_values(name):
    """Every value of a query parameter, in order."""
    return flask.request.args.getlist(name)


def single_query_value(name):
    """The one value of ``name`` or None; a repeated key is a 400 with upstream's code."""
    values = flask.request.args.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise errors.bad_request(
            f"Query parameter {name!r} is specified multiple times.",
            errors.ILLEGAL_DUPLICATE_QUERYPARAM,
        )
    return values[0]
