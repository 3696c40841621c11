"""Build requests the conductor accepted (extension).

A build request is one instance of a scheduling request. It is recorded
``pending`` before the conductor asks the scheduler, and moves to ``placed`` or
``failed`` once; pending ones are the queued demand the power controller counts
(``queue_aware_v1``) and what a restarted conductor resumes.
"""

import json

import sqlalchemy as sa

from placement import db as db_mod
from placement import models

PENDING = "pending"
PLACED = "placed"
FAILED = "failed"
STATUSES = (PENDING, PLACED, FAILED)

_T = models.build_requests


class NotFound(Exception):
    pass


class Duplicate(Exception):
    pass


class InvalidTransition(Exception):
    def __init__(self, current, wanted):
        super().__init__(f"build request is {current}; it cannot become {wanted}")
        self.current = current
        self.wanted = wanted


def _to_dict(row):
    return {
        "instance_uuid": row.instance_uuid,
        "request_id": row.request_id,
        "workload_class": row.workload_class,
        "status": row.status,
        "host_uuid": row.host_uuid,
        "reason": row.reason,
        "spec": json.loads(row.spec),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def create(db, instance_uuid, request_id, workload_class, spec):
    """Record a new pending build request.

    :raise Duplicate: the instance already has a build request.
    """
    now = db_mod.utcnow()
    with db.write() as conn:
        found = conn.execute(
            sa.select(_T.c.id).where(_T.c.instance_uuid == instance_uuid)
        ).first()
        if found is not None:
            raise Duplicate(instance_uuid)
        conn.execute(_T.insert().values(
            instance_uuid=instance_uuid, request_id=request_id,
            workload_class=workload_class, status=PENDING,
            spec=json.dumps(spec, sort_keys=True), created_at=now))
        row = conn.execute(sa.select(_T).where(_T.c.instance_uuid == instance_uuid)).one()
    return _to_dict(row)


def get(db, instance_uuid):
    with db.read() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.instance_uuid == instance_uuid)).first()
    if row is None:
        raise NotFound(instance_uuid)
    return _to_dict(row)


def list_requests(db, status=None, workload_class=None, request_id=None, limit=None):
    # SELECT * FROM build_requests WHERE status = :s AND workload_class = :w ORDER BY id
    query = sa.select(_T).order_by(_T.c.id)
    if status is not None:
        query = query.where(_T.c.status == status)
    if workload_class is not None:
        query = query.where(_T.c.workload_class == workload_class)
    if request_id is not None:
        query = query.where(_T.c.request_id == request_id)
    if limit is not None:
        query = query.limit(limit)
    with db.read() as conn:
        return [_to_dict(r) for r in conn.execute(query)]


def update(db, instance_uuid, status, host_uuid=None, reason=None):
    """Move a build request to ``status``.

    pending -> placed | failed, once. Repeating the same final status with the
    same host is accepted (a conductor that retries after a lost response);
    anything else is an InvalidTransition. The status is compared in the
    UPDATE itself so two conductors cannot both finish the same request.
    """
    now = db_mod.utcnow()
    with db.write() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.instance_uuid == instance_uuid)).first()
        if row is None:
            raise NotFound(instance_uuid)
        if row.status == status and status != PENDING and row.host_uuid == host_uuid:
            return _to_dict(row)
        if row.status != PENDING or status == PENDING:
            raise InvalidTransition(row.status, status)
        # UPDATE build_requests SET status=:s ... WHERE id=:id AND status='pending'
        res = conn.execute(
            _T.update()
            .where(_T.c.id == row.id, _T.c.status == PENDING)
            .values(status=status, host_uuid=host_uuid, reason=reason, updated_at=now))
        if res.rowcount != 1:
            raise InvalidTransition("finished", status)
        row = conn.execute(sa.select(_T).where(_T.c.id == row.id)).one()
    return _to_dict(row)
