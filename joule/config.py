"""Configuration and start-up shared by every console script.

``make_conf`` builds a fresh ConfigOpts (never oslo.config's global one, so
tests, the demo and several services in one process stay apart). ``load``
is what a console script calls first: it parses the command line and the
config files, reads every option once so a bad value fails now with its
name rather than mid-request, runs the service's own checks, adds
``--version`` and oslo.log's options (``--debug``, ``--log-file``,
``--use-syslog``, ``--use-json`` ...) and sets logging up. Whatever is wrong
comes back as one ``ConfigError`` line; the script prints it and exits with
``EXIT_CONFIG``.

Exit statuses shared by the console scripts: 0 done, 1 the work failed
(see each command), ``EXIT_CONFIG`` (2) configuration, command line or a
start-up check, ``EXIT_UNAVAILABLE`` (3) placement unreachable or refusing
our credentials.
"""

import argparse
import contextlib
import importlib.metadata
import io
import logging
import sys

from oslo_config import cfg
from oslo_log import log as oslo_log

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 3


class ConfigError(Exception):
    """A configuration the operator must fix, said in one line."""


class ArgumentParser(argparse.ArgumentParser):
    """A console script's own arguments: a mistake is one ConfigError line
    (exit 2, as every other configuration error), not argparse's usage text."""

    def error(self, message):
        raise ConfigError(message)


def version():
    """The installed package's version."""
    try:
        return importlib.metadata.version("joule-placement")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def make_conf(register, args=None, default_config_files=None, overrides=None, project=None):
    """A fresh ConfigOpts with the options ``register(conf)`` registers.

    ``default_config_files`` defaults to none (not oslo.config's search of
    /etc), so a test or the demo never reads a machine's files by accident.
    ``overrides`` maps ``(group, option)`` (group None for DEFAULT) to a
    value that wins over files and the environment.
    """
    conf = cfg.ConfigOpts()
    register(conf)
    conf(
        args=list(args or []),
        project=project,
        default_config_files=[] if default_config_files is None else default_config_files,
        validate_default_values=True,
    )
    for (group, name), value in (overrides or {}).items():
        conf.set_override(name, value, group=group)
    return conf


def load(
    prog,
    project,
    register,
    argv=None,
    cli_opts=(),
    checks=(),
    default_config_files=None,
    setup_logging=True,
):
    """Parse, validate and set up logging for a console script.

    ``checks`` are callables ``check(conf)`` run after every option was read;
    one that raises (any ``cfg.Error``/``ValueError``, or a ConfigError with
    its own words) stops the start-up with its message. ``default_config_files``
    None means oslo.config's usual search for ``<project>.conf``.
    Raises ConfigError; ``--help`` and ``--version`` exit 0 as usual.
    """
    conf = cfg.ConfigOpts()
    register(conf)
    if setup_logging:
        oslo_log.register_options(conf)
        # Logs go to stderr: stdout carries the commands' results (JSON lines,
        # --json objects), which a log line must never interleave.
        conf.set_default("use_stderr", True)
    conf.register_cli_opts(list(cli_opts))
    with _held_back_logs() as held:
        _parse(
            conf, prog, project, sys.argv[1:] if argv is None else list(argv), default_config_files
        )
        check_values(conf)
        for check in checks:
            try:
                check(conf)
            except ConfigError:
                raise
            except (cfg.Error, ValueError) as exc:
                raise ConfigError(f"bad configuration: {_first_line(exc)}") from None
    if setup_logging:
        oslo_log.setup(conf, project, version=version())
    # Said while reading the configuration (deprecated option names, mostly):
    # logged now, through the service's logging, once the start-up went through.
    for record in held:
        logging.getLogger(record.name).handle(record)
    return conf


@contextlib.contextmanager
def _held_back_logs():
    """Keep what is logged while the configuration is read off stderr until it
    is known to be good, so a bad configuration is one line, not a warning
    about a deprecated name followed by the error."""
    held = []

    class Hold(logging.Handler):
        def emit(self, record):
            held.append(record)

    root = logging.getLogger()
    handler, saved = Hold(), root.handlers[:]
    root.handlers[:] = [handler]
    try:
        yield held
    finally:
        root.handlers[:] = saved


def _parse(conf, prog, project, argv, default_config_files):
    # argparse reports a bad command line as usage text plus "prog: error:
    # ..." on stderr and SystemExit(2); keep only the error line.
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            conf(
                args=argv,
                project=project,
                prog=prog,
                version=version(),
                default_config_files=default_config_files,
                validate_default_values=True,
            )
    except SystemExit as exc:
        if exc.code in (0, None):
            sys.stderr.write(err.getvalue())
            raise
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        message = lines[-1] if lines else "bad command line"
        prefix = f"{prog}: error: "
        raise ConfigError(
            message[len(prefix) :] if message.startswith(prefix) else message
        ) from None
    except cfg.ConfigFilesNotFoundError as exc:
        raise ConfigError(f"config file not found: {', '.join(exc.config_files)}") from None
    except cfg.ConfigFileParseError as exc:
        raise ConfigError(f"cannot parse config file {exc.config_file}: {exc.msg}") from None
    except (cfg.Error, ValueError) as exc:
        raise ConfigError(f"bad configuration: {_first_line(exc)}") from None
    # Anything else said on the way (warnings) is not an error: pass it on.
    sys.stderr.write(err.getvalue())


def check_values(conf):
    """Read every registered option once; the first bad value is a ConfigError
    naming its group, option and why."""
    for name in list(conf):
        value = _read(conf, None, name)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt in list(value):
                _read(conf, name, opt)


def _read(conf, group, name):
    try:
        return (conf[group] if group else conf)[name]
    except (cfg.Error, ValueError) as exc:
        where = f"[{group or 'DEFAULT'}] {name}"
        reason = _first_line(exc)
        if " is not valid: " in reason:
            reason = reason.split(" is not valid: ", 1)[1]
        raise ConfigError(f"bad configuration: {where}: {reason}") from None


def _first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def fail(prog, message, status=EXIT_CONFIG):
    """Print ``prog: error: message`` on stderr; return ``status`` for main()."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status
