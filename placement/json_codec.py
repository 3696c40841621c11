"""JSON the fast way (orjson) wherever it answers as the standard codec does.

Placement parses every request body and stores two kinds of free-form
documents as text (build request specs, scheduling reports). The standard
``json`` module was a few per cent of placement's CPU on the conductors' and
schedulers' bulk bodies (py-spy, benchmarks/bus_throughput.py); orjson does
the same work several times faster. Where the two would differ, the
standard codec decides:

- integers of 19 digits or more: orjson turns those past 64 bits into
  floats, so a body holding such a run of digits anywhere is parsed by
  ``json`` (a uuid or a name with digits in it only costs the slow path);
- anything orjson refuses (NaN, infinities, lone surrogates, bad UTF-8, a
  byte order mark, nesting past its limit) is parsed again by ``json``, so
  the error a client sees is the one it always saw;
- text stored for later (``dumps_sorted``) has sorted keys and no spaces;
  a value orjson cannot encode is encoded by ``json``. Readers parse it, so
  the spacing is not part of what they get.
"""

import json
import re

import orjson

# A run of 19 digits, in a body (bytes) or in stored text (str): the stored
# text is searched as it is, not encoded again for the search.
_LONG_INT = re.compile(rb"[0-9]{19}")
_LONG_INT_TEXT = re.compile(r"[0-9]{19}")


def loads_body(raw, slow):
    """The body ``raw`` (bytes) parsed; ``slow(raw)`` parses it the standard
    way (with the caller's hooks and errors) where orjson might not agree."""
    if not _LONG_INT.search(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return slow(raw)


def loads_stored(text):
    """A document this service stored (``dumps_sorted``, or ``json`` before)."""
    long_int = _LONG_INT_TEXT if isinstance(text, str) else _LONG_INT
    if not long_int.search(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def dumps_sorted(value):
    """``value`` as stored text: keys sorted, compact."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError is one: integers past 64 bits
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
