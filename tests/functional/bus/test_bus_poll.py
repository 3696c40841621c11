"""The bounded RPC server's poll on RabbitMQ: quiet when it holds nothing,
prompt with an acknowledgement when it does.

An idle service looked at its connection 20 times a second (about half a
millisecond of CPU each in oslo's and kombu's wrappers: 1.2 % of a core per
server; ``python -m benchmarks.rpc_idle`` measures it). Holding nothing,
no handler can ask for an ack and a delivery wakes the poll anyway, so it
now waits up to ``IDLE_POLL_SECONDS``; holding a message, it still looks every
``ACK_LATENCY`` seconds, so the ack a handler asks for leaves at once.

The server runs in this process (it is the class under test), on the real
RabbitMQ, in a virtual host of the test's own.
"""

# joule.rpc first: it imports oslo.messaging with its import-time warnings
# silenced, which the driver module below would otherwise raise.
import threading  # noqa: I001
import time

from joule import rpc
from joule.rpc import oslo_messaging
from oslo_messaging._drivers import impl_rabbit

from joule import rpc_server
from scheduler import conf as sconf


class _Endpoint:
    target = oslo_messaging.Target(version="1.0")

    def __init__(self):
        self.returned = threading.Event()
        self.returned_at = None

    def hold(self, ctxt, seconds):
        time.sleep(seconds)
        self.returned_at = time.monotonic()
        self.returned.set()


def _counting_polls(monkeypatch):
    """The number of times the process's RabbitMQ connections waited for
    a delivery (a list of one, updated in place)."""
    count = [0]
    consume = impl_rabbit.Connection.consume

    def counted(self, *args, **kwargs):
        count[0] += 1
        return consume(self, *args, **kwargs)

    monkeypatch.setattr(impl_rabbit.Connection, "consume", counted)
    return count


def test_an_idle_server_polls_rarely_and_a_held_message_is_acked_at_once(vhost, monkeypatch):
    polls = _counting_polls(monkeypatch)
    conf = sconf.make_conf(
        overrides={(None, "transport_url"): f"rabbit://guest:guest@127.0.0.1:5672/{vhost}"}
    )
    transport = rpc.transport_of(conf)
    target = oslo_messaging.Target(topic="poll-probe", server="p1")
    endpoint = _Endpoint()
    server = rpc_server.make(transport, target, [endpoint], ack_when_done=True)
    server.start()
    try:
        time.sleep(1.5)  # connected, consuming, the wait backed off
        before, start = polls[0], time.monotonic()
        time.sleep(3.0)
        idle_polls, idle_seconds = polls[0] - before, time.monotonic() - start
        # 1 s waits: about 3 (20 a second before, 60 in these 3 s).
        assert idle_polls <= idle_seconds / rpc_server.IDLE_POLL_SECONDS + 2, idle_polls

        client = oslo_messaging.get_rpc_client(transport, target)
        client.cast({}, "hold", seconds=2.5)
        assert endpoint.returned.wait(timeout=20)
        listener = server._listener
        while listener.held():
            assert time.monotonic() - endpoint.returned_at < 5, "never acknowledged"
            time.sleep(0.01)
        # A cast is acknowledged once its endpoint returned (a conductor's
        # work is recorded by then): within a few ACK_LATENCY, not an idle wait.
        acked_after = time.monotonic() - endpoint.returned_at
        assert acked_after < 0.3, acked_after
    finally:
        start = time.monotonic()
        server.stop()
        server.wait()
        stopped_after = time.monotonic() - start
        transport.cleanup()
    # A stop waits for the poll to give the connection up: one idle wait at
    # most, and the cancel's drain.
    assert stopped_after < rpc_server.IDLE_POLL_SECONDS + rpc_server.CANCEL_DRAIN_SECONDS + 2
