"""Clean databases for the conformance run, one per gabbit file.

SQLite: a migrated template file is copied for every file (migrating each time
is slow). PostgreSQL: one database private to this run is created and migrated
once, then emptied (TRUNCATE ... RESTART IDENTITY) before every file and
dropped at the end.
"""

import os
import shutil
import uuid

import sqlalchemy as sa

from placement import db as db_mod
from placement import migration
from placement import models

LOCAL_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


class SQLiteBackend:
    name = "sqlite"

    def __init__(self, workdir):
        self.workdir = workdir
        self.template = os.path.join(workdir, "template.sqlite")
        db = db_mod.Database(f"sqlite:///{self.template}")
        migration.upgrade(db)
        db_mod.sync_standard_classes_and_traits(db)
        db.dispose()
        self._count = 0

    def fresh_database(self):
        self._count += 1
        path = os.path.join(self.workdir, f"file-{self._count}.sqlite")
        shutil.copy(self.template, path)
        return f"sqlite:///{path}"

    def close(self):
        pass


class PostgresBackend:
    name = "postgresql"

    def __init__(self, admin_url=None):
        admin_url = admin_url or os.environ.get("PLACEMENT_TEST_DB_URL") or LOCAL_PG
        self._admin = sa.create_engine(
            admin_url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}
        )
        # Random, so two runs (or two checkouts) can share one server.
        self.db_name = f"placement_conformance_{uuid.uuid4().hex[:12]}"
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.db_name}"')
            conn.exec_driver_sql(f'CREATE DATABASE "{self.db_name}"')
        self.url = (
            sa.engine.make_url(admin_url)
            .set(database=self.db_name)
            .render_as_string(hide_password=False)
        )
        db = db_mod.Database(self.url)
        migration.upgrade(db)
        db.dispose()

    def fresh_database(self):
        db = db_mod.Database(self.url)
        tables = [t.name for t in reversed(models.metadata.sorted_tables)]
        with db.write() as conn:
            conn.exec_driver_sql(
                "TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE"
            )
        db.dispose()
        return self.url

    def close(self):
        with self._admin.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{self.db_name}' AND pid <> pg_backend_pid()"
            )
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.db_name}"')
        self._admin.dispose()


def make(kind, workdir):
    if kind == "sqlite":
        return SQLiteBackend(workdir)
    if kind == "postgresql":
        return PostgresBackend()
    raise ValueError(f"unknown database kind {kind!r}")
