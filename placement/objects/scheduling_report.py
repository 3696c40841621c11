"""Scheduling reports (extension): what the scheduler saw and decided, per request."""

import json

import sqlalchemy as sa

from placement import db as db_mod
from placement import models

_T = models.scheduling_reports


class NotFound(Exception):
    pass


def _to_dict(row):
    return {
        "request_id": row.request_id,
        "project_id": row.project_id,
        "report": json.loads(row.body),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def put(db, request_id, project_id, report):
    """Create or replace the report of ``request_id``; return (dict, created)."""
    now = db_mod.utcnow()
    body = json.dumps(report, sort_keys=True)
    with db.write() as conn:
        found = conn.execute(sa.select(_T.c.id).where(_T.c.request_id == request_id)).first()
        if found is None:
            conn.execute(
                _T.insert().values(
                    request_id=request_id, project_id=project_id, body=body, created_at=now
                )
            )
            created = True
        else:
            conn.execute(
                _T.update()
                .where(_T.c.id == found.id)
                .values(project_id=project_id, body=body, updated_at=now)
            )
            created = False
        row = conn.execute(sa.select(_T).where(_T.c.request_id == request_id)).one()
    return _to_dict(row), created


def put_many(db, items):
    """Create or replace several reports in one transaction, all or none.

    ``items``: [(request_id, project_id, report)], request ids distinct.
    Return the number created and the number replaced.
    """
    now = db_mod.utcnow()
    ids = [request_id for request_id, _p, _r in items]
    with db.write() as conn:
        existing = {
            row.request_id: row.id
            for row in conn.execute(
                sa.select(_T.c.id, _T.c.request_id).where(_T.c.request_id.in_(ids))
            )
        }
        new = [
            {
                "request_id": request_id,
                "project_id": project_id,
                "body": json.dumps(report, sort_keys=True),
                "created_at": now,
            }
            for request_id, project_id, report in items
            if request_id not in existing
        ]
        if new:
            conn.execute(_T.insert(), new)
        for request_id, project_id, report in items:
            if request_id in existing:
                conn.execute(
                    _T.update()
                    .where(_T.c.id == existing[request_id])
                    .values(
                        project_id=project_id,
                        body=json.dumps(report, sort_keys=True),
                        updated_at=now,
                    )
                )
    return len(new), len(items) - len(new)


def get(db, request_id):
    with db.read() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.request_id == request_id)).first()
    if row is None:
        raise NotFound(request_id)
    return _to_dict(row)
