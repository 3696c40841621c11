"""The placement REST client of the power controller.

One reconcile tick costs a handful of calls whatever the cluster size:
``GET /nodes`` (records, hardware and twins inline), ``GET /workload_usages``
(running consumers per root, by class), ``GET /build_requests?status=pending
&workload_class=performance`` (queued demand) and at most one
``POST /nodes/twins`` carrying only the nodes that change.
"""

import logging
import urllib.parse

import requests

LOG = logging.getLogger(__name__)

API_VERSION = "placement 1.39"


class PlacementError(Exception):
    """Placement answered with an error (or could not be reached)."""

    def __init__(self, message, status=None, code=None):
        super().__init__(message)
        self.status = status
        self.code = code


class FeatureMissing(PlacementError):
    """The endpoint does not exist on this placement (404 route / 501)."""


class PlacementClient:
    def __init__(self, endpoint, token="admin", timeout=30.0, session=None):
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers.update({
            "x-auth-token": token,
            "accept": "application/json",
            "openstack-api-version": API_VERSION,
        })

    @classmethod
    def from_conf(cls, power_conf):
        return cls(power_conf.placement_endpoint, power_conf.placement_token,
                   power_conf.request_timeout)

    def _call(self, method, path, params=None, json=None):
        url = self.endpoint + path
        try:
            resp = self.session.request(method, url, params=params, json=json,
                                        timeout=self.timeout)
        except requests.RequestException as exc:
            raise PlacementError(f"{method} {url}: {exc}") from exc
        if resp.status_code >= 400:
            detail, code = resp.text.strip(), None
            try:
                err = resp.json()["errors"][0]
                detail, code = err.get("detail", "").strip(), err.get("code")
            except (ValueError, KeyError, IndexError, TypeError):
                pass
            # A route that does not exist answers a bare 404 with the default
            # code; a stub answers 501. Either way the feature is missing.
            missing = resp.status_code == 501 or (
                resp.status_code == 404 and code in (None, "placement.undefined_code"))
            kind = FeatureMissing if missing else PlacementError
            raise kind(f"{method} {path}: {resp.status_code} {detail}",
                       status=resp.status_code, code=code)
        return resp.json() if resp.content else None

    def list_nodes(self):
        """Every node (root provider with node data), hardware and twin inline."""
        return self._call("GET", "/nodes")["nodes"]

    def workload_usages(self):
        """{root provider uuid: {"performance": n, "standard": m}}."""
        return self._call("GET", "/workload_usages")["resource_providers"]

    def pending_performance_builds(self):
        """How many performance build requests the conductor has not placed yet."""
        body = self._call("GET", "/build_requests",
                          params={"status": "pending", "workload_class": "performance"})
        return len(body["build_requests"])

    def provider_inventories(self, uuid):
        """{resource class: inventory} of one provider (hardware fallback only)."""
        return self._call("GET", f"/resource_providers/{_segment(uuid)}/inventories")[
            "inventories"]

    def write_twins(self, twins):
        """POST /nodes/twins: all or nothing; returns the stored twins."""
        if not twins:
            return []
        return self._call("POST", "/nodes/twins", json={"twins": twins})["twins"]

    # Registration helpers (tests, benchmarks, operators seeding a cluster).
    def put_node(self, uuid, **record):
        return self._call("PUT", f"/nodes/{_segment(uuid)}", json=record)

    def put_hardware(self, uuid, hardware):
        return self._call("PUT", f"/nodes/{_segment(uuid)}/hardware", json=hardware)


def _segment(value):
    """``value`` as one URL path segment: everything but letters, digits and
    ``_.-~`` quoted, so no id can add a segment, a query or a fragment; ``.``
    and ``..`` (which URL parsing would resolve) are refused."""
    text = str(value)
    if text in ("", ".", ".."):
        raise ValueError(f"{text!r} cannot be a URL path segment")
    return urllib.parse.quote(text, safe="")
