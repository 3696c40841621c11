"""Hostile request specs against a live placement mounted under a prefix.

The scheduler and the conductor use an admin token: a request id such as
``../traits/CUSTOM_X`` once made scheduler-worker PUT /traits/CUSTOM_X (the
report path resolved out of /scheduling_reports) and create the trait. Here
placement sits under ``/placement`` behind a recorder that sees every raw
request line. Two entry points read a file mixing good specs with hostile
ones: ``python -m scheduler.batch`` (a process driving one Scheduler) and
``build-submit``'s reader feeding the scheduler-worker service and the
conductors over the (in-memory) bus, every service talking to placement
over HTTP through the recorder. Each hostile line gets one clear "invalid"
answer, the tools read on,
nothing is recorded for it, and no request leaves the ``/placement/`` prefix
(next links included: the pages are one host each, so they are followed).
"""

import json
import os
import subprocess
import sys
import threading

import sqlalchemy as sa
import werkzeug.serving
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from placement import models
from tests import bus
from tests.scheduling import add_hosts

PREFIX = "/placement"

GOOD = {
    "version": "1.0",
    "resources": {"VCPU": 1, "MEMORY_MB": 256},
    "project_id": "p",
    "user_id": "u",
}
# (changes to a good spec, the start of the problem the answer must name)
HOSTILE = [
    ({"request_id": "../traits/CUSTOM_X"}, "request_id: '../traits/CUSTOM_X' is not a valid"),
    ({"request_id": ".."}, "request_id: '..' is not a valid request id"),
    ({"request_id": "req?x=1"}, "request_id: 'req?x=1' is not a valid request id"),
    ({"request_id": "req#frag"}, "request_id: 'req#frag' is not a valid request id"),
    ({"request_id": "..%2Ftraits%2FCUSTOM_X"}, "request_id: '..%2Ftraits%2FCUSTOM_X' is not"),
    ({"request_id": "req x\n"}, "request_id: 'req x\\n' is not a valid request id"),
    (
        {"instance_uuids": ["../../traits/CUSTOM_Y"]},
        "instance_uuids.0: '../../traits/CUSTOM_Y' is not a uuid",
    ),
    ({"project_id": "p/../../traits"}, "project_id: 'p/../../traits' is not a valid"),
    ({"user_id": "u\x00"}, "user_id: 'u\\x00' is not a valid user id"),
    ({"cell": "cell1/../x"}, "cell: 'cell1/../x' is not a valid cell name"),
    ({"colour": "red"}, "colour: unknown field"),
    ({"version": "2.0"}, "version: request_spec 2.0 is newer than this receiver"),
]


class PrefixedPlacement:
    """The app under /placement, as behind a proxy; every raw request target
    (path and query as sent, before any decoding) is recorded."""

    def __init__(self, app):
        self.targets = []

        def outside(environ, start_response):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not placement"]

        dispatch = DispatcherMiddleware(outside, {PREFIX: app})

        def recorder(environ, start_response):
            self.targets.append(environ["REQUEST_URI"])
            return dispatch(environ, start_response)

        self._server = werkzeug.serving.make_server("127.0.0.1", 0, recorder, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}{PREFIX}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self):
        self._server.shutdown()
        self._thread.join(timeout=10)


def _spec_lines(tag):
    lines = [json.dumps({**GOOD, "request_id": f"req-{tag}-1"})]
    for changes, _ in HOSTILE:
        lines.append(json.dumps({**GOOD, **changes}))
    lines.append("{not json")
    lines.append(json.dumps({**GOOD, "request_id": f"req-{tag}-2"}))
    return lines


def _run_batch(specs, out, url):
    env = dict(
        os.environ,
        OS_PLACEMENT__ENDPOINT_OVERRIDE=url,
        OS_FILTER_SCHEDULER__PAGE_SIZE="1",
        OS_FILTER_SCHEDULER__MAX_PLACEMENT_RESULTS="0",
    )
    res = subprocess.run(
        [sys.executable, "-m", "scheduler.batch", "--requests", str(specs), "--output", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "Traceback" not in res.stderr, res.stderr
    return res, [json.loads(line) for line in out.read_text().splitlines()]


def _assert_invalid_answers(invalid):
    """One answer per bad line, in order, naming the line and the problem."""
    assert len(invalid) == len(HOSTILE) + 1
    pairs = zip(invalid[:-1], HOSTILE, strict=True)
    for number, (answer, (_changes, problem)) in enumerate(pairs, 2):
        assert answer["line"] == number
        assert answer["error"].startswith(f"line {number}: invalid request spec: "), answer
        assert problem in answer["error"], (problem, answer["error"])
    assert invalid[-1]["error"].startswith(f"line {len(HOSTILE) + 2}")
    assert "not JSON" in invalid[-1]["error"] or "Expecting" in invalid[-1]["error"]


def _rows(db, table):
    with db.read() as conn:
        return conn.execute(sa.select(table)).all()


def test_hostile_specs_are_refused_and_nothing_leaves_the_prefix(db, client, app, tmp_path):
    hosts = add_hosts(db, client, [(f"h{i}", "cell1", "performance", 8, 8192) for i in range(3)])
    server = PrefixedPlacement(app)
    try:
        specs = tmp_path / "specs.jsonl"

        # scheduler.batch: the two good requests placed, every bad one answered.
        specs.write_text("\n".join(_spec_lines("sched")) + "\n")
        res, answers = _run_batch(specs, tmp_path / "sched.jsonl", server.url)
        assert res.returncode == 1, res.stderr  # some lines were invalid
        assert [a["status"] for a in answers] == ["placed"] + ["invalid"] * (len(HOSTILE) + 1) + [
            "placed"
        ]
        _assert_invalid_answers(answers[1:-1])
        summary = json.loads(res.stderr.strip().splitlines()[-1])
        assert (summary["placed"], summary["invalid"], summary["failed"]) == (
            2,
            len(HOSTILE) + 1,
            0,
        )
        assert answers[0]["version"] == "1.0" and answers[0]["selections"][0][0]["claimed"]

        # build-submit's reader, the scheduler-worker service and the
        # conductors: bad lines answered at once and sent nowhere, the good
        # instances built and recorded.
        overrides = {
            ("filter_scheduler", "page_size"): 1,
            ("filter_scheduler", "max_placement_results"): 0,
        }
        with bus.in_process(server.url, cells=("cell1",), overrides=overrides) as cloud:
            counts, answers = cloud.submit(_spec_lines("cond"))
        assert (counts["placed"], counts["invalid"], counts["failed"], counts["unanswered"]) == (
            2,
            len(HOSTILE) + 1,
            0,
            0,
        ), counts
        invalid = [a for a in answers if a["status"] == "invalid"]
        _assert_invalid_answers(invalid)
        built = sorted(
            (a for a in answers if a["status"] != "invalid"), key=lambda a: a["request_id"]
        )
        assert [b["request_id"] for b in built] == ["req-cond-1", "req-cond-2"]
        assert all(b["status"] == "placed" and b["host_uuid"] in hosts.values() for b in built), (
            built
        )
    finally:
        server.stop()

    # Nothing was recorded for a hostile spec: no trait, no report, no build
    # request, no allocation beyond the four good instances.
    for trait in ("CUSTOM_X", "CUSTOM_Y"):
        assert client.get(f"/traits/{trait}").status_code == 404
    reports = {r.request_id for r in _rows(db, models.scheduling_reports)}
    assert reports == {"req-sched-1", "req-sched-2", "req-cond-1", "req-cond-2"}
    records = _rows(db, models.build_requests)
    assert sorted((r.request_id, r.status) for r in records) == [
        ("req-cond-1", "placed"),
        ("req-cond-2", "placed"),
    ]
    used = sum(
        client.get(f"/resource_providers/{h}/usages").get_json()["usages"]["VCPU"]
        for h in hosts.values()
    )
    assert used == 4

    # Every request either tool sent stayed under the prefix, the next links
    # (one host per page) included.
    assert server.targets
    assert all(t.startswith(PREFIX + "/") for t in server.targets), [
        t for t in server.targets if not t.startswith(PREFIX + "/")
    ]
    assert any("page_marker" in t or "page=" in t for t in server.targets)
