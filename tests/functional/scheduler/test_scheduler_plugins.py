"""An out-of-tree filter (tests/plugins/joule_test_filter), installed beside
joule, is enabled by its entry point name and used by the scheduler
(``python -m scheduler.batch``, a real process over a live placement, SQLite
and PostgreSQL); without the package the same configuration stops
scheduler-worker with a one-line start-up error.

"Installed" the way pip installs a package, without pip or a network: its
module on sys.path and a ``.dist-info`` with the ``entry_points.txt`` of its
own setup.cfg, in a temporary directory the worker gets as PYTHONPATH, so the
test's venv is not changed.
"""

import configparser
import json
import os
import pathlib
import shutil
import subprocess
import sys

from tests.scheduling import add_hosts

BIN = os.path.dirname(sys.executable)
PLUGIN = pathlib.Path(__file__).parents[2] / "plugins" / "joule_test_filter"
FILTER = "RackXExcludedFilter"


def install_plugin(site):
    """Install the test package into ``site`` (a directory for PYTHONPATH)."""
    setup = configparser.ConfigParser()
    setup.read(PLUGIN / "setup.cfg")
    name, version = setup["metadata"]["name"], setup["metadata"]["version"]
    shutil.copytree(PLUGIN / "joule_test_filter", site / "joule_test_filter")
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    points = configparser.ConfigParser()
    points.optionxform = str  # entry point names are case-sensitive
    for group, text in setup["options.entry_points"].items():
        points[group] = dict(line.split(" = ", 1) for line in text.strip().splitlines())
    with open(dist / "entry_points.txt", "w") as fh:
        points.write(fh)


def run_worker(tmp_path, url, specs, pythonpath=None, command=None):
    """Run ``python -m scheduler.batch`` (the Scheduler of scheduler-worker,
    driven from a file) or ``command`` with the plugin enabled."""
    conf = tmp_path / "scheduler.conf"
    conf.write_text(
        f"[filter_scheduler]\nenabled_filters = ComputeFilter,{FILTER}\n"
        "[scheduler]\nmax_attempts = 1\n"
    )
    requests = tmp_path / "specs.jsonl"
    requests.write_text("".join(json.dumps(s) + "\n" for s in specs))
    out = tmp_path / "out.jsonl"
    env = dict(os.environ, OS_PLACEMENT__ENDPOINT_OVERRIDE=url)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    argv = command or [
        sys.executable,
        "-m",
        "scheduler.batch",
        "--requests",
        str(requests),
        "--output",
        str(out),
    ]
    res = subprocess.run(
        [*argv, "--config-file", str(conf)], capture_output=True, text=True, env=env, timeout=300
    )
    assert "Traceback" not in res.stderr, res.stderr
    answers = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return res, answers


def spec(request_id, vcpu):
    return {
        "version": "1.0",
        "request_id": request_id,
        "resources": {"VCPU": vcpu, "MEMORY_MB": 256},
        "project_id": "p",
        "user_id": "u",
    }


def test_out_of_tree_filter_removes_hosts_and_explains_refusal(db, client, live_server, tmp_path):
    # x1 is the roomiest host (the weighers would pick it) but in rack x.
    hosts = add_hosts(db, client, [("x1", "c1", None, 16, 16384), ("y1", "c1", None, 1, 1024)])
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site)
    res, answers = run_worker(
        tmp_path, live_server.url, [spec("req-fits-y", 1), spec("req-only-x", 2)], site
    )
    by_id = {a["request_id"]: a for a in answers}
    placed = by_id["req-fits-y"]
    assert placed["status"] == "placed", placed
    assert placed["selections"][0][0]["host_uuid"] == hosts["y1"]
    refused = by_id["req-only-x"]
    assert refused["status"] != "placed", refused
    assert FILTER in refused["error"] and "rack x" in refused["error"], refused


def test_enabled_filter_not_installed_is_one_line_start_up_error(live_server, tmp_path):
    res, answers = run_worker(
        tmp_path,
        live_server.url,
        [spec("req-1", 1)],
        command=[os.path.join(BIN, "scheduler-worker")],
    )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and FILTER in lines[0] and "not installed" in lines[0], res.stderr
    assert answers == []
