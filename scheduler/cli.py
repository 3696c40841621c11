"""Start-up shared by ``scheduler-worker`` and ``conductor-worker``.

Both read request specs as JSON lines and write outcomes as JSON lines; both
take a config file plus a few command-line options, load the enabled filters
up front, log with oslo.log to stderr and check placement before reading input.
"""

import contextlib
import logging
import sys

from joule import config
from joule import placement_client
from scheduler import filters as filters_mod
from scheduler import weighers as weighers_mod


def load_conf(argv, prog, project, register_opts, cli_opts):
    """Parse ``argv`` into a new ConfigOpts, check every option and the filter
    and weigher lists (installed entry points), set up oslo.log (``--debug``, ``--log-file`` ...).

    Raises ``joule.config.ConfigError`` (one line) when anything is wrong;
    the caller prints it and exits ``config.EXIT_CONFIG``.
    """

    def check_filters(conf):
        try:
            filters_mod.from_conf(conf.filter_scheduler)
            weighers_mod.load(conf.filter_scheduler)
        except (filters_mod.UnknownFilter, weighers_mod.UnknownWeigher) as exc:
            raise config.ConfigError(f"bad configuration: {exc}") from None

    conf = config.load(
        prog,
        project,
        register_opts,
        argv=argv,
        cli_opts=cli_opts,
        checks=[check_filters, placement_client.check_conf],
        default_config_files=[],
    )
    if not conf.debug:
        # stderr ends with the run's summary line: say only what went wrong
        # (warnings and errors) unless --debug asks for everything.
        logging.getLogger().setLevel(logging.WARNING)
    return conf


def check_placement(client):
    """One authenticated read at start-up, so an unreachable placement or
    refused credentials stop the command before it reads any input.

    :raise placement_client.PlacementUnreachable, AuthenticationFailed:
    """
    client.check()


def open_stream(path, mode):
    """A context manager for ``path`` opened in ``mode``; ``-`` is stdin/stdout.

    The standard streams are handed out as they are and left open on exit.
    """
    if path == "-":
        return contextlib.nullcontext(sys.stdin if "r" in mode else sys.stdout)
    return open(path, mode, encoding="utf-8")
