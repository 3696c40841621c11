"""joule.startup: what stops a console script is one line and an exit status;
joule.rpc registers oslo.messaging's options through its public list_opts."""

import pytest
from oslo_config import cfg

from joule import config
from joule import placement_client
from joule import rpc
from joule import startup

UNREACHABLE = placement_client.PlacementUnreachable("GET", "/", "http://x:9", "refused")


def _raise(exc):
    def body():
        raise exc

    return body


@pytest.mark.parametrize(
    ("body", "status", "line"),
    [
        (lambda: None, 0, None),
        (lambda: 1, 1, None),
        (_raise(config.ConfigError("bad configuration: [a] b: no")), 2, "bad configuration"),
        (_raise(UNREACHABLE), 3, "placement at http://x:9 is unreachable"),
        (
            _raise(placement_client.AuthenticationFailed("GET", "/", 401)),
            3,
            "placement authentication failed",
        ),
        (_raise(startup.StartupError("pass failed: no")), 1, "pass failed: no"),
        (_raise(startup.StartupError("schema", status=2)), 2, "schema"),
    ],
)
def test_run_turns_what_stops_a_script_into_one_line_and_a_status(capsys, body, status, line):
    assert startup.run("prog", body) == status
    err = capsys.readouterr().err
    if line is None:
        assert err == ""
    else:
        assert err.startswith(f"prog: error: {line}") and err.count("\n") == 1


def test_run_adds_the_scripts_own_unavailable_errors_and_keeps_bugs(capsys):
    bus = rpc.BusUnreachable("RabbitMQ at h:5672 refused the connection")
    assert startup.run("prog", _raise(bus)) == 3
    assert capsys.readouterr().err == f"prog: error: {bus}\n"
    assert startup.run("prog", _raise(LookupError("gone")), unavailable=(LookupError,)) == 3
    assert capsys.readouterr().err == "prog: error: gone\n"
    with pytest.raises(KeyError):
        startup.run("prog", _raise(KeyError("a bug")))


def test_failed_says_what_failed_with_the_status_of_placement_unavailable():
    unreachable = startup.failed("reconcile failed", UNREACHABLE)
    assert (str(unreachable), unreachable.status) == (f"reconcile failed: {UNREACHABLE}", 3)
    refused = startup.failed("dry run failed", placement_client.ServerError("GET", "/nodes", 500))
    assert refused.status == 1 and str(refused).startswith("dry run failed: placement answered")


def test_load_with_arguments_splits_own_and_oslo_arguments(tmp_path):
    parser = config.ArgumentParser(prog="prog")
    parser.add_argument("--once", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    conf_file = tmp_path / "prog.conf"
    conf_file.write_text("[DEFAULT]\nhost = example\n")

    def register(conf):
        conf.register_opts([cfg.StrOpt("host", default="here")])

    args, conf = startup.load_with_arguments(
        parser, ["--once", "-v", "--config-file", str(conf_file)], register
    )
    assert args.once and conf.host == "example" and conf.debug is True
    with pytest.raises(config.ConfigError, match="unrecognized arguments: --nope"):
        startup.load_with_arguments(parser, ["--nope"], register)


def test_the_services_register_the_bus_options_oslo_messaging_lists():
    conf = cfg.ConfigOpts()
    rpc.register_opts(conf)
    listed = dict(rpc.oslo_messaging.opts.list_opts())
    for group in rpc.MESSAGING_GROUPS:
        registered = set(conf[group] if group else conf)
        assert {opt.dest for opt in listed[group]} <= registered, group
    # Read on every message by the RPC client and server, not listed.
    assert conf.oslo_messaging_metrics.metrics_enabled is False
    assert conf.oslo_messaging_tracing.tracing_enabled is False
    assert (conf.transport_url, conf.control_exchange) == (
        rpc.DEFAULT_TRANSPORT_URL,
        rpc.CONTROL_EXCHANGE,
    )
