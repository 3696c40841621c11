"""Engine, transactions, database time limits and start-up synchronisation of
standard classes and traits.

Transactions are explicit: ``with db.write() as conn`` commits or rolls back and
closes; nothing hides in decorators. On SQLite a write transaction starts with
``BEGIN IMMEDIATE`` so concurrent writers queue on the database lock instead of
failing half way; on PostgreSQL writes run at READ COMMITTED and rely on
provider generations (``UPDATE ... WHERE generation = :seen``) for conflicts.

Time limits (``Limits``, from ``[placement_database]``): PostgreSQL sessions
start with ``statement_timeout``, ``lock_timeout`` and
``idle_in_transaction_session_timeout`` set, connecting is bounded by
``connect_timeout``, waiting for a pooled connection by ``pool_timeout``, and
a server that does not answer at all by the client-side watchdog
(``placement.db_watchdog``). ``unavailable_reason()`` tells which errors mean
"the database cannot serve now" (the API's 503).
"""

import contextlib
import contextvars
import dataclasses
import datetime
import os

import os_resource_classes
import os_traits
import sqlalchemy as sa
from sqlalchemy import event

from placement import models
from placement.db_watchdog import WATCHDOG

CUSTOM_RC_ID_BASE = 10000

# How long past statement_timeout the client waits for a server that should
# have cancelled the statement itself before it decides the server is gone.
UNRESPONSIVE_GRACE = 2.0

# Called (when set) just before a write transaction commits; it raises to roll
# the transaction back instead. The API sets it per request to refuse to
# commit for a client that has hung up (placement/app.py).
before_commit = contextvars.ContextVar("placement_before_commit", default=None)


class DatabaseError(Exception):
    """The database cannot be reached or used; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Time limits on database work, in seconds (0: none). The defaults are
    those of the ``[placement_database]`` options."""

    connect_timeout: float = 5.0
    pool_timeout: float = 10.0
    statement_timeout: float = 30.0
    lock_timeout: float = 5.0
    idle_in_transaction_timeout: float = 10.0
    sqlite_busy_timeout: float = 10.0

    @classmethod
    def from_conf(cls, conf):
        group = conf.placement_database
        return cls(**{f.name: getattr(group, f.name) for f in dataclasses.fields(cls)})

    @property
    def unresponsive_after(self):
        """Seconds after which a statement with no answer means a dead server."""
        if not self.statement_timeout:
            return 0
        return self.statement_timeout + UNRESPONSIVE_GRACE


def utcnow():
    """This process's UTC time, naive, to the second: for stamps only one
    process reads (created_at, updated_at). Times several API processes must
    agree on (leases) come from the database's clock (``clock``, ``now``)."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0)


def clock(conn, seconds=False):
    """The database's current UTC time as an SQL expression, naive as the
    columns store it (``timestamp without time zone`` on PostgreSQL, text on
    SQLite), so that every API process on one database reads one clock: a
    process whose own clock is off or jumps cannot make a lease look live or
    run out to the others.

    PostgreSQL: ``clock_timestamp()`` (the time of the statement, not of the
    transaction's start: a writer that waited on a lock sees the time it got
    it) in UTC whatever the session's TimeZone. SQLite: ``strftime(...,
    'now')``, the host's clock (the file is only shared on one host).

    ``seconds``: to the whole second, as ``utcnow()`` and the stored lease
    times are; on SQLite then the text is the very format SQLAlchemy stores a
    datetime in (``YYYY-MM-DD HH:MM:SS.000000``), so a comparison with a
    column in SQL orders as times do (``CURRENT_TIMESTAMP``'s text has no
    fraction and would not)."""
    if conn.dialect.name == "postgresql":
        expr = sa.func.timezone("UTC", sa.func.clock_timestamp(), type_=sa.DateTime)
        if seconds:
            return sa.func.date_trunc("second", expr, type_=sa.DateTime)
        return expr
    if seconds:
        return sa.func.strftime("%Y-%m-%d %H:%M:%S.000000", "now", type_=sa.DateTime)
    return sa.func.strftime("%Y-%m-%d %H:%M:%f", "now", type_=sa.DateTime)


# The ``now`` statements, built once per dialect and precision: building
# the functions anew was a measurable part of every write's fixed cost.
_NOW = {}


def now(conn, seconds=False):
    """The database's current UTC time (naive datetime; see ``clock``)."""
    key = (conn.dialect.name, seconds)
    stmt = _NOW.get(key)
    if stmt is None:
        stmt = _NOW[key] = sa.select(clock(conn, seconds))
    return conn.execute(stmt).scalar()


def _sqlite_setup(engine, limits):
    # pysqlite's own transaction handling defers BEGIN and breaks SAVEPOINTs;
    # take control of it (SQLAlchemy docs, "Serializable isolation / Savepoints").
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(limits.sqlite_busy_timeout * 1000)}")
        cur.execute("PRAGMA journal_mode=WAL")
        # FULL: a committed allocation survives a power cut. NORMAL in WAL
        # mode may lose the last transactions (docs/benchmarks.md: the cost).
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        if conn.get_execution_options().get("placement_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def _create_private_file(path):
    """Create the SQLite file (and its directory) readable by its owner only.

    The ledger is nobody else's business, and with noauth2 whoever can write
    the file is an admin anyway. SQLite gives its -wal and -shm files the
    database file's mode. An existing file keeps the mode its owner chose.
    """
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def _ms(seconds):
    return int(seconds * 1000)


def _postgres_connect_args(url, limits):
    """libpq parameters: the connect timeout, and the session's server-side
    limits as start-up options (no extra round trip per connection)."""
    settings = [
        f"-c statement_timeout={_ms(limits.statement_timeout)}",
        f"-c lock_timeout={_ms(limits.lock_timeout)}",
        f"-c idle_in_transaction_session_timeout={_ms(limits.idle_in_transaction_timeout)}",
    ]
    given = url.query.get("options")
    if given:  # the operator's own options= in the URL come first
        settings.insert(0, given if isinstance(given, str) else " ".join(given))
    # Plan every execution for its own values. psycopg prepares a statement
    # after a few executions, and the server may then settle on a generic
    # plan: for the candidate queries (capacity subqueries under a keyset
    # window whose size and bounds are parameters) that plan nests loops the
    # custom one avoids, measured on the 5,000-node inventory at 23 s against
    # 61 ms for one page, past statement_timeout. First, so that an
    # operator's options= can still choose otherwise.
    settings.insert(0, "-c plan_cache_mode=force_custom_plan")
    # libpq takes whole seconds, at least 2 (it rounds 1 up to 2).
    return {"connect_timeout": max(2, round(limits.connect_timeout)), "options": " ".join(settings)}


def _postgres_watch(engine, limits):
    """Arm the watchdog around every call that waits on the server."""
    statement = limits.unresponsive_after
    check = limits.connect_timeout

    @event.listens_for(engine, "before_cursor_execute")
    def _before_execute(conn, cursor, statement_text, params, context, executemany):
        WATCHDOG.arm(cursor.connection, statement, "a statement")

    @event.listens_for(engine, "after_cursor_execute")
    def _after_execute(conn, cursor, statement_text, params, context, executemany):
        WATCHDOG.disarm(cursor.connection)

    @event.listens_for(engine, "handle_error")
    def _on_error(context):
        # A failed statement; a failed commit or rollback stays armed until
        # the connection goes back to the pool (checkin) or is closed.
        cursor = getattr(context.execution_context, "cursor", None)
        if cursor is not None:
            WATCHDOG.disarm(cursor.connection)

    def _arm_connection(conn, what):
        # An invalidated Connection would reconnect when asked for its DB-API
        # connection; there is nothing to wait on then anyway.
        if not conn.invalidated and not conn.closed:
            WATCHDOG.arm(conn.connection.dbapi_connection, statement, what)

    @event.listens_for(engine, "commit")
    def _on_commit(conn):
        _arm_connection(conn, "a commit")

    @event.listens_for(engine, "rollback")
    def _on_rollback(conn):
        _arm_connection(conn, "a rollback")

    # The pool's own round trips: the rollback that resets a returned
    # connection, and the check (pre-ping) of a pooled one before use.
    @event.listens_for(engine.pool, "reset")
    def _on_reset(dbapi_conn, *_args):
        WATCHDOG.arm(dbapi_conn, statement, "a rollback")

    @event.listens_for(engine.pool, "checkin")
    def _on_checkin(dbapi_conn, _record):
        if dbapi_conn is not None:
            WATCHDOG.disarm(dbapi_conn)

    @event.listens_for(engine.pool, "close")
    def _on_close(dbapi_conn, _record):
        WATCHDOG.disarm(dbapi_conn)

    ping = engine.dialect.do_ping

    def bounded_ping(dbapi_conn):
        WATCHDOG.arm(dbapi_conn, check, "a connection check")
        try:
            return ping(dbapi_conn)
        finally:
            WATCHDOG.disarm(dbapi_conn)

    # The pool calls the dialect's do_ping for pre_ping; no event surrounds it.
    engine.dialect.do_ping = bounded_ping


def make_engine(url, pool_size=10, limits=None):
    limits = limits or Limits()
    url = sa.engine.make_url(url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
            _create_private_file(url.database)
        engine = sa.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": limits.sqlite_busy_timeout}
        )
        _sqlite_setup(engine, limits)
    else:
        connect_args = {}
        if url.get_backend_name() == "postgresql" and url.get_driver_name() == "psycopg":
            connect_args = _postgres_connect_args(url, limits)
            url = url.difference_update_query(["options", "connect_timeout"])
        engine = sa.create_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            pool_timeout=limits.pool_timeout,
            connect_args=connect_args,
        )
        if connect_args:
            _postgres_watch(engine, limits)
    return engine


class Database:
    """An engine plus the transaction helpers every object module uses."""

    def __init__(self, url, pool_size=10, limits=None):
        self.url = str(url)
        self.limits = limits or Limits()
        self.engine = make_engine(url, pool_size=pool_size, limits=self.limits)
        self.dialect = self.engine.dialect.name

    @classmethod
    def from_conf(cls, conf, url):
        return cls(url, pool_size=conf.placement_database.pool_size, limits=Limits.from_conf(conf))

    @property
    def is_postgres(self):
        return self.dialect == "postgresql"

    @contextlib.contextmanager
    def read(self, snapshot=True):
        """A read transaction.

        ``snapshot=False``, for readers that need no more consistency than
        each statement's own: on PostgreSQL the statements run in autocommit,
        which at READ COMMITTED sees exactly what a transaction would (every
        statement takes its own snapshot either way) without the BEGIN and
        COMMIT round trips. SQLite keeps its transaction (its snapshot spans
        the statements).
        """
        with self.engine.connect() as conn:
            if not snapshot and self.is_postgres:
                conn.execution_options(isolation_level="AUTOCOMMIT")
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def write(self):
        with self.engine.connect() as conn:
            conn.execution_options(placement_write=True)
            with conn.begin():
                yield conn
                guard = before_commit.get()
                if guard is not None:
                    guard()  # raising here rolls the transaction back

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


# SQLSTATE classes and codes that mean "the server cannot do this now", not
# "this request is wrong": connection exceptions (08), operator intervention
# (57: admin shutdown, crash shutdown, cannot connect now, query cancelled by
# statement_timeout, idle-in-transaction session timeout), insufficient
# resources (53: too many connections, out of memory, disk full), system
# errors (58), lock_not_available (55P03: lock_timeout ran out), and
# idle_in_transaction_session_timeout (25P03: the session was ended while the
# server or the API worker stalled mid-transaction).
_UNAVAILABLE_SQLSTATE_CLASSES = ("08", "53", "57", "58")
_UNAVAILABLE_SQLSTATES = {"55P03", "25P03"}
# SQLite's messages for the same situations.
_SQLITE_UNAVAILABLE = (
    "database is locked",
    "database table is locked",
    "unable to open",
    "disk i/o error",
    "database or disk is full",
)


def unavailable_reason(exc):
    """A short reason when ``exc`` means the database cannot serve right now
    (down, refusing connections, too slow, locked); None for any other error."""
    if isinstance(exc, sa.exc.TimeoutError):
        return "no free database connection in time (pool_timeout)"
    if not isinstance(exc, sa.exc.DBAPIError):
        return None
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code:
        if code.startswith(_UNAVAILABLE_SQLSTATE_CLASSES) or code in _UNAVAILABLE_SQLSTATES:
            return _first_line(exc)
        return None
    if exc.connection_invalidated:
        return _first_line(exc)
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
        text = str(orig).lower()
        if "sqlite" in type(orig).__module__:
            return _first_line(exc) if any(m in text for m in _SQLITE_UNAVAILABLE) else None
        # A driver error with no SQLSTATE: the connection could not be made
        # or was lost (refused, timed out, closed by the server or watchdog).
        return _first_line(exc)
    return None


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


def insert_new(conn, table, key, rows):
    """INSERT ... ON CONFLICT (key) DO NOTHING RETURNING key, on either backend:
    the keys of ``rows`` this statement inserted (a row whose key is stored
    already, or is being inserted by a concurrent transaction that then
    commits, is skipped: PostgreSQL waits for that transaction). The unique
    constraint decides, so there is no window between a read and the insert."""
    if not rows:
        return set()
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    column = table.c[key]
    stmt = insert(table).on_conflict_do_nothing(index_elements=[column]).returning(column)
    return set(conn.execute(stmt, list(rows)).scalars())


def _insert_ignore(db, conn, table, rows):
    if db.is_postgres:
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    conn.execute(insert(table).on_conflict_do_nothing(), rows)
