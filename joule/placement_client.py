"""The placement REST client of the scheduler, the conductors and the power controller.

One client, one error model, one transport. It speaks microversion 1.39 plus
the extensions (candidate paging with node data, workload class on claims,
build requests, scheduling reports, nodes and twins) through a keystoneauth1
session and adapter configured in the ``[placement]`` group the way nova
configures its placement client: ``auth_type`` (``password`` with
``auth_url``, ``username``, ``password``, ``project_name`` ... in production,
so tokens are fetched and renewed; ``noauth`` in development, which sends the
token ``notused`` that placement's noauth2 treats as an admin),
``endpoint_override`` or the catalog (``region_name``, ``valid_interfaces``),
``timeout``, ``connect_retries``, ``status_code_retries``.

Every failure is one of the exceptions below, all ``PlacementError``:
``PlacementUnreachable`` (no answer), ``AuthenticationFailed`` (no token, or
placement refused it), ``BadRequest`` (400), ``NotFound`` (404), ``Conflict``
(409, with placement's error code), ``ServerError`` (5xx); any other
unexpected status is a plain ``PlacementError``.

Retries: a 503 (placement's answer while its database is unavailable, with
``Retry-After``) is retried for every method with bounded exponential
backoff, honouring ``Retry-After`` up to ``RETRY_AFTER_CAP`` seconds; the
request was not carried out, so retrying a write is safe. A connection error
is retried only for calls that are safe to repeat (reads, and the writes
marked idempotent), since a write whose answer was lost may have landed.

Every path segment is quoted with nothing kept safe (``url_path``), so an id
such as ``../traits/CUSTOM_X`` stays one segment of the route it targets.
"""

import email.utils
import logging
import time
import urllib.parse

import orjson
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import noauth as ks_noauth
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from oslo_config import cfg

from joule import vocabulary

LOG = logging.getLogger(__name__)

GROUP = "placement"
MICROVERSION = "1.39"
SERVICE_TYPE = "placement"
# Where placement-api listens by default; used when auth_type = noauth names
# no endpoint (a development machine).
DEFAULT_ENDPOINT = "http://127.0.0.1:8778"
DEFAULT_TIMEOUT = 30.0
DEFAULT_CONNECT_RETRIES = 2
DEFAULT_STATUS_CODE_RETRIES = 4
# Backoff between retries: BASE_DELAY * 2**n, at most MAX_DELAY; a Retry-After
# header is honoured up to RETRY_AFTER_CAP, so one call waits a bounded time.
BASE_DELAY = 0.5
MAX_DELAY = 8.0
RETRY_AFTER_CAP = 30.0
# A next link that repeats, or more pages than this, means the server's paging
# is broken; stop instead of looping forever.
MAX_PAGES = 100000
# The page the client asks of the listings it reads whole (GET /nodes,
# /workload_usages): placement's largest, so a power-controller tick at
# 10,000 nodes or fewer reads each listing in one call.
LISTING_PAGE = 10000

# Options of the clients this one replaced, read for one release. Renamed
# options are keystoneauth options with deprecated names; the token has no
# keystoneauth equivalent and maps explicitly (see token_of).
_DEPRECATED = {
    "placement_client": {
        "endpoint-override": "endpoint",
        "timeout": "timeout",
        "connect-retries": "connect_retries",
    },
    "power": {"endpoint-override": "placement_endpoint", "timeout": "request_timeout"},
}
_LEGACY_TOKEN = {"placement_client": "token", "power": "placement_token"}


# -- errors --------------------------------------------------------------------


class PlacementError(Exception):
    """Placement did not do what was asked. ``status`` is None when no answer came."""

    def __init__(self, method, path, status=None, code=None, detail="", items=()):
        self.method = method
        self.path = path
        self.status = status
        self.code = code
        self.detail = detail
        # Every error object of the body (a bulk extension request refused
        # for several items answers one per item, naming its instance).
        self.items = list(items)
        super().__init__(self._message())

    def __reduce__(self):
        # Rebuilt from its arguments, so that an error raised in a worker
        # process (the simulator's pool) reaches the parent intact rather
        # than as a pickling failure that breaks the pool.
        return (
            type(self),
            (self.method, self.path, self.status, self.code, self.detail, self.items),
        )

    def instances(self):
        """The instance uuids the error objects name (bulk build requests)."""
        named = []
        for item in self.items:
            if item.get("instance_uuid"):
                named.append(item["instance_uuid"])
            named.extend(item.get("instance_uuids") or ())
        return named

    def _message(self):
        return (
            f"placement answered {self.status} to {self.method} {self.path}: "
            f"{self.detail or '(no detail)'} [{self.code}]"
        )

    @property
    def route_missing(self):
        """The route does not exist on this placement (an older release)."""
        return self.status == 501 or (
            self.status == 404 and self.code in (None, "placement.undefined_code")
        )


class PlacementUnreachable(PlacementError):
    """No answer: refused, timed out, name unknown, connection dropped."""

    def __init__(self, method, path, endpoint, reason):
        self.endpoint = endpoint
        self.reason = reason
        super().__init__(method, path)

    def __reduce__(self):
        return (type(self), (self.method, self.path, self.endpoint, self.reason))

    def _message(self):
        return (
            f"placement at {self.endpoint} is unreachable "
            f"({self.method} {self.path}): {self.reason}"
        )


class AuthenticationFailed(PlacementError):
    """No token could be had from the identity service, or placement refused it."""

    def _message(self):
        return f"placement authentication failed ({self.method} {self.path}): {self.detail}"


class BadRequest(PlacementError):
    """400: the request is wrong; sending it again will not help."""


class NotFound(PlacementError):
    """404: the resource (or, see ``route_missing``, the route) does not exist."""


class Conflict(PlacementError):
    """409. ``code`` tells why: ``placement.concurrent_update`` (a race for a
    provider's capacity or generation), ``placement.inventory.inuse`` ...;
    ``consumer_conflict`` tells a changed consumer (someone else wrote its
    allocations) from a lost race."""

    @property
    def consumer_conflict(self):
        return "consumer generation conflict" in (self.detail or "")

    @property
    def lease_lost(self):
        """A write guarded by a build request's lease (``lease=``) refused:
        the writer no longer holds the record."""
        return self.code == LEASE_LOST


class ServerError(PlacementError):
    """5xx, after the retries of a 503."""


# The 409 of a write guarded by a build request's lease from a writer that
# no longer holds it, and the header that asks for the guard
# (placement.handlers.allocation).
LEASE_LOST = "placement.build_request.lease_lost"


def lease_header(lease):
    """The header of a write guarded by ``lease`` ((generation, owner) of a
    held build request), or {} for None."""
    if lease is None:
        return {}
    generation, owner = lease
    return {vocabulary.LEASE_HEADER: f"{int(generation)} {owner}"}


# Placement is not there for us (no answer, or our credentials refused),
# rather than placement said no: what a caller waits out or reports as
# "unavailable".
NOT_THERE = (PlacementUnreachable, AuthenticationFailed)

_BY_STATUS = {400: BadRequest, 401: AuthenticationFailed, 404: NotFound, 409: Conflict}


def _error_of(resp):
    """(code, detail) of an error body in placement's format."""
    try:
        err = resp.json()["errors"][0]
        # Placement's detail starts with webob's generic explanation; keep the
        # specific part only.
        detail = (err.get("detail") or "").split("\n\n", 1)[-1].strip()
        return err.get("code"), detail
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None, (resp.text or "").strip()[:500]


def _error_items(resp):
    try:
        items = resp.json()["errors"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _raise_for(method, path, resp):
    code, detail = _error_of(resp)
    status = resp.status_code
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else PlacementError)
    raise kind(method, path, status, code, detail, _error_items(resp))


# -- configuration -------------------------------------------------------------

# The auth types that mean "development, no identity service": ``noauth`` as
# upstream services spell it, ``none`` as keystoneauth does. Both are handled
# here rather than through keystoneauth's plugin registry, so the default
# needs no entry point (whose cache can go stale after an upgrade).
NO_AUTH_TYPES = ("noauth", "none")


def _deprecated_opts(legacy_groups):
    out = {}
    for legacy in legacy_groups:
        for new, old in _DEPRECATED[legacy].items():
            out.setdefault(new, []).append(cfg.DeprecatedOpt(old, group=legacy))
    return out


def _legacy_token_opt(legacy):
    return cfg.StrOpt(
        _LEGACY_TOKEN[legacy],
        secret=True,
        deprecated_for_removal=True,
        deprecated_reason="Use [placement] auth_type (password in production; noauth "
        "sends the development token).",
        help="Fixed X-Auth-Token sent to placement. When set and [placement] auth_type "
        "is noauth, it is sent instead of noauth's token.",
    )


def _session_and_adapter_opts(legacy_groups=()):
    """Fresh keystoneauth option objects with this client's defaults."""
    deprecated = _deprecated_opts(legacy_groups)
    session_opts = ks_loading.get_session_conf_options(deprecated_opts=deprecated)
    adapter_opts = ks_loading.get_adapter_conf_options(
        include_deprecated=False, deprecated_opts=deprecated
    )
    cfg.set_defaults(session_opts, timeout=DEFAULT_TIMEOUT)
    cfg.set_defaults(
        adapter_opts, service_type=SERVICE_TYPE, valid_interfaces=["internal", "public"]
    )
    return session_opts, adapter_opts


def register_opts(conf, legacy_group=None):
    """Register ``[placement]`` on ``conf``; ``legacy_group`` ("placement_client" or
    "power") names the service's old client options that are still read."""
    legacy_groups = (legacy_group,) if legacy_group else ()
    conf.register_group(cfg.OptGroup(GROUP, title="Placement API client"))
    deprecated = _deprecated_opts(legacy_groups)
    ks_loading.register_session_conf_options(conf, GROUP, deprecated_opts=deprecated)
    ks_loading.register_adapter_conf_options(
        conf, GROUP, include_deprecated=False, deprecated_opts=deprecated
    )
    ks_loading.register_auth_conf_options(conf, GROUP)
    conf.set_default("timeout", DEFAULT_TIMEOUT, group=GROUP)
    conf.set_default("service_type", SERVICE_TYPE, group=GROUP)
    conf.set_default("valid_interfaces", ["internal", "public"], group=GROUP)
    conf.set_default("auth_type", "noauth", group=GROUP)
    if legacy_group:
        conf.register_opt(_legacy_token_opt(legacy_group), group=legacy_group)


def list_opts(legacy_group=None):
    """[(group, opts)] for oslo-config-generator: ``[placement]`` with the
    session, adapter, auth type and password plugin options."""
    session_opts, adapter_opts = _session_and_adapter_opts((legacy_group,) if legacy_group else ())
    auth_opts = ks_loading.get_auth_common_conf_options()
    cfg.set_defaults(auth_opts, auth_type="noauth")
    opts = (
        session_opts
        + adapter_opts
        + auth_opts
        + ks_loading.get_auth_plugin_conf_options("password")
    )
    out = [(cfg.OptGroup(GROUP, title="Placement API client"), opts)]
    if legacy_group:
        out.append((cfg.OptGroup(legacy_group), [_legacy_token_opt(legacy_group)]))
    return out


def check_conf(conf):
    """Read the [placement] options and load the auth plugin once, so a bad value
    or an unknown auth_type fails at start-up with its name."""
    for opt in conf[GROUP]:
        conf[GROUP][opt]
    try:
        _load_auth(conf)
    except ks_exc.ClientException as exc:
        raise ValueError(
            f"[{GROUP}] auth_type {conf[GROUP].auth_type!r}: {_first_line(exc)}"
        ) from None


def _load_auth(conf):
    """The auth plugin of [placement]; None for the development types."""
    if conf[GROUP].auth_type in NO_AUTH_TYPES:
        return None
    return ks_loading.load_auth_from_conf_options(conf, GROUP)


def token_of(conf, legacy_group):
    """The fixed development token of the old options, or None."""
    if not legacy_group or _LEGACY_TOKEN[legacy_group] not in conf[legacy_group]:
        return None
    return conf[legacy_group][_LEGACY_TOKEN[legacy_group]]


# -- the client ----------------------------------------------------------------


def url_path(*segments):
    """``/seg1/seg2``, each segment quoted with nothing kept safe.

    ``.`` and ``..`` would still be dot segments after quoting (dots are
    unreserved); they go out as ``%2E`` so no id can climb out of its route.
    """
    return "".join("/" + _quote_segment(str(seg)) for seg in segments)


def _quote_segment(seg):
    quoted = urllib.parse.quote(seg, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _encoded(value):
    """The keyword that sends ``value`` as a JSON body: ``data``, encoded
    by orjson (the standard codec was a tenth of a scheduler's CPU, in its
    claims and reports), or ``json`` for what orjson refuses (integers past
    64 bits, keys that are not strings), which is encoded as before."""
    try:
        return {"data": orjson.dumps(value)}
    except (TypeError, orjson.JSONEncodeError):
        return {"json": value}


class PlacementClient:
    def __init__(
        self,
        adapter,
        connect_retries=DEFAULT_CONNECT_RETRIES,
        status_code_retries=DEFAULT_STATUS_CODE_RETRIES,
        base_delay=BASE_DELAY,
        retriable_status_codes=(503,),
        sleep=time.sleep,
    ):
        self.adapter = adapter
        self.connect_retries = connect_retries
        self.status_code_retries = status_code_retries
        self.base_delay = base_delay
        self.retriable_status_codes = tuple(int(c) for c in retriable_status_codes)
        self._sleep = sleep
        self._endpoint = None

    @classmethod
    def from_conf(cls, conf, legacy_group=None, session=None):
        """The client ``[placement]`` of ``conf`` describes.

        ``session`` is an optional ``requests.Session`` the transport uses
        (tests wrap it to inject faults).
        """
        g = conf[GROUP]
        auth = _load_auth(conf)
        endpoint = g.endpoint_override
        if auth is None:
            # Development: a fixed token (keystoneauth's noauth plugin sends
            # "notused"; the old options could name another) and an endpoint
            # that is never looked up in a catalog.
            endpoint = endpoint or DEFAULT_ENDPOINT
            legacy_token = token_of(conf, legacy_group)
            auth = (
                token_endpoint.Token(endpoint, legacy_token)
                if legacy_token
                else ks_noauth.NoAuth(endpoint=endpoint)
            )
        sess = ks_loading.load_session_from_conf_options(conf, GROUP, auth=auth, session=session)
        adapter = ks_loading.load_adapter_from_conf_options(
            conf, GROUP, session=sess, auth=auth, endpoint_override=endpoint
        )
        delay = g.status_code_retry_delay or g.connect_retry_delay or BASE_DELAY
        return cls(
            adapter,
            connect_retries=(
                DEFAULT_CONNECT_RETRIES if g.connect_retries is None else g.connect_retries
            ),
            status_code_retries=(
                DEFAULT_STATUS_CODE_RETRIES
                if g.status_code_retries is None
                else g.status_code_retries
            ),
            base_delay=delay,
            retriable_status_codes=g.retriable_status_codes or (503,),
        )

    @classmethod
    def for_endpoint(cls, endpoint, token="admin", timeout=DEFAULT_TIMEOUT, **kwargs):
        """A client with a fixed token (tools, tests, the in-process demo)."""
        auth = token_endpoint.Token(endpoint.rstrip("/"), token)
        sess = ks_session.Session(auth=auth, timeout=timeout)
        return cls(
            ks_adapter.Adapter(sess, auth=auth, endpoint_override=endpoint.rstrip("/")), **kwargs
        )

    @property
    def endpoint(self):
        """Where placement is, for messages (the catalog is read once)."""
        if self._endpoint is None:
            try:
                self._endpoint = (
                    self.adapter.endpoint_override or self.adapter.get_endpoint() or "(unknown)"
                ).rstrip("/")
            except ks_exc.ClientException:
                return "(not in the service catalog)"
        return self._endpoint

    # -- transport -------------------------------------------------------------

    def request(self, method, path, json=None, params=None, ok=(200,), retry=None, headers=None):
        """Send one request; return the response when its status is in ``ok``.

        ``path`` is built with ``url_path`` (or is a link placement gave).
        ``retry`` says whether a lost connection may be retried; by default
        only reads are. ``headers``: sent besides the usual ones.
        """
        if retry is None:
            retry = method == "GET"
        name = path.split("?", 1)[0]
        headers = {
            "accept": "application/json",
            "openstack-api-version": f"placement {MICROVERSION}",
            **(headers or {}),
        }
        body = {}
        if json is not None:
            body = _encoded(json)
            if "data" in body:
                headers["content-type"] = "application/json"
        connect_failures = status_retries = 0
        while True:
            try:
                resp = self.adapter.request(
                    path,
                    method,
                    **body,
                    params=params,
                    headers=headers,
                    raise_exc=False,
                    connect_retries=0,
                    status_code_retries=0,
                )
            except ks_exc.ConnectionError as exc:
                if not retry or connect_failures >= self.connect_retries:
                    raise PlacementUnreachable(method, name, self.endpoint, _reason(exc)) from exc
                self._sleep(self._backoff(connect_failures))
                connect_failures += 1
                continue
            except (
                ks_exc.AuthorizationFailure,
                ks_exc.Unauthorized,
                ks_exc.MissingAuthPlugin,
                ks_exc.EndpointNotFound,
                ks_exc.DiscoveryFailure,
                ks_exc.HttpError,
            ) as exc:
                # Raised while getting a token or looking placement up in the
                # catalog, before placement was asked.
                raise AuthenticationFailed(method, name, None, None, _first_line(exc)) from exc
            LOG.debug("%s %s -> %s", method, path, resp.status_code)
            if (
                resp.status_code in self.retriable_status_codes
                and status_retries < self.status_code_retries
            ):
                self._sleep(self._retry_after(resp, status_retries))
                status_retries += 1
                continue
            if resp.status_code not in ok:
                _raise_for(method, name, resp)
            return resp

    def _backoff(self, n):
        return min(self.base_delay * (2**n), MAX_DELAY)

    def _retry_after(self, resp, n):
        value = (resp.headers.get("Retry-After") or "").strip()
        if value:
            try:
                seconds = float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value) if value else None
                seconds = when.timestamp() - time.time() if when else None
            if seconds is not None:
                return max(0.0, min(seconds, RETRY_AFTER_CAP))
        return self._backoff(n)

    def _json(self, method, path, **kwargs):
        resp = self.request(method, path, **kwargs)
        if not resp.content:
            return None
        # orjson: a scheduler decodes every candidates page it walks, and
        # the standard codec was a fifth of its CPU in the bus benchmark.
        # Anything orjson refuses (it is stricter: NaN, integers past 64
        # bits) is decoded as before, so no body changes meaning.
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            return resp.json()

    def check(self):
        """One cheap authenticated read: raises when placement cannot be used."""
        self._json("GET", url_path("resource_classes"))

    # -- candidates ------------------------------------------------------------

    def candidate_pages(self, query, page_size, node_data=True, start=None):
        """Yield every page body of GET /allocation_candidates (``node_data``:
        with placement's node data; ``start``: a page_start fraction, the walk
        then begins at that point of the root-id range and wraps around)."""
        params = list(query) + [("page_size", str(page_size))]
        if node_data:
            params.append(("node_data", "true"))
        if start is not None:
            params.append(("page_start", str(start)))
        path = url_path("allocation_candidates") + "?" + urllib.parse.urlencode(params)
        seen = set()
        while path:
            if path in seen or len(seen) >= MAX_PAGES:
                raise PlacementError(
                    "GET",
                    "/allocation_candidates",
                    200,
                    None,
                    "paging did not terminate (a next link repeated)",
                )
            seen.add(path)
            body = self._json("GET", path)
            yield body
            path = None
            for link in body.get("links") or ():
                if link.get("rel") == "next":
                    path = self._same_route(link["href"], "/allocation_candidates")

    def _same_route(self, href, route):
        """A next link placement gave, as a path relative to the endpoint; refused
        unless it stays on ``route`` (placement writes its links from its root,
        which includes any prefix it is mounted under)."""
        parts = urllib.parse.urlsplit(href)
        prefix = urllib.parse.urlsplit(self.endpoint).path.rstrip("/")
        if parts.scheme or parts.netloc or parts.path not in (route, prefix + route):
            raise PlacementError("GET", route, 200, None, f"next link {href!r} leaves {route}")
        return f"{route}?{parts.query}" if parts.query else route

    def ensure_trait(self, name):
        """PUT /traits/{name}: create a custom trait unless it exists (both fine)."""
        self.request("PUT", url_path("traits", name), ok=(201, 204))

    # -- allocations -----------------------------------------------------------

    def put_allocations(
        self,
        consumer,
        allocation_request,
        project_id,
        user_id,
        consumer_generation=None,
        workload_class=None,
        consumer_type="INSTANCE",
        server_group=None,
        lease=None,
    ):
        """PUT /allocations/{consumer}: claim (generation None) or replace.

        ``server_group``: the group the consumer joins; placement checks its
        policy in the same write (409 ``placement.server_group.policy_violation``).
        ``lease``: (generation, owner) of the consumer's build request, held
        by the writer: written only while it still is (409 ``LEASE_LOST``).
        """
        body = {
            "allocations": allocation_request["allocations"],
            "consumer_generation": consumer_generation,
            "project_id": project_id,
            "user_id": user_id,
            "consumer_type": consumer_type,
        }
        if workload_class is not None:
            body["workload_class"] = workload_class
        if server_group is not None:
            body["server_group"] = server_group
        if allocation_request.get("mappings"):
            body["mappings"] = allocation_request["mappings"]
        self.request(
            "PUT",
            url_path("allocations", consumer),
            json=body,
            ok=(204,),
            headers=lease_header(lease),
        )

    def post_allocations(self, claims):
        """POST /allocations: claim for several consumers at once, all or none
        (since 1.13). ``claims``: [(consumer, allocation_request, project_id,
        user_id, workload_class, consumer_type, server_group)], each a new
        claim (consumer generation null); placement checks each server
        group's policy in the same write. A 409 means nothing was written."""
        body = {}
        for consumer, areq, project_id, user_id, wclass, ctype, group in claims:
            entry = {
                "allocations": areq["allocations"],
                "consumer_generation": None,
                "project_id": project_id,
                "user_id": user_id,
                "consumer_type": ctype,
            }
            if wclass is not None:
                entry["workload_class"] = wclass
            if group is not None:
                entry["server_group"] = group
            if areq.get("mappings"):
                entry["mappings"] = areq["mappings"]
            body[consumer] = entry
        self.request("POST", url_path("allocations"), json=body, ok=(204,))

    def report_build_outcome(self, host_uuid, succeeded):
        """POST /nodes/{uuid}/build_outcome: count a failed build on the host,
        or clear its count; returns the count now."""
        return self._json(
            "POST",
            url_path("nodes", host_uuid, "build_outcome"),
            json={"succeeded": bool(succeeded)},
        )["failed_builds"]

    def report_build_outcomes(self, outcomes):
        """POST /nodes/build_outcomes: many reports, all or none, in order.
        ``outcomes``: (host uuid, succeeded) pairs; returns {host: count}."""
        return self._json(
            "POST",
            url_path("nodes", "build_outcomes"),
            json={"outcomes": [{"uuid": h, "succeeded": bool(ok)} for h, ok in outcomes]},
        )["failed_builds"]

    def get_server_group(self, group_uuid):
        """GET /server_groups/{uuid}: policy, rules, members and their hosts."""
        return self._json("GET", url_path("server_groups", group_uuid))

    def get_allocations(self, consumer):
        """(allocations {rp: {"resources": ...}}, consumer_generation or None)."""
        body = self._json("GET", url_path("allocations", consumer))
        return body.get("allocations", {}), body.get("consumer_generation")

    def consumer_allocations(self, consumer):
        """GET /allocations/{consumer} as answered: ``allocations``, and
        while it holds any its ``project_id``, ``user_id``,
        ``consumer_generation`` and ``consumer_type``."""
        return self._json("GET", url_path("allocations", consumer))

    def delete_allocations(self, consumer, lease=None):
        """Unclaim; idempotent (404, nothing to delete, counts as success).
        ``lease``: as for put_allocations."""
        self.request(
            "DELETE",
            url_path("allocations", consumer),
            ok=(204, 404),
            retry=True,
            headers=lease_header(lease),
        )

    # -- scheduling reports, build requests --------------------------------------

    def put_report(self, request_id, project_id, report):
        self.request(
            "PUT",
            url_path("scheduling_reports", request_id),
            json={"project_id": project_id, "report": report},
            ok=(200, 201),
            retry=True,
        )

    def put_reports(self, reports):
        """POST /scheduling_reports: several reports, [(request_id,
        project_id, report)], in one write (all or none)."""
        self.request(
            "POST",
            url_path("scheduling_reports"),
            json={
                "reports": [
                    {"request_id": r, "project_id": p, "report": body} for r, p, body in reports
                ]
            },
            ok=(200,),
            retry=True,
        )

    def create_build_request(self, instance_uuid, request_id, workload_class, spec):
        """Record a pending build request; an existing one (a retry) is fine."""
        resp = self.request(
            "POST",
            url_path("build_requests"),
            json={
                "instance_uuid": instance_uuid,
                "request_id": request_id,
                "workload_class": workload_class,
                "spec": spec,
            },
            ok=(201, 409),
        )
        return resp.status_code == 201

    def finish_build_request(self, instance_uuid, status, host_uuid=None, reason=None):
        body = {"status": status, "host_uuid": host_uuid}
        if reason is not None:
            body["reason"] = reason[:60000]
        self.request("PUT", url_path("build_requests", instance_uuid), json=body, retry=True)

    def get_build_request(self, instance_uuid):
        """GET /build_requests/{uuid}: the record.

        :raise PlacementError: 404 when there is none.
        """
        return self._json("GET", url_path("build_requests", instance_uuid))

    def set_instance_state(self, instance_uuid, state, host_uuid, exit_status=None, reason=None):
        """PUT /build_requests/{uuid}/instance_state: how the placed instance
        ended on ``host_uuid``; the record.

        :raise Conflict: it ended otherwise already, or is not placed there.
        """
        body = {"state": state, "host_uuid": host_uuid, "exit_status": exit_status}
        if reason is not None:
            body["reason"] = reason[:4096]
        return self._json(
            "PUT", url_path("build_requests", instance_uuid, "instance_state"), json=body
        )

    def list_build_requests(self, **filters):
        """Every build request the filters select (all the pages)."""
        params = {k: v for k, v in filters.items() if v is not None}
        return self.all_pages("build_requests", "build_requests", params)

    def all_pages(self, route, key, params=None):
        """The ``key`` items of every page of a listing that pages with
        ``limit``/``marker`` and ``links`` (placement.paging), in order: a
        list, or one mapping when the pages hold mappings (GET /workload_usages)."""
        path = url_path(route)
        if params:
            path += "?" + urllib.parse.urlencode(sorted(params.items()))
        items, seen = None, set()
        while path:
            if path in seen or len(seen) >= MAX_PAGES:
                raise PlacementError(
                    "GET", "/" + route, 200, None, "paging did not terminate (a next link repeated)"
                )
            seen.add(path)
            body = self._json("GET", path)
            if items is None:
                items = body[key]
            elif isinstance(items, dict):
                items.update(body[key])
            else:
                items.extend(body[key])
            path = None
            for link in body.get("links") or ():
                if link.get("rel") == "next":
                    path = self._same_route(link["href"], "/" + route)
        return items

    # -- nodes (the power controller's reads and writes) ---------------------------

    def list_nodes(self, cell=None):
        """Every node (root provider with node data, of ``cell``), hardware and
        twin inline, in placement's order (all the pages)."""
        params = {"limit": str(LISTING_PAGE)}
        if cell is not None:
            params["cell"] = cell
        return self.all_pages("nodes", "nodes", params)

    def workload_usages(self, in_tree=None):
        """{root provider uuid: {workload class: running consumers}} (all the pages)."""
        params = {"limit": str(LISTING_PAGE)}
        if in_tree is not None:
            params["in_tree"] = in_tree
        return self.all_pages("workload_usages", "resource_providers", params)

    def count_build_requests(self, **filters):
        """How many build requests the filters select (GET /build_requests/counts)."""
        params = {k: v for k, v in filters.items() if v is not None}
        return self._json("GET", url_path("build_requests", "counts"), params=params)["count"]

    def provider_inventories(self, uuid):
        """{resource class: inventory} of one provider."""
        return self._json("GET", url_path("resource_providers", uuid, "inventories"))["inventories"]

    # A twin is about 260 bytes of JSON: 1,000 of them stay far below placement's
    # default 1 MiB body limit ([api] max_request_body_size), which a 5,000-node
    # first tick (about 1.3 MB in one body) exceeded.
    TWINS_PER_REQUEST = 1000

    def write_twins(self, twins):
        """POST /nodes/twins in chunks; returns the stored twins.

        Each chunk is all or nothing. A failure part-way leaves the earlier
        chunks written: every twin carries its generation, so the controller's
        next tick re-reads and re-plans from what is stored.
        """
        stored = []
        for start in range(0, len(twins), self.TWINS_PER_REQUEST):
            chunk = twins[start : start + self.TWINS_PER_REQUEST]
            stored.extend(
                self._json("POST", url_path("nodes", "twins"), json={"twins": chunk})["twins"]
            )
        return stored

    def put_node(self, uuid, **record):
        return self._json("PUT", url_path("nodes", uuid), json=record, ok=(200, 201), retry=True)

    def put_hardware(self, uuid, hardware):
        return self._json(
            "PUT", url_path("nodes", uuid, "hardware"), json=hardware, ok=(200, 201), retry=True
        )

    # -- the node agent's registration (nova's update_provider_tree calls) --------

    def find_provider(self, name):
        """The provider named ``name`` (uuid, name, generation ...), or None."""
        found = self._json("GET", url_path("resource_providers"), params={"name": name})
        providers = found["resource_providers"]
        return providers[0] if providers else None

    def get_provider(self, uuid):
        """GET /resource_providers/{uuid}: the provider (uuid, name, ...).

        :raise PlacementError: 404 when there is none.
        """
        return self._json("GET", url_path("resource_providers", uuid))

    def create_provider(self, name):
        """POST /resource_providers: a new root provider; returns it."""
        return self._json("POST", url_path("resource_providers"), json={"name": name})

    def get_inventories(self, uuid):
        """(provider generation, {resource class: inventory})."""
        body = self._json("GET", url_path("resource_providers", uuid, "inventories"))
        return body["resource_provider_generation"], body["inventories"]

    def put_inventories(self, uuid, generation, inventories):
        """Replace every inventory of a provider; returns its new generation.

        :raise Conflict: ``placement.concurrent_update`` (the generation moved)
            or ``placement.inventory.inuse`` (below what is allocated).
        """
        body = self._json(
            "PUT",
            url_path("resource_providers", uuid, "inventories"),
            json={"resource_provider_generation": generation, "inventories": inventories},
        )
        return body["resource_provider_generation"]

    def get_traits(self, uuid):
        """(provider generation, [trait])."""
        body = self._json("GET", url_path("resource_providers", uuid, "traits"))
        return body["resource_provider_generation"], body["traits"]

    def put_traits(self, uuid, generation, traits):
        """Replace the traits of a provider; returns its new generation."""
        body = self._json(
            "PUT",
            url_path("resource_providers", uuid, "traits"),
            json={"resource_provider_generation": generation, "traits": sorted(traits)},
        )
        return body["resource_provider_generation"]

    def ensure_resource_class(self, name):
        """PUT /resource_classes/{name}: create a custom class unless it exists."""
        self.request("PUT", url_path("resource_classes", name), ok=(201, 204), retry=True)

    def get_node(self, uuid):
        """GET /nodes/{uuid}: the node with hardware and twin; None when it has none."""
        try:
            return self._json("GET", url_path("nodes", uuid))
        except NotFound as exc:
            if exc.code == "placement.node.not_found":
                return None
            raise

    def heartbeat(self, uuid, twin_status=None):
        """POST /nodes/{uuid}/heartbeat: the node is alive (placement stamps its
        own clock); ``twin_status`` is what the agent applied and measured.
        Returns {"heartbeat_at", "twin"}: the twin (spec and status) or None."""
        body = {} if twin_status is None else {"twin_status": twin_status}
        return self._json("POST", url_path("nodes", uuid, "heartbeat"), json=body, retry=True)


def _first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _reason(exc):
    """A short cause instead of urllib3's nested retry message."""
    if isinstance(exc, ks_exc.ConnectTimeout):
        return "no answer in time"
    text = str(exc)
    for marker, short in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "unknown host name"),
        ("nodename nor servname", "unknown host name"),
        ("Temporary failure in name resolution", "unknown host name"),
        ("Connection aborted", "connection dropped"),
        ("RemoteDisconnected", "connection dropped"),
        ("timed out", "no answer in time"),
    ):
        if marker in text:
            return short
    return _first_line(exc)
