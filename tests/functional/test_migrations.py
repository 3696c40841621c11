"""The migrations create exactly the schema of placement/models.py, idempotently."""

import alembic.autogenerate
import alembic.migration

from placement import db as db_mod
from placement import migration
from placement import models


def test_schema_matches_models(db):
    with db.engine.connect() as conn:
        ctx = alembic.migration.MigrationContext.configure(conn, opts={"compare_type": True})
        diff = alembic.autogenerate.compare_metadata(ctx, models.metadata)
    assert diff == []


def test_sync_is_idempotent(db):
    assert migration.current(db) == migration.head()
    migration.upgrade(db)
    db_mod.sync_standard_classes_and_traits(db)
    db_mod.sync_standard_classes_and_traits(db)
    assert migration.current(db) == migration.head()
