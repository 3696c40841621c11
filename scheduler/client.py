"""Placement REST client of the scheduler and the conductor.

Speaks microversion 1.39 (consumer types, mappings) plus the extensions:
candidate paging with node data, workload class on claims, build requests and
scheduling reports. Every failure becomes one of three exceptions with a
message an operator can act on: ``PlacementUnreachable`` (no answer),
``ClaimConflict`` (409 on a claim: a race was lost or the consumer changed),
``PlacementError`` (any other unexpected status).
"""

import logging
import time
import urllib.parse

import requests

LOG = logging.getLogger(__name__)

MICROVERSION = "1.39"
# A next link that repeats, or more pages than this, means the server's paging
# is broken; stop instead of looping forever.
MAX_PAGES = 100000


class PlacementUnreachable(Exception):
    """Placement did not answer (refused, timed out, connection dropped)."""


class PlacementError(Exception):
    def __init__(self, method, path, status, code, detail):
        self.method = method
        self.path = path
        self.status = status
        self.code = code
        self.detail = detail
        super().__init__(f"placement answered {status} to {method} {path}: "
                         f"{detail or '(no detail)'} [{code}]")


class ClaimConflict(PlacementError):
    """409 on a claim. ``consumer_conflict`` tells a changed consumer (someone
    else wrote its allocations) from a lost race for the provider's capacity."""

    @property
    def consumer_conflict(self):
        return "consumer generation conflict" in (self.detail or "")


def _error_of(resp):
    try:
        err = resp.json()["errors"][0]
        detail = err.get("detail", "")
        # Upstream's detail starts with webob's generic explanation; keep the
        # specific part only.
        detail = detail.split("\n\n", 1)[-1].strip()
        return err.get("code"), detail
    except (ValueError, KeyError, IndexError, TypeError):
        return None, resp.text[:500]


class PlacementClient:
    def __init__(self, endpoint, token="admin", timeout=30.0, connect_retries=2,
                 session=None):
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.connect_retries = connect_retries
        self.session = session or requests.Session()

    @classmethod
    def from_conf(cls, conf, session=None):
        c = conf.placement_client
        return cls(c.endpoint, c.token, c.timeout, c.connect_retries, session=session)

    # -- transport -----------------------------------------------------------

    def request(self, method, path, json=None, params=None, ok=(200,), retry=None):
        """Send one request; return the response when its status is in ``ok``.

        Reads (and writes the caller marks idempotent with ``retry=True``) are
        retried ``connect_retries`` times when placement cannot be reached.
        """
        url = self.endpoint + path
        headers = {"x-auth-token": self.token, "accept": "application/json",
                   "openstack-api-version": f"placement {MICROVERSION}"}
        if retry is None:
            retry = method == "GET"
        attempts = 1 + (self.connect_retries if retry else 0)
        for attempt in range(attempts):
            try:
                resp = self.session.request(method, url, json=json, params=params,
                                            headers=headers, timeout=self.timeout)
                break
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt + 1 >= attempts:
                    raise PlacementUnreachable(
                        f"placement at {self.endpoint} is unreachable "
                        f"({method} {path.split('?', 1)[0]}): {_reason(exc, self.timeout)}"
                    ) from exc
                time.sleep(min(0.2 * (attempt + 1), 1.0))
        if resp.status_code not in ok:
            code, detail = _error_of(resp)
            err_cls = ClaimConflict if resp.status_code == 409 else PlacementError
            raise err_cls(method, path.split("?", 1)[0], resp.status_code, code, detail)
        return resp

    # -- candidates ----------------------------------------------------------

    def candidate_pages(self, query, page_size):
        """Yield every page body of GET /allocation_candidates with node data."""
        params = list(query) + [("page_size", str(page_size)), ("node_data", "true")]
        path = "/allocation_candidates?" + urllib.parse.urlencode(params)
        seen = set()
        while path:
            if path in seen or len(seen) >= MAX_PAGES:
                raise PlacementError("GET", "/allocation_candidates", 200, None,
                                     "paging did not terminate (a next link repeated)")
            seen.add(path)
            body = self.request("GET", path).json()
            yield body
            path = None
            for link in body.get("links") or ():
                if link.get("rel") == "next":
                    path = self._endpoint_path(link["href"])

    def _endpoint_path(self, href):
        """``href`` (a link placement gave) as a path under our endpoint.

        Placement's links carry its mount point (``/placement/...`` behind a
        prefix); the endpoint already ends with it, so the link is resolved
        against the endpoint and must stay under it: a link elsewhere is
        refused, never followed with our token.
        """
        url = urllib.parse.urljoin(self.endpoint + "/", href)
        if not url.startswith(self.endpoint + "/"):
            raise PlacementError("GET", "/allocation_candidates", 200, None,
                                 f"a next link leaves the placement endpoint: {href}")
        return url[len(self.endpoint):]

    # -- allocations ---------------------------------------------------------

    def put_allocations(self, consumer, allocation_request, project_id, user_id,
                        consumer_generation=None, workload_class="standard",
                        consumer_type="INSTANCE"):
        """PUT /allocations/{consumer}: claim (generation None) or replace."""
        body = {
            "allocations": allocation_request["allocations"],
            "consumer_generation": consumer_generation,
            "project_id": project_id,
            "user_id": user_id,
            "consumer_type": consumer_type,
            "workload_class": workload_class,
        }
        if allocation_request.get("mappings"):
            body["mappings"] = allocation_request["mappings"]
        self.request("PUT", f"/allocations/{_segment(consumer)}", json=body, ok=(204,))

    def get_allocations(self, consumer):
        """(allocations {rp: {"resources": ...}}, consumer_generation or None)."""
        body = self.request("GET", f"/allocations/{_segment(consumer)}").json()
        return body.get("allocations", {}), body.get("consumer_generation")

    def delete_allocations(self, consumer):
        """Unclaim; idempotent (404, nothing to delete, counts as success)."""
        self.request("DELETE", f"/allocations/{_segment(consumer)}", ok=(204, 404), retry=True)

    # -- extensions ----------------------------------------------------------

    def put_report(self, request_id, project_id, report):
        self.request("PUT", f"/scheduling_reports/{_segment(request_id)}",
                     json={"project_id": project_id, "report": report}, ok=(200, 201),
                     retry=True)

    def get_report(self, request_id):
        return self.request(
            "GET", f"/scheduling_reports/{_segment(request_id)}").json()

    def create_build_request(self, instance_uuid, request_id, workload_class, spec):
        """Record a pending build request; an existing one (a retry) is fine."""
        resp = self.request("POST", "/build_requests", json={
            "instance_uuid": instance_uuid, "request_id": request_id,
            "workload_class": workload_class, "spec": spec}, ok=(201, 409))
        return resp.status_code == 201

    def finish_build_request(self, instance_uuid, status, host_uuid=None, reason=None):
        body = {"status": status, "host_uuid": host_uuid}
        if reason is not None:
            body["reason"] = reason[:60000]
        self.request("PUT", f"/build_requests/{_segment(instance_uuid)}", json=body,
                     retry=True)

    def list_build_requests(self, **filters):
        params = {k: v for k, v in filters.items() if v is not None}
        return self.request("GET", "/build_requests", params=params).json()["build_requests"]


def _segment(value):
    """``value`` as one URL path segment: everything but letters, digits and
    ``_.-~`` is quoted, so no id can add a segment, a query or a fragment;
    ``.`` and ``..`` (which URL parsing would resolve) are refused. The
    request-spec contract already refuses such ids; this is the second lock.
    """
    text = str(value)
    if text in ("", ".", ".."):
        raise ValueError(f"{text!r} cannot be a URL path segment")
    return urllib.parse.quote(text, safe="")


def _reason(exc, timeout):
    """A short cause instead of urllib3's nested retry message."""
    if isinstance(exc, requests.Timeout):
        return f"no answer within {timeout} s"
    text = str(exc)
    for marker, short in (("Connection refused", "connection refused"),
                          ("Name or service not known", "unknown host name"),
                          ("Connection aborted", "connection dropped"),
                          ("RemoteDisconnected", "connection dropped")):
        if marker in text:
            return short
    return text if len(text) < 200 else text[:200] + "..."
