"""Shared start-up for the console scripts: config parsing and one-line failures."""

import sys

from oslo_config import cfg

from placement import conf as conf_mod
from placement import db as db_mod


class StartupError(Exception):
    """A problem the operator must fix; printed as one line, exit status 1
    (or ``status``)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


# Exit status of a service started on a database whose schema is missing or
# old: the operator runs the named command (placement-manage db sync).
SCHEMA_NOT_CURRENT = 2


def schema_error(exc):
    """A StartupError (exit 2) from a migration.SchemaNotCurrent."""
    return StartupError(str(exc), status=SCHEMA_NOT_CURRENT)


def parse_conf(argv, cli_opts=(), prog=None, setup=None):
    """Parse argv into a fresh ConfigOpts; raise StartupError on a bad config."""
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    if setup is not None:
        setup(conf)
    conf.register_cli_opts(list(cli_opts))
    try:
        conf(args=argv, project="placement", prog=prog, default_config_files=None,
             validate_default_values=True)
    except cfg.ConfigFilesNotFoundError as exc:
        raise StartupError(f"config file not found: {', '.join(exc.config_files)}")
    except cfg.ConfigFileParseError as exc:
        raise StartupError(f"cannot parse config file {exc.config_file}: {exc.msg}")
    except (cfg.Error, ValueError) as exc:
        raise StartupError(f"bad configuration: {str(exc).splitlines()[0]}")
    try:
        # Touch every option once so a bad value fails now, not mid-request.
        for group, opts in conf_mod.list_opts():
            for opt in opts:
                getattr(getattr(conf, group.name), opt.dest)
    except (cfg.Error, ValueError) as exc:
        raise StartupError(f"bad configuration: {str(exc).splitlines()[0]}")
    return conf


def open_database(conf):
    db = db_mod.Database.from_conf(conf, conf_mod.connection_url(conf))
    try:
        db.check()
    except db_mod.DatabaseError as exc:
        raise StartupError(str(exc))
    return db


def run(main_body, prog):
    """Run ``main_body()``, turning StartupError and Ctrl-C into clean exits."""
    try:
        return main_body() or 0
    except StartupError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        return 130
