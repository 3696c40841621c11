"""Error codes and the API error type.

The ``placement.*`` strings are upstream OpenStack Placement's; clients match on
them. Do not change a value once set. Extension codes use the same
``placement.<resource>.<condition>`` form.
"""

import http
import re

DEFAULT = "placement.undefined_code"
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
ILLEGAL_DUPLICATE_QUERYPARAM = "placement.query.duplicate_key"
QUERYPARAM_BAD_VALUE = "placement.query.bad_value"
QUERYPARAM_MISSING_VALUE = "placement.query.missing_value"

# A database that is down, refusing connections or out of time: 503 with
# Retry-After (seconds); clients retry with backoff.
DATABASE_UNAVAILABLE = "placement.database.unavailable"
DATABASE_RETRY_AFTER = 2

# Extensions.
NODE_NOT_FOUND = "placement.node.not_found"
REPORT_NOT_FOUND = "placement.scheduling_report.not_found"
PAGE_MARKER_INVALID = "placement.query.bad_page_marker"
BUILD_REQUEST_NOT_FOUND = "placement.build_request.not_found"
BUILD_REQUEST_EXISTS = "placement.build_request.duplicate"
BUILD_REQUEST_FINISHED = "placement.build_request.invalid_transition"
BUILD_REQUEST_LEASED = "placement.build_request.leased"
BUILD_REQUEST_INVALID_SPEC = "placement.build_request.invalid_spec"
# An instance's end reported for a record that is not placed on that host.
BUILD_REQUEST_NOT_THERE = "placement.build_request.not_placed_there"
# A claim write guarded by a build request's lease (the Joule-Build-Lease
# header) from a conductor that no longer holds it.
BUILD_REQUEST_LEASE_LOST = "placement.build_request.lease_lost"
REQUEST_TOO_LARGE = "placement.request.too_large"
HOST_NOT_ALLOWED = "placement.request.host_not_allowed"
SERVER_GROUP_NOT_FOUND = "placement.server_group.not_found"
SERVER_GROUP_EXISTS = "placement.server_group.duplicate"
SERVER_GROUP_MEMBER_CONFLICT = "placement.server_group.member_conflict"
SERVER_GROUP_POLICY_VIOLATION = "placement.server_group.policy_violation"
# Performance work (workload_class) asked for a tree whose root carries the
# eco profile trait; refused in the claim's own transaction.
ALLOCATION_PROFILE_CONFLICT = "placement.allocation.profile_conflict"
# Work (workload_class) asked for a tree whose root's power state is not on
# (suspending, off, waking); refused in the claim's own transaction.
ALLOCATION_POWER_STATE_CONFLICT = "placement.allocation.power_state_conflict"

# How webob turns its HTML error template into text.
_BR_RE = re.compile(r"<br.*?>", re.I | re.S)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
_TAG_RE = re.compile(r"<.*?>", re.S)

# webob's explanations, which upstream puts in front of every detail.
_EXPLANATIONS = {
    400: "The server could not comply with the request since it is either malformed "
    "or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the document "
    "you requested. Either you supplied the wrong credentials (e.g., bad password), or "
    "your browser does not understand how to supply the credentials required.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    409: "There was a conflict when trying to complete your request.",
    413: "The body of your request was too large for this server.",
    500: "The server has either erred or is incapable of performing the requested operation.",
    503: "The server is currently unavailable. Please try again at a later time.",
}


class ApiError(Exception):
    """An HTTP error with upstream's JSON error body.

    ``detail`` is the specific message; the body's ``detail`` field is built
    as upstream's webob builds it, so clients that match on substrings keep
    working: ``<generic explanation>\\n\\n <detail>  `` (even when ``detail``
    is empty), or, when ``explanation`` is given (webob's own templates of 405,
    406 and 415, which name the method or media type),
    ``<explanation> \\n\\n <detail>``.
    """

    def __init__(
        self, status, detail="", code=None, headers=None, explanation=None, extra=None, also=()
    ):
        super().__init__(detail)
        self.status = int(status)
        self.detail = detail
        self.code = code or DEFAULT
        self.headers = dict(headers or {})
        self.explanation = explanation
        # Extensions only: more members of this error's JSON object (e.g.
        # the ``instance_uuid`` an item of a bulk request is refused for),
        # and further errors of the same request (one per refused item).
        self.extra = dict(extra or {})
        self.also = list(also)

    @property
    def title(self):
        try:
            return http.HTTPStatus(self.status).phrase
        except ValueError:
            return "Error"

    def head(self):
        """The first line of the detail: the explanation of the status."""
        if self.explanation is not None:
            return self.explanation.rstrip()
        return _EXPLANATIONS.get(self.status, _EXPLANATIONS[400])

    def flat_detail(self):
        """The detail as webob renders it in a JSON or plain body: markup
        stripped and line breaks turned into spaces (so a multi-line
        jsonschema message arrives on one line, as from upstream)."""
        text = str(self.detail).replace("\n", " ").replace("\r", "")
        text = _BR_RE.sub("\n", text)
        text = _COMMENT_RE.sub("", text)
        return _TAG_RE.sub("", text)

    def body_detail(self):
        if self.explanation is not None:
            return f"{self.head()} \n\n {self.flat_detail()}"
        return f"{self.head()}\n\n {self.flat_detail()}  "


def bad_request(detail, code=None):
    return ApiError(400, detail, code)


def not_found(detail, code=None):
    return ApiError(404, detail, code)


def conflict(detail, code=None):
    return ApiError(409, detail, code)


def forbidden(detail):
    return ApiError(403, detail)
