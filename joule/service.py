"""Run a long-running RPC service until SIGTERM, the way every worker does.

SIGTERM (or Ctrl-C) stops taking messages, lets the ones in hand finish
(``server.wait()``), runs the service's own stop hooks and returns. The bus
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

    def add_server(self, topic_name, endpoints):
        self.servers.append(
            rpc.make_server(self.conf, self.transport, topic_name, endpoints, self.name)
        )

    def start(self):
        for server in self.servers:
            server.start()

    def stop(self):
        """Stop taking messages, finish those in hand, run the stop hooks."""
        self.stopping.set()
        for server in self.servers:
            server.stop()
        for server in self.servers:
            server.wait()
        for hook in self.stop_hooks:
            hook()

    def run_until_signalled(self, ready=None):
        """start(), say ``ready`` on stderr, wait for SIGTERM/SIGINT, stop()."""
        done = threading.Event()

        def on_signal(signum, _frame):
            LOG.info("%s: signal %d, finishing the messages in hand", self.name, signum)
            done.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        if ready:
            print(ready, file=sys.stderr, flush=True)
        while not done.wait(1.0):
            pass
        self.stop()
