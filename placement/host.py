"""Loopback names: what noauth2 may listen on and the Host headers it answers.

noauth2 makes any caller an admin, so it is only safe where nobody but the
machine's own users can reach it. Listening on loopback is not enough on its
own: a web page in a browser on the same machine can reach 127.0.0.1 through
DNS rebinding (a name of the attacker's domain that resolves to 127.0.0.1),
and such a request still carries the attacker's name in its Host header.
Answering only requests addressed to a loopback name closes that door.
"""

import ipaddress

from placement import errors


def is_loopback(host):
    """True for ``localhost`` and any address of 127.0.0.0/8 or ::1 (no port)."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_port(value):
    """``name:port`` / ``[v6]:port`` / ``v6`` -> the host part of a Host header."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        return value if end < 0 else value[: end + 1]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value  # a bare IPv6 address, or a name without a port


def check_loopback(environ):
    """Raise a 400 unless the request is addressed to a loopback name.

    The name is the Host header, or for HTTP/1.0 clients that send none, the
    server's own name (SERVER_NAME), which is a loopback address whenever
    noauth2 runs without ``allow_insecure_noauth``.
    """
    value = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "")
    if is_loopback(split_port(value)):
        return
    shown = value if len(value) <= 100 else value[:100] + "..."
    raise errors.ApiError(
        400,
        f"Host {shown!r} is not a loopback name. With auth_strategy = noauth2 this "
        "service answers only requests addressed to localhost, 127.0.0.0/8 or ::1; use "
        "auth_strategy = keystone to serve other names.",
        code=errors.HOST_NOT_ALLOWED,
    )
