"""Placement's WSGI app as the placement client's transport, without a socket.

The client (keystoneauth session over ``requests``) is the services' own;
only the last hop changes: a ``requests`` adapter builds the WSGI environ of
each prepared request and calls the app in the caller's thread. A simulated
day at 5,000 nodes makes tens of thousands of calls, and a socket, a server
thread and a new connection per call (the development server closes each)
cost about as much as the smaller calls themselves.
"""

import io
import sys
import urllib.parse

import requests
import requests.adapters
import requests.structures
import requests.utils
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from joule import placement_client

# Never a live endpoint: if the adapter were ever bypassed, the connection
# would be refused instead of reaching another placement on this host.
ENDPOINT = "http://127.0.0.1:1"


class WSGIAdapter(requests.adapters.BaseAdapter):
    def __init__(self, app):
        super().__init__()
        self.app = app

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        url = urllib.parse.urlsplit(request.url)
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        environ = {
            "REQUEST_METHOD": request.method,
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote_to_bytes(url.path).decode("latin-1"),
            "QUERY_STRING": url.query,
            "SERVER_NAME": url.hostname,
            "SERVER_PORT": str(url.port or 80),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": url.netloc,
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": url.scheme,
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in request.headers.items():
            key = name.upper().replace("-", "_")
            if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                environ[key] = value
            elif key != "HOST":
                environ["HTTP_" + key] = value
        started = {}

        def start_response(status, headers, exc_info=None):
            started["status"] = status
            started["headers"] = headers
            return chunks.append

        chunks = []
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
        resp.url = request.url
        resp.request = request
        return resp

    def close(self):
        pass


def client_for(app, token="admin"):
    """A PlacementClient whose requests go straight to ``app``."""
    session = requests.Session()
    session.mount(ENDPOINT, WSGIAdapter(app))
    auth = token_endpoint.Token(ENDPOINT, token)
    sess = ks_session.Session(auth=auth, session=session, timeout=placement_client.DEFAULT_TIMEOUT)
    return placement_client.PlacementClient(
        ks_adapter.Adapter(sess, auth=auth, endpoint_override=ENDPOINT)
    )
