"""Shared start-up for the console scripts: config parsing and one-line failures."""

import sqlalchemy as sa

from joule import config
from joule import startup
from placement import conf as conf_mod
from placement import db as db_mod

# A problem the operator must fix: one line, exit status 1 (or ``status``).
StartupError = startup.StartupError


# Exit status of a service started on a database whose schema is missing or
# old: the operator runs the named command (placement-manage db sync).
SCHEMA_NOT_CURRENT = 2


def schema_error(exc):
    """A StartupError (exit 2) from a migration.SchemaNotCurrent."""
    return StartupError(str(exc), status=SCHEMA_NOT_CURRENT)


def parse_conf(argv, cli_opts=(), prog=None, setup=None):
    """Parse argv into a fresh ConfigOpts, check every option, set up oslo.log.

    Raises StartupError (exit 2, one line) on a bad command line, a missing or
    unparseable config file or a bad value.
    """

    def register(conf):
        conf_mod.register_opts(conf)
        if setup is not None:
            setup(conf)

    try:
        return config.load(
            prog, "placement", register, argv=argv, cli_opts=cli_opts, checks=[_check_connection]
        )
    except config.ConfigError as exc:
        raise StartupError(str(exc), status=config.EXIT_CONFIG) from None


def _check_connection(conf):
    """The database URL parses and names a dialect SQLAlchemy has."""
    url = conf_mod.connection_url(conf)
    try:
        sa.engine.make_url(url).get_dialect()
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise config.ConfigError(
            f"bad configuration: [placement_database] connection: {exc}"
        ) from None


def open_database(conf):
    db = db_mod.Database.from_conf(conf, conf_mod.connection_url(conf))
    try:
        db.check()
    except db_mod.DatabaseError as exc:
        raise StartupError(str(exc))
    return db


def run(main_body, prog):
    """``main_body()``'s exit status through joule.startup.run (a StartupError
    is its line and status); Ctrl-C exits 130."""
    try:
        return startup.run(prog, main_body)
    except KeyboardInterrupt:
        return 130
