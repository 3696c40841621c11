"""Start-up shared by ``scheduler-worker`` and ``conductor-worker``.

Both read request specs as JSON lines and write outcomes as JSON lines; both
take a config file plus a few command-line options, load the enabled filters
up front and log to stderr.
"""

import contextlib
import logging
import sys

from oslo_config import cfg

from scheduler import filters as filters_mod


def load_conf(argv, prog, project, register_opts, cli_opts):
    """Parse ``argv`` into a new ConfigOpts, load the filters, set up logging.

    ``register_opts(conf)`` registers the command's config options and
    ``cli_opts`` (which must include a ``debug`` BoolOpt) its command-line
    ones. Returns None after telling stderr why when the configuration or
    the filter list is bad; the caller then exits 2.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf.register_cli_opts(cli_opts)
    try:
        conf(args=sys.argv[1:] if argv is None else argv, project=project,
             prog=prog, default_config_files=[])
        filters_mod.load(conf.filter_scheduler.enabled_filters)
    except (cfg.Error, filters_mod.UnknownFilter) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    logging.basicConfig(level=logging.DEBUG if conf.debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return conf


def open_stream(path, mode):
    """A context manager for ``path`` opened in ``mode``; ``-`` is stdin/stdout.

    The standard streams are handed out as they are and left open on exit.
    """
    if path == "-":
        return contextlib.nullcontext(sys.stdin if "r" in mode else sys.stdout)
    return open(path, mode, encoding="utf-8")
