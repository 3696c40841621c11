"""Scheduling reports (extension): what the scheduler saw and decided, per request."""

import sqlalchemy as sa

from placement import db as db_mod
from placement import json_codec
from placement import models

_T = models.scheduling_reports


class NotFound(Exception):
    pass


def _to_dict(row):
    return {
        "request_id": row.request_id,
        "project_id": row.project_id,
        "report": json_codec.loads_stored(row.body),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def encode(report):
    """A report's stored text. The writers take it encoded: the handler has
    it already, to check the report's size."""
    return json_codec.dumps_sorted(report)


def put(db, request_id, project_id, text):
    """Create or replace the report of ``request_id`` with ``text``
    (``encode``); return (dict, created)."""
    with db.write() as conn:
        created = _write(conn, [(request_id, project_id, text)])
        row = conn.execute(sa.select(_T).where(_T.c.request_id == request_id)).one()
    return _to_dict(row), bool(created)


def put_many(db, items):
    """Create or replace several reports in one transaction, all or none.

    ``items``: [(request_id, project_id, report text)] (``encode``),
    request ids distinct.
    Return the number created and the number replaced.
    """
    with db.write() as conn:
        created = _write(conn, items)
    return len(created), len(items) - len(created)


def _write(conn, items):
    """Create or replace ``items`` ([(request_id, project_id, text)]); the
    request ids created.

    The unique constraint on request_id decides which are new (INSERT ...
    ON CONFLICT DO NOTHING), the others are replaced: two writers of one
    report at once answer as one after the other would (created, then
    replaced; the later write's body stays), never an IntegrityError.
    """
    now = db_mod.utcnow()
    todo = {request_id: (project_id, text) for request_id, project_id, text in items}
    created = set()
    # A report purged between the insert and its update is inserted on the
    # next pass.
    for _attempt in range(3):
        rows = [
            {"request_id": r, "project_id": p, "body": b, "created_at": now}
            for r, (p, b) in todo.items()
        ]
        new = db_mod.insert_new(conn, _T, "request_id", rows)
        created |= new
        missed = {}
        for request_id, (project_id, body) in todo.items():
            if request_id in new:
                continue
            res = conn.execute(
                _T.update()
                .where(_T.c.request_id == request_id)
                .values(project_id=project_id, body=body, updated_at=now)
            )
            if res.rowcount == 0:
                missed[request_id] = (project_id, body)
        todo = missed
        if not todo:
            return created
    raise db_mod.DatabaseError("scheduling reports were deleted while being written")


def get(db, request_id):
    with db.read() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.request_id == request_id)).first()
    if row is None:
        raise NotFound(request_id)
    return _to_dict(row)


def purge(db, before, batch=1000):
    """Delete the reports last written before ``before``, ``batch`` rows per
    transaction; return how many."""
    written_at = sa.func.coalesce(_T.c.updated_at, _T.c.created_at)
    select = sa.select(_T.c.id).where(written_at < before).order_by(_T.c.id).limit(batch)
    total = 0
    while True:
        with db.write() as conn:
            ids = list(conn.execute(select).scalars())
            if ids:
                conn.execute(_T.delete().where(_T.c.id.in_(ids), written_at < before))
        total += len(ids)
        if len(ids) < batch:
            return total
