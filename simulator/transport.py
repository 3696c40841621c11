"""Placement's WSGI app as the placement client's transport, without a socket.

The client is the services' own ``joule.placement_client.PlacementClient``
(its retries, error mapping, microversion header); only what is under it
changes: instead of a keystoneauth adapter over ``requests`` and a socket,
``DirectAdapter`` builds the WSGI environ of each request and calls the app
in the caller's thread. A simulated day at 5,000 nodes makes a few hundred
thousand calls; a socket, a server thread and a new connection per call (the
development server closes each) cost about as much as the smaller calls
themselves, and keystoneauth plus ``requests`` (session merging, proxy and
netrc look-ups in the environment on every call) about a fifth of each call
again (measured at 5,000 nodes, docs/benchmarks.md "Energy simulator").
Everything placement does (middleware, microversions, policy, handlers, the
database) runs as it does behind a real server.
"""

import io
import json as jsonlib
import sys
import urllib.parse

import requests
import requests.structures
import requests.utils

from joule import placement_client

# Never a live endpoint: nothing here opens a connection, and a message that
# names the endpoint says it is not a real one.
ENDPOINT = "http://127.0.0.1:1"
_HOST = urllib.parse.urlsplit(ENDPOINT)


class DirectAdapter:
    """The part of keystoneauth's ``Adapter`` that ``PlacementClient`` uses."""

    endpoint_override = ENDPOINT

    def __init__(self, app, token="admin"):
        self.app = app
        self.token = token

    def get_endpoint(self):
        return ENDPOINT

    def request(self, url, method, json=None, params=None, headers=None, data=None, **_ignored):
        """Call the app; return a ``requests.Response`` (never raises for a status)."""
        path, _, query = url.partition("?")
        if path.startswith(ENDPOINT):
            path = path[len(ENDPOINT) :]
        if params:
            extra = urllib.parse.urlencode(params, doseq=True)
            query = f"{query}&{extra}" if query else extra
        body = b""
        environ_headers = {"HTTP_X_AUTH_TOKEN": self.token}
        if json is not None:
            # As requests sends it: compact separators are not required, NaN is refused.
            body = jsonlib.dumps(json, allow_nan=False).encode("utf-8")
            environ_headers["CONTENT_TYPE"] = "application/json"
        elif data is not None:
            body = data  # encoded by the caller, who names its content type
        for name, value in (headers or {}).items():
            key = name.upper().replace("-", "_")
            if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                environ_headers[key] = value
            else:
                environ_headers["HTTP_" + key] = value
        environ = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query,
            "SERVER_NAME": _HOST.hostname,
            "SERVER_PORT": str(_HOST.port),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": _HOST.netloc,
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": _HOST.scheme,
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            **environ_headers,
        }
        started = {}
        chunks = []

        def start_response(status, response_headers, exc_info=None):
            started["status"] = status
            started["headers"] = response_headers
            return chunks.append

        result = self.app(environ, start_response)
        try:
            for chunk in result:
                chunks.append(chunk)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        resp = requests.Response()
        code, _, reason = started["status"].partition(" ")
        resp.status_code = int(code)
        resp.reason = reason
        resp.headers = requests.structures.CaseInsensitiveDict(started["headers"])
        resp._content = b"".join(chunks)
        resp.encoding = requests.utils.get_encoding_from_headers(resp.headers)
        resp.url = f"{ENDPOINT}{path}" + (f"?{query}" if query else "")
        return resp


def client_for(app, token="admin"):
    """A PlacementClient whose requests go straight to ``app``."""
    return placement_client.PlacementClient(DirectAdapter(app, token))
