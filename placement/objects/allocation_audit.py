"""Orphaned allocations: instance claims nobody is building or running.

An instance's allocation is live while its build request is ``pending`` (a
conductor is working on it, or will take it over) or ``placed`` (it runs).
An ``INSTANCE`` consumer with allocations and no build request, or one whose
build request ``failed``, holds capacity nothing uses: what a request
interrupted half way leaves when its releases could not reach placement.
This is nova's ``placement audit`` with build requests in place of nova's
instance records. Consumers of other types (migrations, other services'
consumers written with the plain API) are not the conductors' to judge and
are never listed.
"""

import sqlalchemy as sa

from placement import models as m
from placement.objects import build_request as br_obj

INSTANCE = "INSTANCE"
_LIVE = (br_obj.PENDING, br_obj.PLACED)

_a = m.allocations
_c = m.consumers
_ct = m.consumer_types
_br = m.build_requests
_rp = m.resource_providers
_rc = m.resource_classes


def _not_live(consumer_uuid_col):
    """No build request in a live state for this consumer."""
    live = _br.alias("live")
    return ~sa.exists().where(live.c.instance_uuid == consumer_uuid_col, live.c.status.in_(_LIVE))


def find_orphans(db):
    """[{"consumer_uuid", "build_request": status | None, "allocations":
    {rp_uuid: {class: used}}}] in consumer order."""
    query = (
        sa.select(_c.c.uuid, _rp.c.uuid.label("rp_uuid"), _rc.c.name, _a.c.used, _br.c.status)
        .select_from(
            _a.join(_c, _c.c.uuid == _a.c.consumer_id)
            .join(_ct, _ct.c.id == _c.c.consumer_type_id)
            .join(_rp, _rp.c.id == _a.c.resource_provider_id)
            .join(_rc, _rc.c.id == _a.c.resource_class_id)
            .outerjoin(_br, _br.c.instance_uuid == _c.c.uuid)
        )
        .where(_ct.c.name == INSTANCE, _not_live(_c.c.uuid))
        .order_by(_c.c.uuid, _rp.c.uuid, _rc.c.name)
    )
    out = {}
    with db.read() as conn:
        for consumer, rp_uuid, rc, used, status in conn.execute(query):
            entry = out.setdefault(
                consumer, {"consumer_uuid": consumer, "build_request": status, "allocations": {}}
            )
            entry["allocations"].setdefault(rp_uuid, {})[rc] = used
    return list(out.values())


def delete_orphan(db, consumer_uuid):
    """Remove an orphan's allocations and consumer; False when it is no orphan now.

    The orphan test is repeated inside the deleting transaction, so a
    consumer whose build request was (re)created meanwhile is left alone.
    """
    query = (
        sa.select(_c.c.id)
        .select_from(_c.join(_ct, _ct.c.id == _c.c.consumer_type_id))
        .where(_c.c.uuid == consumer_uuid, _ct.c.name == INSTANCE, _not_live(_c.c.uuid))
    )
    if db.is_postgres:
        # Lock the consumer row as an allocation write does first.
        query = query.with_for_update(of=_c)
    with db.write() as conn:
        still = conn.execute(query).first()
        if still is None:
            return False
        conn.execute(_a.delete().where(_a.c.consumer_id == consumer_uuid))
        conn.execute(_c.delete().where(_c.c.uuid == consumer_uuid))
    return True
