"""conductor-worker over a live placement: pending demand is visible, a
restarted conductor resumes what was pending, nothing is claimed twice."""

import json

from conductor import cmd as conductor_cmd
from joule import request_spec as spec_mod
from tests.functional.test_scheduler_e2e import add_hosts
from tests.functional.test_scheduler_e2e import make_scheduler


def test_restart_resumes_pending_and_pending_demand_is_counted(db, client, live_server,
                                                                tmp_path, monkeypatch, capsys):
    hosts = add_hosts(db, client, [("p1", "c1", "performance", 8, 8192),
                                   ("e1", "c1", "eco", 8, 8192)])
    sched, pc = make_scheduler(live_server)
    # A conductor recorded two performance builds, claimed one, then died.
    specs = [spec_mod.load_request_spec({
        "version": "1.0", "resources": {"VCPU": 2, "MEMORY_MB": 1024},
        "workload_class": "performance", "project_id": "p", "user_id": "u"})
        for _ in range(2)]
    for s in specs:
        pc.create_build_request(s.instance_uuids[0], s.request_id, s.workload_class,
                                spec_mod.dump_request_spec(s))
    sched.select_destinations(specs[0])
    pending = client.get("/build_requests?status=pending&workload_class=performance")
    assert len(pending.get_json()["build_requests"]) == 2

    # The restarted conductor resumes both, then builds one new standard request.
    new = tmp_path / "specs.jsonl"
    new.write_text(json.dumps({"version": "1.0", "resources": {"VCPU": 1, "MEMORY_MB": 512},
                               "project_id": "p", "user_id": "u"}) + "\n")
    monkeypatch.setenv("OS_PLACEMENT__ENDPOINT_OVERRIDE", live_server.url)
    out = tmp_path / "out.jsonl"
    rc = conductor_cmd.main(["--requests", str(new), "--output", str(out)])
    assert rc == 0, capsys.readouterr().err
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in results] == ["placed", "placed", "placed"]
    assert {r["host_uuid"] for r in results[:2]} == {hosts["p1"]}
    assert results[2]["host_uuid"] == hosts["e1"]
    assert client.get("/build_requests?status=pending").get_json()["build_requests"] == []
    # Each resumed instance holds exactly one claim: 2 x 2 VCPU on p1.
    usages = client.get(f"/resource_providers/{hosts['p1']}/usages").get_json()["usages"]
    assert usages["VCPU"] == 4
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["placed"] == 3 and summary["failed"] == 0


def test_conductor_worker_reports_unreachable_placement(monkeypatch, capsys):
    monkeypatch.setenv("OS_PLACEMENT__ENDPOINT_OVERRIDE", "http://127.0.0.1:9")
    monkeypatch.setenv("OS_PLACEMENT__CONNECT_RETRIES", "0")
    assert conductor_cmd.main([]) == 3
    err = capsys.readouterr().err
    assert "placement at http://127.0.0.1:9 is unreachable" in err
    assert "resumed on the next start" in err
