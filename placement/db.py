"""Engine, transactions and start-up synchronisation of standard classes and traits.

Transactions are explicit: ``with db.write() as conn`` commits or rolls back and
closes; nothing hides in decorators. On SQLite a write transaction starts with
``BEGIN IMMEDIATE`` so concurrent writers queue on the database lock instead of
failing half way; on PostgreSQL writes run at READ COMMITTED and rely on
provider generations (``UPDATE ... WHERE generation = :seen``) for conflicts.
"""

import contextlib
import datetime
import os

import os_resource_classes
import os_traits
import sqlalchemy as sa
from sqlalchemy import event

from placement import models

CUSTOM_RC_ID_BASE = 10000


class DatabaseError(Exception):
    """The database cannot be reached or used; the message is one line."""


def utcnow():
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0)


def _sqlite_setup(engine):
    # pysqlite's own transaction handling defers BEGIN and breaks SAVEPOINTs;
    # take control of it (SQLAlchemy docs, "Serializable isolation / Savepoints").
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        if conn.get_execution_options().get("placement_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def make_engine(url, pool_size=10):
    url = sa.engine.make_url(url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(url.database)), exist_ok=True)
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _sqlite_setup(engine)
    else:
        engine = sa.create_engine(
            url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True
        )
    return engine


class Database:
    """An engine plus the transaction helpers every object module uses."""

    def __init__(self, url, pool_size=10):
        self.url = str(url)
        self.engine = make_engine(url, pool_size=pool_size)
        self.dialect = self.engine.dialect.name

    @property
    def is_postgres(self):
        return self.dialect == "postgresql"

    @contextlib.contextmanager
    def read(self):
        with self.engine.connect() as conn:
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def write(self):
        with self.engine.connect() as conn:
            conn.execution_options(placement_write=True)
            with conn.begin():
                yield conn

    def check(self):
        """Raise DatabaseError with one clear line when the database is unusable."""
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except Exception as exc:  # any driver error means "cannot use it"
            raise DatabaseError(
                f"cannot connect to database {self.engine.url.render_as_string()}: "
                f"{_first_line(exc)}"
            ) from exc

    def dispose(self):
        self.engine.dispose()


def _first_line(exc):
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def sync_standard_classes_and_traits(db):
    """Insert the standard resource classes and traits this release knows.

    Idempotent and safe to run from several processes at once: each missing
    row is inserted with ON CONFLICT DO NOTHING semantics.
    """
    now = utcnow()
    rc = models.resource_classes
    tr = models.traits
    with db.write() as conn:
        have_rc = {r.name: r.id for r in conn.execute(sa.select(rc.c.name, rc.c.id))}
        rows = [
            {"id": i, "name": name, "created_at": now}
            for i, name in enumerate(os_resource_classes.STANDARDS)
            if name not in have_rc
        ]
        if rows:
            _insert_ignore(db, conn, rc, rows)
        have_tr = set(conn.execute(sa.select(tr.c.name)).scalars())
        rows = [
            {"name": name, "created_at": now}
            for name in os_traits.get_traits()
            if name not in have_tr
        ]
        if rows:
            _insert_ignore(db, conn, tr, rows)


def _insert_ignore(db, conn, table, rows):
    if db.is_postgres:
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    conn.execute(insert(table).on_conflict_do_nothing(), rows)
