"""placement-api's HTTP front: reads whole requests on an event loop, then
hands them to the WSGI app on a thread pool.

Why not gunicorn's gthread worker: it gives each accepted connection a thread
that reads headers and body with no deadline, so a few dozen idle or slow
clients (slowloris, a body at 10 bytes/s) hold every thread and stall the
service (docs/benchmarks.md, "Slow and idle clients"). Here one asyncio loop
per worker process reads every connection (h11 parses HTTP/1.1); a request
reaches a thread only once its headers and body are complete, so a slow
client costs a coroutine, never a thread. Each phase has a deadline:

- ``keepalive_timeout``: a connection waiting for its first or next request;
- ``client_header_timeout``: from a request's first byte to its last header
  line (a slowloris is cut off here, whatever its pace);
- ``client_body_timeout``: the whole body, then the whole response write.

A body larger than ``max_request_body_size`` is never kept: the request goes
to the app with its declared (or so far counted) length and no body, the
app answers 413 in the API's error format, and the connection closes after
a lingering close, as nginx's: the server sends its answer and a FIN, then
reads and discards what the client still sends (up to ``lingering_size``
bytes, ``lingering_time`` seconds in all, ``lingering_timeout`` of silence)
before it closes. Closing at once would leave the unread body in the
kernel's buffer, which answers it with a reset; a client that writes its
whole body before reading (Python's urllib and requests do) would see that
reset instead of the 413.

gunicorn still runs the processes (``PlacementWorker`` is its worker class):
its master forks the workers, restarts one that dies, and handles signals.
"""

import asyncio
import concurrent.futures
import io
import json
import logging
import os
import sys
import urllib.parse
import uuid

import gunicorn.workers.base
import h11

from placement import disconnect

LOG = logging.getLogger("placement.server")

READ_SIZE = 64 * 1024
# Request line plus headers; a larger head is a 431.
MAX_HEAD_BYTES = 64 * 1024


class Limits:
    """The deadlines and the body limit, from ``[api]`` of the configuration."""

    def __init__(
        self,
        header_timeout=10.0,
        body_timeout=30.0,
        keepalive_timeout=30.0,
        max_body=1024 * 1024,
        lingering_time=30.0,
        lingering_timeout=5.0,
        lingering_size=64 * 1024 * 1024,
    ):
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.keepalive_timeout = keepalive_timeout
        self.max_body = max_body
        self.lingering_time = lingering_time
        self.lingering_timeout = lingering_timeout
        self.lingering_size = lingering_size

    @classmethod
    def from_conf(cls, conf):
        api = conf.api
        return cls(
            api.client_header_timeout,
            api.client_body_timeout,
            api.keepalive_timeout,
            api.max_request_body_size,
            api.lingering_time,
            api.lingering_timeout,
            api.lingering_size,
        )


class _Closed(Exception):
    """The client went away, broke the protocol, or ran out of time."""


class HttpServer:
    """Serve one WSGI app over the connections handed to ``serve``."""

    def __init__(self, app, limits, threads, multiprocess=False):
        self.app = app
        self.limits = limits
        self.multiprocess = multiprocess
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="placement-wsgi"
        )
        self._idle = {}  # connection task -> True while it waits for a request
        self._stopping = False

    async def serve(self, reader, writer):
        """asyncio.start_server's callback: one connection, request after request."""
        task = asyncio.current_task()
        self._idle[task] = True
        try:
            await self._serve(reader, writer, task)
        except (_Closed, ConnectionError, TimeoutError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - one connection's bug must not end the loop
            LOG.exception("connection handler failed")
        finally:
            self._idle.pop(task, None)
            writer.close()

    async def _serve(self, reader, writer, task):
        loop = asyncio.get_running_loop()
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        peer = writer.get_extra_info("peername") or ("", 0)
        local = writer.get_extra_info("sockname") or ("", 0)
        while not self._stopping:
            self._idle[task] = True
            try:
                request = await self._read_head(conn, reader, loop)
            except h11.RemoteProtocolError as exc:
                await self._send_error(
                    conn, writer, exc.error_status_hint or 400, f"Malformed HTTP request: {exc}"
                )
                return
            if request is None:
                return
            self._idle[task] = False
            body, too_large = await self._read_body(conn, reader, writer, request, loop)
            environ = self._environ(request, body, too_large, peer, local)
            # Read from the app's thread before it commits (placement/disconnect.py).
            # The loop keeps reading the socket: a FIN marks the reader at EOF.
            environ[disconnect.DISCONNECTED_KEY] = lambda: reader.at_eof() or writer.is_closing()
            status, headers, payload = await loop.run_in_executor(
                self.executor, self._call_app, environ
            )
            if too_large:
                headers = [(k, v) for k, v in headers if k.lower() != "connection"]
                headers.append(("Connection", "close"))
            await self._respond(conn, writer, request, status, headers, payload)
            if too_large:
                # Nothing is left to finish: a graceful stop may cut it short.
                self._idle[task] = True
                await self._linger(reader, writer, loop)
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _read_head(self, conn, reader, loop):
        """The next h11.Request, or None when the client closed or idled out.

        Until the first byte the keep-alive deadline applies; from then on
        the header deadline, however slowly the bytes come.
        """
        started = bool(conn.trailing_data[0])
        deadline = loop.time() + (
            self.limits.header_timeout if started else self.limits.keepalive_timeout
        )
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                return event
            if event is not h11.NEED_DATA:  # ConnectionClosed or PAUSED
                return None
            try:
                data = await _read(reader, deadline - loop.time())
            except TimeoutError:
                return None  # idle, or a header slower than its deadline
            if not data and not started:
                return None
            if not started:
                started = True
                deadline = loop.time() + self.limits.header_timeout
            conn.receive_data(data)

    async def _read_body(self, conn, reader, writer, request, loop):
        """(body bytes, too_large); too_large means the body was not (all) read."""
        declared = _header(request, b"content-length")
        if declared is not None and int(declared) > self.limits.max_body:
            return int(declared), True
        if conn.they_are_waiting_for_100_continue:
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        deadline = loop.time() + self.limits.body_timeout
        chunks, size = [], 0
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.limits.max_body:
                    return size, True  # chunked, past the limit: read no further
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(chunks), False
            elif event is h11.NEED_DATA:
                try:
                    data = await _read(reader, deadline - loop.time())
                except TimeoutError:
                    await self._send_error(
                        conn,
                        writer,
                        408,
                        "The request body did not arrive within "
                        f"{self.limits.body_timeout:g} s ([api] client_body_timeout).",
                    )
                    raise _Closed() from None
                conn.receive_data(data)
            else:  # ConnectionClosed mid-body
                raise _Closed()

    def _environ(self, request, body, too_large, peer, local):
        target = request.target
        if not target.startswith(b"/"):  # absolute form: http://host/path?query
            parts = urllib.parse.urlsplit(target)
            target = (parts.path or b"/") + (b"?" + parts.query if parts.query else b"")
        path, _sep, query = target.partition(b"?")
        environ = {
            "REQUEST_METHOD": request.method.decode("ascii"),
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query.decode("latin-1"),
            "RAW_URI": request.target.decode("latin-1"),
            "SERVER_NAME": str(local[0]),
            "SERVER_PORT": str(local[1]),
            "SERVER_PROTOCOL": "HTTP/" + request.http_version.decode("ascii"),
            "REMOTE_ADDR": str(peer[0]),
            "REMOTE_PORT": str(peer[1]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": self.multiprocess,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
        }
        for raw_name, raw_value in request.headers.raw_items():
            name = raw_name.decode("latin-1")
            if "_" in name:
                # X_Auth_Token and X-Auth-Token would share one environ key:
                # drop the underscore form so it cannot shadow the real one.
                continue
            key = name.upper().replace("-", "_")
            if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                pass
            elif key == "TRANSFER_ENCODING":
                continue  # the body is whole now; CONTENT_LENGTH says its size
            else:
                key = "HTTP_" + key
            value = raw_value.decode("latin-1")
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        if too_large:
            # The app refuses it from the length alone (413); nothing to read.
            environ["CONTENT_LENGTH"] = str(body)
            environ["wsgi.input"] = io.BytesIO(b"")
        else:
            environ["CONTENT_LENGTH"] = str(len(body))
            environ["wsgi.input"] = io.BytesIO(body)
        return environ

    def _call_app(self, environ):
        """Run the app on a pool thread; (status, headers, body bytes)."""
        response = []
        chunks = []

        def start_response(status, headers, exc_info=None):
            response[:] = [status, headers]
            return chunks.append

        try:
            result = self.app(environ, start_response)
            try:
                for chunk in result:
                    if chunk:
                        chunks.append(chunk)
            finally:
                if hasattr(result, "close"):
                    result.close()
            status, headers = response
        except Exception:  # noqa: BLE001 - the app's own handlers let nothing out
            LOG.exception("WSGI app failed")
            return _error(
                500,
                "The server has either erred or is incapable of performing "
                "the requested operation.",
            )
        return status, headers, b"".join(chunks)

    async def _respond(self, conn, writer, request, status, headers, payload):
        code, _sep, reason = status.partition(" ")
        code = int(code)
        bodyless = request.method == b"HEAD" or code in (204, 304) or code < 200
        names = {name.lower() for name, _value in headers}
        if not bodyless and "content-length" not in names:
            headers = [*headers, ("Content-Length", str(len(payload)))]
        out = [
            conn.send(
                h11.Response(
                    status_code=code,
                    reason=reason.encode("latin-1"),
                    headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                )
            )
        ]
        if payload and not bodyless:
            out.append(conn.send(h11.Data(data=payload)))
        out.append(conn.send(h11.EndOfMessage()))
        writer.write(b"".join(out))
        try:
            await asyncio.wait_for(writer.drain(), self.limits.body_timeout)
        except TimeoutError:
            raise _Closed() from None  # a reader slower than the body deadline

    async def _linger(self, reader, writer, loop):
        """Discard what the client still sends after a 413, then let it close.

        The answer is written; the FIN tells a client that reads while it
        sends that nothing more comes. Each bound ends it: the client's own
        FIN, ``lingering_size`` bytes, ``lingering_time`` in all, or
        ``lingering_timeout`` with nothing received.
        """
        if writer.can_write_eof():
            try:
                writer.write_eof()
            except (ConnectionError, OSError):
                return
        limits = self.limits
        deadline = loop.time() + limits.lingering_time
        discarded = 0
        while discarded < limits.lingering_size and not self._stopping:
            try:
                data = await _read(reader, min(limits.lingering_timeout, deadline - loop.time()))
            except (TimeoutError, ConnectionError):
                return
            if not data:
                return
            discarded += len(data)

    async def _send_error(self, conn, writer, code, detail):
        """Answer an HTTP-level error the app never saw, when h11 still lets us."""
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        status, headers, payload = _error(code, detail)
        headers.append(("Connection", "close"))
        try:
            writer.write(
                conn.send(
                    h11.Response(
                        status_code=code,
                        reason=status.partition(" ")[2].encode(),
                        headers=[(k.encode(), v.encode()) for k, v in headers],
                    )
                )
            )
            writer.write(conn.send(h11.Data(data=payload)))
            writer.write(conn.send(h11.EndOfMessage()))
            await asyncio.wait_for(writer.drain(), 1.0)
        except (h11.LocalProtocolError, ConnectionError, TimeoutError):
            pass

    def stop_accepting_requests(self):
        """Graceful stop: idle connections end now, busy ones after their response."""
        self._stopping = True
        for task, idle in list(self._idle.items()):
            if idle:
                task.cancel()

    async def wait_closed(self, timeout):
        tasks = list(self._idle)
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)


async def _read(reader, timeout):
    if timeout <= 0:
        raise TimeoutError()
    async with asyncio.timeout(timeout):
        return await reader.read(READ_SIZE)


def _header(request, name):
    for key, value in request.headers:
        if key == name:
            return value
    return None


def _error(code, detail):
    """An error in the API's format, for what is refused before the app runs."""
    import http

    title = http.HTTPStatus(code).phrase
    body = json.dumps(
        {
            "errors": [
                {
                    "status": code,
                    "title": title,
                    "detail": detail,
                    "request_id": "req-" + str(uuid.uuid4()),
                }
            ]
        }
    ).encode()
    return (
        f"{code} {title}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        body,
    )


class PlacementWorker(gunicorn.workers.base.Worker):
    """gunicorn worker class running ``HttpServer`` on an asyncio loop.

    The gunicorn application object carries ``placement_limits`` (a Limits)
    and ``placement_threads``; see placement/cmd/api.py.
    """

    def run(self):
        asyncio.run(self._run())

    async def _run(self):
        limits = getattr(self.app, "placement_limits", None) or Limits()
        threads = getattr(self.app, "placement_threads", 8)
        server = HttpServer(self.wsgi, limits, threads, multiprocess=self.cfg.workers > 1)
        listeners = [
            await asyncio.start_server(server.serve, sock=lst.sock, limit=READ_SIZE)
            for lst in self.sockets
        ]
        try:
            while self.alive:
                self.notify()  # gunicorn's master restarts a worker that stops ticking
                if self.ppid != os.getppid():
                    LOG.info("parent changed, shutting down: %s", self)
                    break
                await asyncio.sleep(1.0)
        finally:
            for listener in listeners:
                listener.close()
            server.stop_accepting_requests()
            await server.wait_closed(self.cfg.graceful_timeout)
