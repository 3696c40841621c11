"""Client-side deadline for PostgreSQL calls: close a connection whose server
does not answer in time.

PostgreSQL enforces ``statement_timeout`` and ``lock_timeout`` itself, but only
while it runs: a paused server (SIGSTOP, a frozen VM, a dead host behind a
live TCP path) answers nothing, and libpq waits on its socket for ever. The
watchdog holds a deadline for every connection that is waiting on the server
(armed just before a statement, commit, rollback or pool check and disarmed
when it returns); one thread per process shuts down the socket of a
connection whose deadline passes. The blocked call then fails at once with a
"server closed the connection" OperationalError, SQLAlchemy invalidates the
connection (and the pool's older ones), and the request answers 503.

Shutting the socket down (not closing the descriptor) leaves the descriptor
to its owner, so it can never be reused under the owner's feet.
"""

import logging
import os
import socket
import threading
import time

LOG = logging.getLogger(__name__)


class Watchdog:
    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._deadlines = {}  # DB-API connection -> (monotonic deadline, seconds, what)
        self._wake_at = None  # when the thread next looks; None: it sleeps until notified
        self._thread = None
        self.severed = 0  # connections closed by the watchdog (tests, metrics)

    def arm(self, dbapi_conn, seconds, what):
        """Expect an answer on ``dbapi_conn`` within ``seconds`` (0: no limit)."""
        if not seconds:
            return
        deadline = time.monotonic() + seconds
        with self._cond:
            self._deadlines[dbapi_conn] = (deadline, seconds, what)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="db-watchdog", daemon=True)
                self._thread.start()
            # Wake the thread only when this deadline is the nearest: most
            # statements arm a deadline later than one already pending.
            if self._wake_at is None or deadline < self._wake_at:
                self._cond.notify()

    def disarm(self, dbapi_conn):
        with self._cond:
            self._deadlines.pop(dbapi_conn, None)

    def _after_fork(self):
        # The thread does not survive a fork (gunicorn workers); the child
        # starts its own on first use, with no inherited deadlines.
        self._cond = threading.Condition(threading.Lock())
        self._deadlines = {}
        self._wake_at = None
        self._thread = None

    def _run(self):
        with self._cond:
            while True:
                now = time.monotonic()
                for conn, (deadline, seconds, what) in list(self._deadlines.items()):
                    if deadline <= now:
                        del self._deadlines[conn]
                        self._sever(conn, seconds, what)
                self._wake_at = min((d for d, _s, _w in self._deadlines.values()), default=None)
                self._cond.wait(None if self._wake_at is None else self._wake_at - now)

    def _sever(self, dbapi_conn, seconds, what):
        try:
            # psycopg 3: the libpq socket of a live connection.
            fd = dbapi_conn.pgconn.socket
            sock = socket.socket(fileno=os.dup(fd))
        except Exception:  # noqa: BLE001 - already closed or broken: nothing to cut
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()
        self.severed += 1
        LOG.warning("database did not answer %s within %.1f s: connection closed", what, seconds)


WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG._after_fork)
