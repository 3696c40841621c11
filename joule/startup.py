"""How every console script turns what stops it into one line and an exit status.

A console script's ``main`` is ``startup.run(prog, body)``: ``body()`` does
the work and returns the exit status (None is 0); what stops it on the way
is printed as ``prog: error: <one line>`` on stderr and ends it with:

- ``EXIT_CONFIG`` (2) for a ``joule.config.ConfigError``: the configuration,
  the command line or a start-up check (``joule.config.load`` raises them);
- ``EXIT_UNAVAILABLE`` (3) for a service the script needs that is not
  there: placement unreachable or refusing our credentials, an
  ``Unavailable`` (``rpc.BusUnreachable``: the bus), and the script's own
  ``unavailable`` exceptions;
- its own status for a ``StartupError``, a failure the script words itself
  (``failed`` words a failed placement call).

Anything else is a bug and keeps its traceback. The exit statuses are
``joule.config``'s (0 done, 1 the work failed, 2, 3).
"""

from joule import config
from joule import placement_client


class Unavailable(Exception):
    """A service the script needs is not there (exit 3); the message is one line."""


# Placement (or another service) is not there for us, rather than said no.
UNAVAILABLE = (*placement_client.NOT_THERE, Unavailable)


class StartupError(Exception):
    """A failure the operator reads as one line; exit ``status`` (1: the work failed)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def run(prog, body, unavailable=()):
    """``body()``'s exit status, or the status of what stopped it (its line on stderr)."""
    try:
        status = body()
    except config.ConfigError as exc:
        return config.fail(prog, exc)
    except StartupError as exc:
        return config.fail(prog, exc, exc.status)
    except (*UNAVAILABLE, *unavailable) as exc:
        return config.fail(prog, exc, config.EXIT_UNAVAILABLE)
    return status or 0


def failed(what, exc):
    """The StartupError of a placement call that failed while doing ``what``:
    ``what: exc``, exit 3 when placement was unavailable, else 1."""
    status = config.EXIT_UNAVAILABLE if isinstance(exc, UNAVAILABLE) else 1
    return StartupError(f"{what}: {exc}", status)


def load_with_arguments(parser, argv, register, checks=(), project=None):
    """(arguments, conf) of a console script with arguments of its own.

    ``parser`` (a ``joule.config.ArgumentParser`` with a ``-v/--verbose``
    flag, which means oslo.log's ``--debug``) takes its own; the rest
    (``--config-file``, ``--config-dir`` ...) goes to ``joule.config.load``
    with ``checks``. No config file is read unless one is named. The
    oslo.config project is the script's name unless ``project`` says.
    """
    args, rest = parser.parse_known_args(argv)
    if args.verbose:
        rest.append("--debug")
    conf = config.load(
        parser.prog,
        project or parser.prog,
        register,
        argv=rest,
        checks=checks,
        default_config_files=[],
    )
    return args, conf
