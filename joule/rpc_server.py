"""The services' RPC server: bounded intake, acknowledged when the work is owned.

oslo.messaging's RPC server on RabbitMQ acknowledges a message the moment
it comes off the socket (its RPC listener acks in the consumer callback),
then queues it for an executor thread. With an unlimited prefetch (its
default) a process takes every queued message at once; what it has not
started is lost when it is killed, and a SIGTERM makes it work through the
whole buffer before it exits (issue 23, finding 4). This server changes
three things, built from the driver's own pieces (its listener, message and
connection classes; names private to oslo.messaging, read as of 18.3:
tests/functional/bus/test_bus_intake.py fails on RabbitMQ if they change):

- a message is acknowledged by the thread that handles it: a call when it
  starts (as oslo does, so a call is never run twice), a cast of a server
  built with ``ack_when_done`` once its endpoint returned (the conductors:
  by then its work is recorded in placement under a lease, or finished, or
  answered). A message not acknowledged yet counts against the channel's
  prefetch (``[oslo_messaging_rabbit] rabbit_qos_prefetch_count``, which
  the services default to their executor threads: joule.rpc), so a process
  holds at most that many messages it has not finished (or started); and a
  message goes to the executor only when one of its threads is free, so
  its queue holds none (one waiting there could not be given back);
- a delivered message is never dropped as a "duplicate" of one this
  process saw: a redelivery is what brings back a message whose handler
  died, and every handler takes a message it has handled before as a no-op
  (a request already recorded, a build whose record was taken);
- ``stop()`` stops taking messages at once: it cancels the consumers (the
  broker sends nothing more), and puts every message it holds but has not
  started back on the queue (a requeue), for another process; those in hand
  are finished (``wait()``).

Acknowledging and requeueing go through the listener's operations queue:
kombu's connection is not thread-safe, so they run on the thread that
polls it (after ``stop()``, on the driver's own background thread). While
the process holds a message not yet acknowledged or requeued, the poll waits
at most ``ACK_LATENCY`` seconds between looks at that queue (oslo's listener
backs off to 5 s, which with a full prefetch would hold the next message
back that long); while it holds none, no handler can ask for anything and a
delivery wakes the poll at once, so it backs off to ``IDLE_POLL_SECONDS``
(a poll costs about half a millisecond of CPU in oslo's and kombu's retry
wrappers: 20 a second were 1.2 % of a core per idle server).

The in-memory transport (``fake://``) keeps oslo's own listener: nothing
outlives its process there, so there is nothing to keep on a queue.
"""

# joule.rpc first: it imports oslo.messaging with its import-time warnings
# silenced, which the driver modules below would otherwise raise.
import logging  # noqa: I001
import threading
import time

from joule.rpc import oslo_messaging
from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import base as driver_base
from oslo_messaging._drivers import common as driver_common
from oslo_messaging.rpc import server as rpc_server

LOG = logging.getLogger(__name__)

# Seconds between two looks of the polling thread at the acks and requeues
# the handling threads asked for, when no message arrives meanwhile.
ACK_LATENCY = 0.05
# The longest poll wait while nothing is held: also the longest a stop
# waits for the poll to give up the connection.
IDLE_POLL_SECONDS = 1.0
# Seconds a stopping server reads what the broker sent before its cancel.
CANCEL_DRAIN_SECONDS = 0.5


class _LateAckMessage(amqpdriver.AMQPIncomingMessage):
    """A message acknowledged (or requeued) when its handler says so, on the
    polling thread; ``self.message`` is the driver's RabbitMessage. It
    counts as held by its listener until that is done."""

    def __init__(self, listener, *args, **kwargs):
        super().__init__(listener, *args, **kwargs)
        self._settled = False
        listener.hold()

    def acknowledge(self):
        self._on_connection_thread("acknowledge", self.message.acknowledge)

    def requeue(self):
        self._on_connection_thread("requeue", self.message.requeue)

    def _on_connection_thread(self, what, operation):
        def run():
            try:
                operation()
            except Exception as exc:  # noqa: BLE001 - the connection was lost
                # Not acknowledged (or not requeued) means back on the
                # queue once the broker sees the channel go: redelivered,
                # and handled again as a no-op.
                LOG.warning("message not %sd: %s", what, exc)
            finally:
                if not self._settled:
                    self._settled = True
                    self.listener.release()

        self._message_operations_handler.do(run)


class _LateAckListener(amqpdriver.AMQPListener):
    """The RPC listener without the ack on arrival, and without the
    duplicate cache (see the module's docstring)."""

    message_cls = _LateAckMessage
    use_cache = False

    def __init__(self, driver, conn):
        self._poll_wait = amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN
        self._held = 0
        self._held_lock = threading.Lock()
        super().__init__(driver, conn)

    def hold(self):
        """A message was received (on the polling thread)."""
        with self._held_lock:
            self._held += 1

    def release(self):
        """A held message was acknowledged or requeued."""
        with self._held_lock:
            self._held -= 1

    def held(self):
        """Messages received and not yet acknowledged or requeued."""
        return self._held

    # The poll's wait when nothing arrives: oslo's listener doubles it up to
    # 5 s; acks asked for meanwhile would wait as long, so while a message
    # is held the wait stays within ACK_LATENCY (module docstring).
    @property
    def _current_timeout(self):
        if self._held:
            return min(self._poll_wait, ACK_LATENCY)
        return self._poll_wait

    @_current_timeout.setter
    def _current_timeout(self, seconds):
        self._poll_wait = min(seconds, IDLE_POLL_SECONDS)

    def unconsumed(self):
        """Take the messages received but never polled (they arrived after
        the poll stopped)."""
        taken, self.incoming = self.incoming, []
        return taken


class BoundedRPCServer(rpc_server.RPCServer):
    """oslo's RPC server, with the intake of the module's docstring.

    :param ack_when_done: acknowledge a cast once its endpoint returned
        (else when it starts, as a call always is)."""

    def __init__(self, transport, target, dispatcher, ack_when_done=False):
        super().__init__(transport, target, dispatcher)
        self._ack_when_done = ack_when_done
        self._stopping = threading.Event()
        self._listener = None
        self._conn = None
        self._free_threads = None

    def _create_listener(self):
        driver = self.transport._driver
        if not isinstance(driver, amqpdriver.AMQPDriverBase):
            return super()._create_listener()
        # The queues of oslo's RPC listener (the topic, the topic for this
        # server alone, the topic's fanout), consumed by ours.
        conn = driver._get_connection(driver_common.PURPOSE_LISTEN)
        listener = _LateAckListener(driver, conn)
        exchange = driver._get_exchange(self._target)
        topic = self._target.topic
        for queue in (topic, f"{topic}.{self._target.server}"):
            conn.declare_topic_consumer(exchange_name=exchange, topic=queue, callback=listener)
        conn.declare_fanout_consumer(topic, listener)
        self._listener, self._conn = listener, conn
        # The executor's threads (made just before this, by start()).
        self._free_threads = threading.Semaphore(self.conf.executor_thread_pool_size)
        return driver_base.PollStyleListenerAdapter(listener, 1, None)

    def _on_incoming(self, incoming):
        """On the polling thread: hand a message to the executor only once
        one of its threads is free, so nothing waits in the executor's queue
        (where a stop could not give it back); meanwhile the acks asked for
        are sent, and a stop gives the message back to the queue."""
        if self._conn is None:
            super()._on_incoming(incoming)
            return
        while not self._free_threads.acquire(timeout=ACK_LATENCY):
            self._listener._message_operations_handler.process()
            if self._stopping.is_set():
                incoming[0].requeue()
                return
        try:
            self._work_executor.submit(self._process_and_free, incoming)
        except BaseException:
            self._free_threads.release()
            raise

    def _process_and_free(self, incoming):
        try:
            self._process_incoming(incoming)
        finally:
            self._free_threads.release()

    def _process_incoming(self, incoming):
        message = incoming[0]
        if self._stopping.is_set() and self._conn is not None:
            # Taken off the socket, never started: another process's. (The
            # in-memory transport would hand it straight back to this
            # stopping server: there it is handled, as oslo does.)
            message.requeue()
            return
        if _is_call(message) or not self._ack_when_done:
            super()._process_incoming(incoming)  # acknowledges, then dispatches
            return
        try:
            super()._process_incoming([_AckedLater(message)])
        finally:
            # Whatever the endpoint did: one that raised logged it, and a
            # message that fails every time must not come back for ever.
            message.acknowledge()

    def stop(self):
        """Stop taking messages; requeue those held and not started."""
        self._stopping.set()
        if self._conn is not None:
            self._cancel_consumers()
        super().stop()  # the poll ends; what it had taken goes to _process_incoming
        if self._listener is not None:
            for message in self._listener.unconsumed():
                message.requeue()

    def _cancel_consumers(self):
        """Tell the broker to send this server nothing more, first (a
        requeued message would come straight back). Under the connection's
        lock, which the poll holds only while it reads (ACK_LATENCY at
        most while a message is held, IDLE_POLL_SECONDS while none is);
        without waiting for the broker's answer (the poll's thread
        reads the socket, not this one: a wait here times out), and
        forgetting the consumers, so a reconnection does not consume
        again."""
        conn = self._conn.connection
        try:
            with conn._connection_lock:
                tags = list(conn._consumers.values())
                conn._consumers.clear()
                conn._new_tags.clear()
                for tag in tags:
                    conn.channel.basic_cancel(str(tag), nowait=True)
                # What the broker sent before it saw the cancel is in the
                # socket: read it into the listener, to be given back with
                # the rest of what this server holds.
                deadline = time.monotonic() + CANCEL_DRAIN_SECONDS
                while time.monotonic() < deadline:
                    conn.connection.drain_events(timeout=0.1)
        except TimeoutError:
            pass  # nothing more came
        except Exception as exc:  # noqa: BLE001 - a lost connection requeues anyway
            LOG.warning("consumers not cancelled: %s", exc)

    # oslo's server finds the steps it orders (start, stop, wait) by this
    # mark on the method; the ordering itself is done by the base's stop.
    stop._ordered = True

    def stopping(self):
        return self._stopping.is_set()


def _is_call(message):
    """Whether the message is a call (its caller waits for the answer). The
    AMQP driver gives every message a ``msg_id`` (casts a made-up one) and
    keeps the caller's as ``orig_msg_id``, None for a cast."""
    return bool(getattr(message, "orig_msg_id", message.msg_id))


class _AckedLater:
    """A message whose acknowledge() is left to BoundedRPCServer (oslo's
    handling acknowledges before it dispatches)."""

    def __init__(self, message):
        self._message = message

    def acknowledge(self):
        pass

    def __getattr__(self, name):
        return getattr(self._message, name)


def make(transport, target, endpoints, ack_when_done=False):
    """A BoundedRPCServer with oslo's dispatcher and access policy."""
    return oslo_messaging.get_rpc_server(
        transport,
        target,
        endpoints,
        access_policy=oslo_messaging.DefaultRPCAccessPolicy,
        server_cls=lambda transport, target, dispatcher, executor: BoundedRPCServer(
            transport, target, dispatcher, ack_when_done
        ),
    )
