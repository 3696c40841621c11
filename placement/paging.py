"""Paging of our extensions' listings: ``limit`` and ``marker``, with a
``links`` next entry (the style of allocation candidates' ``page_marker``).

A listing answers at most ``limit`` items (default DEFAULT_LIMIT; a limit
above MAX_LIMIT is a 400, not silently capped) in a stable order, and
``"links": [{"rel": "next", "href": "<same query>&marker=<M>"}]`` while more
remain (``[]`` on the last page). The marker is opaque: base64 of the last
item's key and a hash of the query minus the paging keys, so a marker from
another query, or garbage, is a 400 ``placement.query.bad_page_marker``.
Items created during a walk after its position are listed by later pages.
"""

import base64
import binascii
import hashlib
import re
import urllib.parse

import flask

from placement import errors

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10000
KEYS = ("limit", "marker")
# The schemas of the listings' query strings take these two as they are;
# params() checks them.
QUERY_PROPERTIES = {"limit": {"type": "string"}, "marker": {"type": "string"}}


def _fingerprint(params):
    kept = sorted((k, v) for k, v in params.items() if k not in KEYS)
    return hashlib.sha256(repr(kept).encode()).hexdigest()[:12]


def params(query, integer_key=True):
    """(limit, after) of a validated query dict: ``after`` the key the marker
    carries (an int when ``integer_key``, else a string), or None."""
    limit = query.get("limit")
    if limit is None:
        limit = DEFAULT_LIMIT
    elif not re.fullmatch(r"[1-9][0-9]{0,9}", limit) or int(limit) > MAX_LIMIT:
        raise errors.bad_request(
            f"Invalid limit {limit!r}: expected an integer from 1 to {MAX_LIMIT} "
            f"(default {DEFAULT_LIMIT}); follow the links for more.",
            errors.QUERYPARAM_BAD_VALUE,
        )
    else:
        limit = int(limit)
    marker = query.get("marker")
    if marker is None:
        return limit, None
    bad = errors.bad_request(
        f"Invalid marker {marker!r}: not a marker returned by a previous page of this query.",
        errors.PAGE_MARKER_INVALID,
    )
    try:
        raw = base64.urlsafe_b64decode(marker + "=" * (-len(marker) % 4)).decode()
        version, fp, key = raw.split(":", 2)
        if version != "1" or fp != _fingerprint(query) or not key:
            raise bad
        if integer_key:
            key = int(key)
            if key < 0:
                raise bad
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    return limit, key


def encode_marker(key, query):
    raw = f"1:{_fingerprint(query)}:{key}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def links(query, next_key):
    """The ``links`` of a page: a next entry when ``next_key`` (the key of
    the page's last item, when more remain) is not None."""
    if next_key is None:
        return []
    items = [(k, v) for k, v in query.items() if k != "marker"]
    items.append(("marker", encode_marker(next_key, query)))
    href = flask.request.script_root + flask.request.path + "?" + urllib.parse.urlencode(items)
    return [{"rel": "next", "href": href}]


def page(rows, limit, key):
    """(the page's rows, next key or None) of ``rows`` read with limit + 1."""
    rows = list(rows)
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, key(rows[-1])
