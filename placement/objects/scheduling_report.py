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


def get(db, request_id):
    with db.read() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.request_id == request_id)).first()
    if row is None:
        raise NotFound(request_id)
    return _to_dict(row)
