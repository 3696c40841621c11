"""joule-server's command line: its exit statuses before any instance is read."""

import pytest

from conductor import server_cli


def test_version_and_help_exit_0(capsys):
    for args in (["--version"], ["--help"], ["list", "--help"]):
        with pytest.raises(SystemExit) as stop:
            server_cli.main(args)
        assert stop.value.code == 0
    assert capsys.readouterr().out


@pytest.mark.parametrize(
    "args, said",
    [
        ([], "the following arguments are required: command"),
        (["frob"], "invalid choice: 'frob'"),
        (["delete"], "the following arguments are required: instance_uuid"),
        (["list", "--status", "running"], "invalid choice: 'running'"),
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2(capsys, args, said):
    assert server_cli.main(args) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1


def test_an_unreachable_placement_is_exit_3(capsys, monkeypatch):
    monkeypatch.setenv("OS_PLACEMENT__ENDPOINT_OVERRIDE", "http://127.0.0.1:9")
    monkeypatch.setenv("OS_PLACEMENT__AUTH_TYPE", "noauth")
    assert server_cli.main(["list"]) == 3
    assert "unreachable" in capsys.readouterr().err
