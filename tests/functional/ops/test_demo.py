"""placement-demo: the newcomer's first command, end to end in one process."""

import json

from placement_demo import run as demo


def test_demo_json_summary_is_the_last_line(capsys):
    rc = demo.main(["--requests", "24", "--seed", "3", "--failure-rate", "0.25", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0
    summary = json.loads(out.strip().splitlines()[-1])
    for key in (
        "requests",
        "placed",
        "failed",
        "rescheduled",
        "races_lost",
        "performance_on_eco",
        "families",
    ):
        assert key in summary
    assert summary["requests"] == 24
    assert summary["placed"] + summary["failed"] == summary["instances"] == 24
    assert summary["performance_on_eco"] == 0
    assert summary["performance_requests"] > 0
    # A quarter of builds fail: some instances moved to an alternate.
    assert summary["rescheduled"] > 0
    fams = summary["families"]
    assert sum(f["nodes"] for f in fams.values()) == 41
    assert (
        sum(f["performance_placed"] + f["standard_placed"] for f in fams.values())
        == summary["placed"]
    )
    # The table and the progress report are there for humans.
    assert "performance on eco/draining" in out
    assert "temporary, removed at exit" in err and "24/24" in err


def test_demo_reads_every_page_of_nodes(capsys, monkeypatch):
    """GET /nodes pages: at 5 a page the summary still covers the 41 nodes."""
    from joule import placement_client
    from placement import paging

    monkeypatch.setattr(paging, "DEFAULT_LIMIT", 5)
    monkeypatch.setattr(placement_client, "LISTING_PAGE", 5)
    rc = demo.main(["--requests", "4", "--seed", "3", "--json"])
    out, _err = capsys.readouterr()
    assert rc == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert sum(f["nodes"] for f in summary["families"].values()) == 41
    assert summary["placed"] == 4 and summary["performance_on_eco"] == 0


def test_demo_bad_inventory_is_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "inv.yaml"
    bad.write_text("nodes: 3\n")
    rc = demo.main(["--inventory", str(bad), "--requests", "1"])
    _out, err = capsys.readouterr()
    assert rc == 2
    assert "placement-demo:" in err and "nodes" in err
    assert demo.main(["--failure-rate", "2"]) == 2
