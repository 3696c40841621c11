"""Console scripts: clean one-line errors, db sync, and the API server starting."""

import os
import subprocess
import sys
import time

import pytest
import requests

from placement import app as app_mod
from placement import db as db_mod
from placement import migration
from tests import conftest
from tests import processes

BIN = os.path.dirname(sys.executable)


def _run(args, env=None, timeout=60):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [os.path.join(BIN, args[0])] + args[1:],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def test_manage_missing_config_file_is_one_line():
    res = _run(["placement-manage", "--config-file", "/nonexistent.conf", "db", "sync"])
    assert res.returncode != 0
    assert res.stderr.strip().count("\n") == 0
    assert "config file not found" in res.stderr
    assert "Traceback" not in res.stderr


def test_manage_unreachable_database_is_one_line():
    res = _run(
        ["placement-manage", "db", "sync"],
        env={"OS_PLACEMENT_DATABASE__CONNECTION": "postgresql+psycopg://postgres@127.0.0.1:1/x"},
    )
    assert res.returncode != 0
    assert "cannot connect to database" in res.stderr
    assert "Traceback" not in res.stderr


def test_manage_db_sync_and_version(tmp_path):
    env = {"OS_PLACEMENT_DATABASE__CONNECTION": f"sqlite:///{tmp_path}/p.sqlite"}
    res = _run(["placement-manage", "db", "sync"], env=env)
    assert res.returncode == 0, res.stderr
    again = _run(["placement-manage", "db", "sync"], env=env)
    assert again.returncode == 0, again.stderr
    ver = _run(["placement-manage", "db", "version"], env=env)
    assert ver.stdout.strip() == migration.head()


def test_api_bad_config_value_is_one_line(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[api]\nauth_strategy = nonsense\n")
    res = _run(["placement-api", "--config-file", str(conf)])
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    assert "auth_strategy" in res.stderr


def test_api_serves_on_embedded_default(tmp_path):
    port = processes.free_port()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [os.path.join(BIN, "placement-api"), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                resp = requests.get(url, timeout=5)
                break
            # The socket is bound before the worker answers: on a loaded
            # machine the first request may time out rather than be refused.
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        else:
            raise AssertionError("placement-api did not start")
        assert resp.status_code == 200
        assert resp.json()["versions"][0]["max_version"] == "1.39"
        assert (tmp_path / "placement" / "placement.sqlite").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _one_line_naming_sync(res):
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


def test_api_on_empty_postgres_database_names_db_sync(pg_admin_url, empty_db_url):
    if not empty_db_url.startswith("postgresql"):
        # The embedded SQLite route migrates itself (test_api_serves_on_embedded_default).
        return
    env = {"OS_PLACEMENT_DATABASE__CONNECTION": empty_db_url}
    res = _run(["placement-api", "--port", str(processes.free_port())], env=env)
    assert res.returncode == 2
    line = _one_line_naming_sync(res)
    assert "no placement schema" in line and "'placement-manage db sync'" in line
    audit = _run(["placement-manage", "allocations", "audit"], env=env)
    assert audit.returncode == 2
    assert "'placement-manage db sync'" in _one_line_naming_sync(audit)
    # The command it names fixes it.
    assert _run(["placement-manage", "db", "sync"], env=env).returncode == 0
    assert _run(["placement-manage", "allocations", "audit"], env=env).returncode == 0


def test_api_on_database_of_unknown_revision_refuses(empty_db_url):
    db = db_mod.Database(empty_db_url)
    try:
        migration.upgrade(db)
        with db.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    finally:
        db.dispose()
    res = _run(
        ["placement-api", "--port", str(processes.free_port())],
        env={"OS_PLACEMENT_DATABASE__CONNECTION": empty_db_url},
    )
    assert res.returncode == 2
    line = _one_line_naming_sync(res)
    assert "revision 9999" in line and "does not know" in line


def test_app_on_database_behind_head_names_db_sync(empty_db_url):
    """What the WSGI app factory says when migrations were not run."""
    db = db_mod.Database(empty_db_url)
    try:
        with pytest.raises(migration.SchemaNotCurrent, match="placement-manage db sync"):
            app_mod.create_app(conftest.make_conf(empty_db_url), db=db, sync=False)
        migration.upgrade(db, migration.revisions()[0])
        if migration.head() != migration.revisions()[0]:
            with pytest.raises(
                migration.SchemaNotCurrent,
                match=f"needs {migration.head()}; run 'placement-manage db sync'",
            ):
                app_mod.create_app(conftest.make_conf(empty_db_url), db=db, sync=False)
        else:
            migration.upgrade(db)
            app_mod.create_app(conftest.make_conf(empty_db_url), db=db, sync=False)
    finally:
        db.dispose()
