"""Run a long-running RPC service until SIGTERM, the way every worker does.

SIGTERM (or Ctrl-C) stops taking messages at once (the queued ones, and
those it held but had not started, stay on RabbitMQ for another process:
joule.rpc_server), lets the ones in hand finish (``server.wait()``), runs
the service's own stop hooks and returns, all within ``[rpc] stop_timeout``
seconds: past it the process exits anyway (joule.rpc.run_service), since
nothing it holds is lost by that (a message it did not finish was not
acknowledged and is delivered again; a conductor's records are leased, and
another conductor's sweep takes them over). The bus
itself is checked once at start-up so an unreachable RabbitMQ is one line
and exit status 2, not a process that retries in silence; once running,
oslo.messaging reconnects with backoff on its own ([oslo_messaging_rabbit]
rabbit_retry_interval, rabbit_retry_backoff, rabbit_interval_max).
"""

import logging
import os
import signal
import socket
import sys
import threading
import uuid

from joule import rpc

LOG = logging.getLogger(__name__)


def process_name(role):
    """A name unique to this process start: ``<role>@<host>:<pid>:<8 hex>``.

    Host and pid alone collide between containers that share a hostname and
    run their service as PID 1 (two conductors would hold the same leases),
    so a fresh uuid4 prefix is appended. A service calls it once, at start,
    and keeps the name (its lease owner and RPC server name) for its life."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Service:
    """RPC servers on one transport, started together, stopped together."""

    def __init__(self, conf, transport, name):
        self.conf = conf
        self.transport = transport
        self.name = name
        self.servers = []
        self.stop_hooks = []
        self.stopping = threading.Event()

    def add_server(self, topic_name, endpoints, ack_when_done=False):
        """Serve ``topic_name``; ``ack_when_done``: a cast is acknowledged
        once its endpoint returned (joule.rpc_server)."""
        self.servers.append(
            rpc.make_server(
                self.conf, self.transport, topic_name, endpoints, self.name, ack_when_done
            )
        )

    def start(self):
        for server in self.servers:
            server.start()

    def stop(self, timeout=None):
        """Stop taking messages, finish those in hand, run the stop hooks;
        whether all of it was done within ``timeout`` seconds (None: wait
        for it). What is left past the timeout goes on in its threads."""
        self.stopping.set()
        for server in self.servers:
            server.stop()

        def finish():
            for server in self.servers:
                server.wait()
            for hook in self.stop_hooks:
                hook()

        if timeout is None:
            finish()
            return True
        thread = threading.Thread(target=finish, name="stop", daemon=True)
        thread.start()
        thread.join(timeout)
        return not thread.is_alive()

    def run_until_signalled(self, ready=None):
        """start(), say ``ready`` on stderr, wait for SIGTERM/SIGINT, stop()
        within ``[rpc] stop_timeout``; whether the stop finished in time."""
        done = threading.Event()

        def on_signal(signum, _frame):
            LOG.info(
                "%s: signal %d, taking no more messages, finishing those in hand",
                self.name,
                signum,
            )
            done.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        if ready:
            print(ready, file=sys.stderr, flush=True)
        # A short wait: the stop starts at most this long after the signal.
        while not done.wait(0.2):
            pass
        return self.stop(self.conf.rpc.stop_timeout)
