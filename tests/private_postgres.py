"""A PostgreSQL server private to one test, to break on purpose.

Started from the binaries of the installed server packages (initdb and
pg_ctl under /usr/lib/postgresql/<version>/bin, or on PATH) in a temporary
directory, listening on 127.0.0.1 on a free port; stopped and removed at the
end. The shared server at 5432 is never touched. As root (CI), the server
runs as the ``postgres`` system user, since PostgreSQL refuses to run as root.
"""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile

from tests import processes


class NotAvailable(Exception):
    """No PostgreSQL server binaries on this machine."""


def find_bindir():
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
    )
    for bindir in reversed(candidates):
        if os.path.exists(os.path.join(bindir, "initdb")):
            return bindir
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    raise NotAvailable("initdb not found (install the PostgreSQL server package)")


class PrivatePostgres:
    def __init__(self, settings=None):
        self.bindir = find_bindir()
        self.port = processes.free_port()
        self.settings = dict(settings or {})
        self.dir = tempfile.mkdtemp(prefix="placement-pg-")
        self.datadir = os.path.join(self.dir, "data")
        self._user = None
        if os.geteuid() == 0:
            self._user = pwd.getpwnam("postgres")
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)

    @property
    def url(self):
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/placement"

    def _run(self, *args, timeout=60):
        kwargs = {}
        if self._user is not None:
            kwargs.update(user=self._user.pw_uid, group=self._user.pw_gid, extra_groups=[])
        res = subprocess.run(
            [os.path.join(self.bindir, args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.dir,
            **kwargs,
        )
        if res.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({res.returncode}): {res.stderr.strip()}")
        return res

    def init(self):
        self._run(
            "initdb",
            "-D",
            self.datadir,
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
            timeout=120,
        )
        options = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.dir}'",
            # The OS is not what this server's tests crash: a killed or
            # stopped server keeps every committed transaction without fsync
            # (WAL reaches the kernel before COMMIT returns).
            "fsync": "off",
            "max_connections": "60",
            "shared_buffers": "16MB",
        }
        options.update(self.settings)
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as fh:
            for key, value in options.items():
                fh.write(f"{key} = {value}\n")
        return self

    def start(self):
        self._run(
            "pg_ctl",
            "-D",
            self.datadir,
            "-l",
            os.path.join(self.dir, "log"),
            "-w",
            "-t",
            "60",
            "start",
            timeout=90,
        )
        return self

    def stop(self, mode="fast"):
        self._run("pg_ctl", "-D", self.datadir, "-m", mode, "-w", "-t", "60", "stop", timeout=90)

    def restart(self, mode="fast"):
        self.stop(mode)
        self.start()

    def createdb(self, name="placement"):
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)

    def _postmaster_pid(self):
        with open(os.path.join(self.datadir, "postmaster.pid")) as fh:
            return int(fh.readline())

    def _pids(self):
        """The postmaster and every process it forked (backends, writers)."""
        master = self._postmaster_pid()
        pids = [master]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == master:  # field 4 of stat: the parent pid
                pids.append(int(entry))
        return pids

    def pause(self):
        """SIGSTOP the postmaster and its children: the server freezes with its
        sockets open, as on a frozen VM or a stalled disk."""
        # The postmaster first, so that it forks nothing new meanwhile; a
        # child that exits between the listing and its signal (a backend
        # or worker finishing) needs no stopping.
        master = self._postmaster_pid()
        os.kill(master, signal.SIGSTOP)
        self._paused = [master]
        for pid in self._pids()[1:]:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            self._paused.append(pid)

    def resume(self):
        for pid in getattr(self, "_paused", []):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self._paused = []

    def destroy(self):
        self.resume()
        try:
            if os.path.exists(os.path.join(self.datadir, "postmaster.pid")):
                self.stop("immediate")
        except Exception:  # noqa: BLE001 - best effort; the directory goes anyway
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines=30):
        try:
            with open(os.path.join(self.dir, "log")) as fh:
                return "".join(fh.readlines()[-lines:])
        except OSError:
            return ""
