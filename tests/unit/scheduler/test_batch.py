"""python -m scheduler.batch: one outcome line per input line, clear invalid lines."""

import io
import json

from scheduler import batch as cmd
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host


def test_outcome_per_line():
    fake = FakePlacement([host("a")])
    lines = [
        json.dumps(
            {
                "version": "1.0",
                "resources": {"VCPU": 1},
                "project_id": "p",
                "user_id": "u",
                "request_id": "req-ok",
            }
        ),
        "",
        "{nope",
        json.dumps({"version": "1.0", "resources": {"VCPU": 1}, "project_id": "p"}),
        json.dumps(
            {"version": "1.0", "resources": {"VCPU": 99}, "project_id": "p", "user_id": "u"}
        ),
    ]
    out = io.StringIO()
    counts = cmd.run(make_conf(), lines, out, client=fake)
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [g["status"] for g in got] == ["placed", "invalid", "invalid", "failed"]
    assert got[0]["request_id"] == "req-ok"
    assert got[0]["selections"][0][0]["host_name"] == "a"
    assert got[1]["error"].startswith("line 3 is not JSON")
    assert got[2]["error"].startswith("line 4: invalid request spec: user_id:")
    assert "placement returned no candidates" in got[3]["error"]
    assert counts == {"requests": 4, "placed": 1, "failed": 1, "invalid": 2, "races_lost": 0}
