"""One response as a comparable record: status, the headers that matter, the
JSON body with request ids, timestamps and error detail boilerplate masked,
and allocation requests and mappings in a stable order (upstream promises none)."""

import json

HEADERS = (
    "content-type",
    "location",
    "last-modified",
    "cache-control",
    "allow",
    "openstack-api-version",
    "vary",
    "x-openstack-request-id",
)
PRESENT_ONLY = ("last-modified", "x-openstack-request-id")


def _body(value):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("request_id", "created_at", "updated_at"):
                item = "<X>"
            elif key == "detail":
                item = item.split("\n\n", 1)[-1].strip()[:160]
            elif key == "mappings" and isinstance(item, dict):
                item = {group: sorted(uuids) for group, uuids in item.items()}
            out[key] = _body(item)
        return out
    if isinstance(value, list):
        out = [_body(item) for item in value]
        if out and isinstance(out[0], dict) and ("allocations" in out[0] or "mappings" in out[0]):
            out.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return out
    return value


def record(status, headers, body):
    lower = {key.lower(): value for key, value in headers}
    kept = {
        key: ("<present>" if key in PRESENT_ONLY else lower[key]) for key in HEADERS if key in lower
    }
    try:
        parsed = _body(json.loads(body)) if body else None
    except ValueError:
        parsed = "RAW:" + body[:120].decode("utf-8", "replace")
    return {"status": status, "headers": kept, "body": parsed}
