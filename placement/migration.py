"""Run and inspect the alembic migrations of ``migrations/``."""

import os

import alembic.command
import alembic.config
import alembic.migration
import alembic.script

import migrations


def _config(conn=None):
    here = os.path.dirname(os.path.abspath(migrations.__file__))
    cfg = alembic.config.Config(os.path.join(here, "alembic.ini"))
    cfg.set_main_option("script_location", here)
    cfg.set_main_option("version_locations", os.path.join(here, "versions"))
    if conn is not None:
        cfg.attributes["connection"] = conn
    return cfg


def upgrade(db, revision="head"):
    """Bring the schema to ``revision``; a no-op when it is already there."""
    with db.engine.begin() as conn:
        alembic.command.upgrade(_config(conn), revision)


def current(db):
    with db.engine.connect() as conn:
        return alembic.migration.MigrationContext.configure(conn).get_current_revision()


def head():
    return alembic.script.ScriptDirectory.from_config(_config()).get_current_head()


def revision(db, message):
    """Autogenerate a new revision from the models (developer tool)."""
    with db.engine.begin() as conn:
        alembic.command.revision(_config(conn), message=message, autogenerate=True)
