"""Whether the client of a request has hung up, so a write is not committed
for nobody.

WSGI gives an application no disconnect signal. placement-api's own server
answers the question itself (``placement.client_disconnected``, a callable);
other servers expose the client socket in the environ (gunicorn's own
workers: ``gunicorn.socket``, werkzeug's server: ``werkzeug.socket``). After
the request body is read, a socket that polls readable with nothing to peek
at has received the client's FIN (or a reset): the client is gone. A client that pipelines its next
request, or a body the handler did not read, leaves bytes to peek, which
reads as "still there". Under a server that exposes no socket (uwsgi,
mod_wsgi) nothing is detected and writes stay bounded by the database's
statement and lock timeouts only.
"""

import select
import socket

SOCKET_KEYS = ("gunicorn.socket", "werkzeug.socket")


class ClientDisconnected(Exception):
    """The client closed its connection before the write committed."""


def client_socket(environ):
    for key in SOCKET_KEYS:
        sock = environ.get(key)
        if sock is not None:
            return sock
    return None


def peer_closed(sock):
    """True when the peer of ``sock`` has closed or reset the connection."""
    try:
        readable, _w, _x = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ConnectionError, TimeoutError):
        return True
    except (OSError, ValueError):
        # A closed descriptor, or a TLS socket that cannot peek: unknown.
        return False


# placement-api's own server (placement/server.py) reads every socket on its
# event loop, so it says itself whether the client hung up: a callable here.
DISCONNECTED_KEY = "placement.client_disconnected"


def commit_guard(environ):
    """A callable that raises ClientDisconnected when the request's client is gone."""
    disconnected = environ.get(DISCONNECTED_KEY)
    if disconnected is not None:

        def ask():
            if disconnected():
                raise ClientDisconnected()

        return ask
    sock = client_socket(environ)
    if sock is None:
        return None

    def guard():
        if peer_closed(sock):
            raise ClientDisconnected()

    return guard
