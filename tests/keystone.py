"""A fake keystone on 127.0.0.1 for the tests of placement behind keystonemiddleware.

It answers what auth_token really asks over HTTP: version discovery, a
password login for placement's own service user (``POST /v3/auth/tokens``,
user ``placement``, password ``secret``) and validation of each user token
(``GET /v3/auth/tokens`` with ``X-Subject-Token``; 404 for a token it never
issued, as keystone). The ``keystone`` fixture (tests/functional/conftest.py)
starts one; ``placement_conf`` is the placement.conf that points
placement at it.
"""

import datetime
import http.server
import json
import threading
import uuid

SERVICE_PROJECT = uuid.uuid4().hex


def utcnow():
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


class FakeKeystone:
    """A threaded HTTP server that plays keystone's v3 identity API."""

    SERVICE_TOKEN = "service-token-" + uuid.uuid4().hex

    def __init__(self):
        self.tokens = {}
        self.validations = []
        handler = self._handler()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        # Placement's own service user, with the service role (auth_token
        # requires it when service_token_roles_required is set).
        self.issue(self.SERVICE_TOKEN, ["service", "admin"], SERVICE_PROJECT, user_name="placement")

    def issue(self, token_id, roles, project_id, expires=None, user_name="user"):
        """Remember a project-scoped v3 token body, as keystone would return it."""
        expires = expires or utcnow() + datetime.timedelta(hours=1)
        domain = {"id": "default", "name": "Default"}
        endpoints = [
            {
                "id": uuid.uuid4().hex,
                "interface": interface,
                "region": "RegionOne",
                "region_id": "RegionOne",
                "url": self.url + "/v3",
            }
            for interface in ("public", "internal", "admin")
        ]
        token = {
            "token": {
                "methods": ["password"],
                "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "issued_at": utcnow().strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "user": {"id": uuid.uuid4().hex, "name": user_name, "domain": domain},
                "project": {"id": project_id, "name": "p-" + project_id[:8], "domain": domain},
                "roles": [{"id": uuid.uuid4().hex, "name": role} for role in roles],
                "catalog": [
                    {
                        "id": uuid.uuid4().hex,
                        "type": "identity",
                        "name": "keystone",
                        "endpoints": endpoints,
                    }
                ],
            }
        }
        self.tokens[token_id] = token
        return token

    def discovery(self):
        return {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": self.url + "/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body=None, headers=None):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                path = self.path.split("?")[0].rstrip("/")
                if path in ("", "/v3"):
                    disc = fake.discovery()
                    body = {"version": disc} if path == "/v3" else {"versions": {"values": [disc]}}
                    return self._send(200 if path == "/v3" else 300, body)
                if path == "/v3/auth/tokens":
                    subject = self.headers.get("X-Subject-Token")
                    caller = self.headers.get("X-Auth-Token")
                    if caller != FakeKeystone.SERVICE_TOKEN:
                        return self._send(401, {"error": {"code": 401}})
                    fake.validations.append(subject)
                    token = fake.tokens.get(subject)
                    if token is None:
                        return self._send(
                            404, {"error": {"code": 404, "message": "token not found"}}
                        )
                    return self._send(200, token, {"X-Subject-Token": subject})
                return self._send(404, {"error": {"code": 404}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v3/auth/tokens":
                    return self._send(404, {"error": {"code": 404}})
                password = body["auth"]["identity"]["password"]["user"]
                if (password.get("name"), password.get("password")) != ("placement", "secret"):
                    return self._send(401, {"error": {"code": 401}})
                token = fake.tokens[FakeKeystone.SERVICE_TOKEN]
                return self._send(201, token, {"X-Subject-Token": FakeKeystone.SERVICE_TOKEN})

        return Handler

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def placement_conf(self, db_url, authtoken=""):
        """A placement.conf with ``auth_strategy = keystone`` on ``db_url``, its
        ``[keystone_authtoken]`` the service user of this server, plus the
        lines ``authtoken`` in that section."""
        return f"""\
[api]
auth_strategy = keystone

[placement_database]
connection = {db_url}

[keystone_authtoken]
www_authenticate_uri = {self.url}/v3
auth_url = {self.url}/v3
auth_type = password
username = placement
password = secret
user_domain_id = default
project_name = service
project_domain_id = default
service_token_roles_required = True
http_request_max_retries = 0
{authtoken}"""
