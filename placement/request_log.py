"""One access log line per request, and the request id on every log line.

WSGI layer just inside ``request_id.RequestIdMiddleware``, so it sees every
answer the service gives (keystone's 401s, CORS preflights, /healthcheck,
/metrics) and can name the request id of each.

The access line (logger ``placement.access``, INFO) carries what an operator
greps for: client address, method, path with query, status, body bytes,
microversion, latency in milliseconds (until the server has taken the whole
body, not just until the handler returned) and the request id, in the
message itself so any log formatter shows them.

For every other line logged while a request is served (errors included),
this layer makes an oslo.context RequestContext holding the request id the
thread's current context, as upstream's middleware does: oslo.log's context
format (``logging_context_format_string``, which every console script uses
through joule.config) prints it from there, and ``RequestIdLogFilter`` adds
it as ``%(request_id)s`` for a plain logging setup (an embedding program).
The context is cleared when the response is done, so a line logged between
requests never carries a stale id.
"""

import logging
import time

from oslo_context import context as oslo_context

from placement import request_id as request_id_mod

ACCESS_LOG = logging.getLogger("placement.access")


def current_request_id():
    """The request id of the request this thread is serving, or None."""
    ctx = oslo_context.get_current()
    return getattr(ctx, "request_id", None) if ctx is not None else None


def _clear_current_context():
    # oslo.context has a setter (RequestContext.update_store) but no public
    # way to unset the thread's context; its store is this thread-local.
    oslo_context._request_store.context = None


class RequestIdLogFilter(logging.Filter):
    """Give every record a ``request_id`` attribute ("-" outside a request).

    For handlers whose format names ``%(request_id)s``; oslo.log's context
    formatter finds the id without it.
    """

    def filter(self, record):
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id() or "-"
        return True


class ClosingIterable:
    """A response body that calls ``on_done()`` once, when the server has
    read it all or closed it (PEP 3333: the server calls ``close()``),
    whichever comes first."""

    def __init__(self, iterable, on_done):
        self._iterable = iterable
        self._on_done = on_done

    def __iter__(self):
        yield from self._iterable
        self._finish()

    def close(self):
        try:
            close = getattr(self._iterable, "close", None)
            if close is not None:
                close()
        finally:
            self._finish()

    def _finish(self):
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done()


class RequestLogMiddleware:
    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        rid = environ.setdefault(request_id_mod.ENVIRON_KEY, request_id_mod.new_id())
        # overwrite=True makes it this thread's current context.
        oslo_context.RequestContext(request_id=rid, overwrite=True)
        state = {"status": None, "bytes": 0, "microversion": None}

        def _start_response(status, headers, exc_info=None):
            state["status"] = status.split(" ", 1)[0]
            for name, value in headers:
                lname = name.lower()
                if lname == "content-length":
                    state["bytes"] = value
                elif lname == "openstack-api-version":
                    state["microversion"] = value.rpartition(" ")[2]
            return start_response(status, headers, exc_info)

        def _done():
            try:
                _log_access(environ, rid, state, time.perf_counter() - started)
            finally:
                _clear_current_context()

        try:
            body = self.application(environ, _start_response)
        except BaseException:
            state["status"] = state["status"] or "500"
            _done()
            raise
        return ClosingIterable(body, _done)


def _log_access(environ, rid, state, seconds):
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    query = environ.get("QUERY_STRING")
    if query:
        path = f"{path}?{query}"
    ACCESS_LOG.info(
        '%s "%s %s" status: %s len: %s microversion: %s time: %.1fms request_id: %s',
        environ.get("REMOTE_ADDR", "-"),
        environ.get("REQUEST_METHOD", "-"),
        path,
        state["status"] or "-",
        state["bytes"],
        state["microversion"] or "-",
        seconds * 1000.0,
        rid,
    )
