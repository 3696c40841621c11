"""Run and inspect the alembic migrations of ``migrations/``.

``0001`` is the schema of the first release and is frozen: every later
schema change is a new revision on top of the single head
(``tests/functional/db/test_migrations.py`` checks both, and migrates a
database populated at ``0001`` through every revision).
"""

import functools
import os

import alembic.command
import alembic.config
import alembic.migration
import alembic.script
import sqlalchemy as sa

import migrations

VERSION_TABLE = "alembic_version"
SYNC_COMMAND = "placement-manage db sync"


class SchemaNotCurrent(Exception):
    """The database schema is not the one this code needs; the message is one
    line naming the command that fixes it."""


def _config(conn=None):
    here = os.path.dirname(os.path.abspath(migrations.__file__))
    cfg = alembic.config.Config(os.path.join(here, "alembic.ini"))
    cfg.set_main_option("script_location", here)
    cfg.set_main_option("version_locations", os.path.join(here, "versions"))
    if conn is not None:
        cfg.attributes["connection"] = conn
    return cfg


@functools.cache
def _scripts():
    # Parsing the revision files costs milliseconds; every app start asks.
    return alembic.script.ScriptDirectory.from_config(_config())


def upgrade(db, revision="head"):
    """Bring the schema to ``revision``; a no-op when it is already there."""
    with db.engine.begin() as conn:
        alembic.command.upgrade(_config(conn), revision)


def current(db):
    """The revision the database is at, None when it has no schema."""
    # Read alembic's table directly: a MigrationContext logs two INFO lines,
    # noise in front of the one line a service prints when the schema is old.
    with db.engine.connect() as conn:
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None
        return conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def head():
    return _scripts().get_current_head()


def heads():
    return list(_scripts().get_heads())


def revisions():
    """Every revision id from the first (``0001``) to the head, in upgrade order."""
    return [script.revision for script in reversed(list(_scripts().walk_revisions()))]


def check_current(db, behind_ok=False):
    """Raise SchemaNotCurrent unless the database is at this code's head
    revision (or, with ``behind_ok``, at any revision ``upgrade`` can bring there)."""
    have = current(db)
    want = head()
    if have == want or (behind_ok and (have is None or have in revisions())):
        return
    if have is None:
        raise SchemaNotCurrent(
            f"the database has no placement schema; run '{SYNC_COMMAND}' to create it"
        )
    if have not in revisions():
        raise SchemaNotCurrent(
            f"the database schema is at revision {have}, which this placement release "
            f"does not know (newer code migrated it?); upgrade placement or use the "
            f"database of this release"
        )
    raise SchemaNotCurrent(
        f"the database schema is at revision {have}, this release needs {want}; "
        f"run '{SYNC_COMMAND}' to upgrade it"
    )


def revision(db, message):
    """Autogenerate a new revision from the models (developer tool)."""
    with db.engine.begin() as conn:
        alembic.command.revision(_config(conn), message=message, autogenerate=True)
