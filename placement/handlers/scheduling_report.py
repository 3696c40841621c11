"""HTTP handlers: scheduling reports (extension).

The scheduler writes one report per scheduling request; an admin reads it back
by request id. The policy target is the report's project, so when the rule lets
project readers in they still see only their own project's reports.
"""

from joule import request_spec
from placement import errors
from placement import util
from placement.objects import scheduling_report as report_obj
from placement.policies import scheduling_report as policies
from placement.schemas import scheduling_report as schema


def _request_id(value):
    # The scheduler's request ids follow the request spec's id pattern; no
    # other id can have a report.
    if not request_spec.is_safe_id(value, request_spec.REQUEST_ID_MAX):
        raise errors.not_found(
            f"No scheduling report for request {value}.", errors.REPORT_NOT_FOUND
        )
    return value


def _serialize(item):
    out = dict(item)
    for key in ("created_at", "updated_at"):
        out[key] = out[key].isoformat() + "Z" if out[key] is not None else None
    return out


def get_report(request_id):
    ctx = util.context()
    request_id = _request_id(request_id)
    try:
        item = report_obj.get(util.deps().db, request_id)
    except report_obj.NotFound:
        # Check the policy first with the caller's own project so that an
        # unauthorized caller gets 403, not a hint whether the report exists.
        ctx.can(policies.SHOW)
        raise errors.not_found(
            f"No scheduling report for request {request_id}.", errors.REPORT_NOT_FOUND
        )
    target = {"project_id": item["project_id"] or "", "user_id": ctx.user_id}
    ctx.can(policies.SHOW, target=target)
    return util.json_response(_serialize(item), last_modified=util.last_modified_of([item]))


def put_report(request_id):
    util.context().can(policies.UPDATE)
    request_id = _request_id(request_id)
    body = util.extract_json(schema.PUT_REPORT)
    text = report_obj.encode(body["report"])
    if len(text) > schema.MAX_REPORT_BYTES:
        raise errors.ApiError(
            413, f"Scheduling report larger than {schema.MAX_REPORT_BYTES} bytes."
        )
    item, created = report_obj.put(util.deps().db, request_id, body.get("project_id"), text)
    return util.json_response(
        _serialize(item),
        status=201 if created else 200,
        last_modified=util.last_modified_of([item]),
    )


def post_reports():
    """POST /scheduling_reports: create or replace several reports, all or
    none (the scheduler's one write per batch). 200 ``{"created": n,
    "replaced": m}``; any bad item is a 400 naming it and nothing is written."""
    util.context().can(policies.UPDATE)
    body = util.extract_json(schema.POST_REPORTS)
    seen = set()
    items = []
    for n, item in enumerate(body["reports"]):
        request_id = item["request_id"]
        if not request_spec.is_safe_id(request_id, request_spec.REQUEST_ID_MAX):
            raise errors.bad_request(
                f"reports[{n}]: request id {request_id!r} is not a scheduler request id."
            )
        if request_id in seen:
            raise errors.bad_request(f"reports[{n}]: request id {request_id} is repeated.")
        seen.add(request_id)
        # Sorted keys are what is stored; the length is the same either way.
        text = report_obj.encode(item["report"])
        if len(text) > schema.MAX_REPORT_BYTES:
            raise errors.ApiError(
                413,
                f"reports[{n}]: scheduling report larger than {schema.MAX_REPORT_BYTES} bytes.",
            )
        items.append((request_id, item.get("project_id"), text))
    created, replaced = report_obj.put_many(util.deps().db, items)
    return util.json_response({"created": created, "replaced": replaced}, last_modified="now")
