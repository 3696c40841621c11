"""placement.json_codec answers as the standard json module does."""

import json

import pytest

from placement import json_codec
from placement import util


def _standard(raw):
    return util._standard_loads(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": [1.5, -2, "x"], "c": {"d": null, "e": true}}',
        b'{"a": 1, "a": 2}',
        b'"\\ud83d\\ude00 \\u00e9"',
        b'"\\u0000"',
        b"[1e-400, 1.7976931348623157e308, -0.0]",
        b' {"a" : [ ] } \n',
    ],
)
def test_a_body_both_parse_is_parsed_alike(raw):
    assert json_codec.loads_body(raw, _standard) == json.loads(raw)


@pytest.mark.parametrize(
    "raw", [b"18446744073709551616", b'{"total": -9223372036854775809}', b"[12345678901234567890]"]
)
def test_integers_past_64_bits_stay_integers(raw):
    # orjson would make them floats: a schema's "integer" would then refuse
    # them with another message, or a bound would compare a rounded number.
    got = json_codec.loads_body(raw, _standard)
    assert got == json.loads(raw)
    assert "." not in repr(got) and "e" not in repr(got)


@pytest.mark.parametrize(
    "raw", [b"NaN", b"[Infinity]", b"1e400", b'"\\ud800"', b"\xef\xbb\xbf{}", b'"\xff"', b"{"]
)
def test_what_orjson_refuses_gets_the_standard_answer(raw):
    try:
        expected = ("ok", _standard(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        expected = ("error", type(exc), str(exc))
    try:
        got = ("ok", json_codec.loads_body(raw, _standard))
    except (ValueError, UnicodeDecodeError) as exc:
        got = ("error", type(exc), str(exc))
    assert got == expected


def test_stored_text_round_trips_sorted_and_with_big_integers():
    # 2**70 + 1 is no float: read back through orjson it would not compare equal.
    value = {"b": [1, {"z": 1, "y": 2}], "a": "é", "n": 2**70 + 1}
    text = json_codec.dumps_sorted(value)
    assert json_codec.loads_stored(text) == value
    assert text.index('"a"') < text.index('"b"') < text.index('"n"')
    small = {"b": 1, "a": [True, None]}
    assert json_codec.dumps_sorted(small) == '{"a":[true,null],"b":1}'
    # Text stored before (the json module's spacing) still reads.
    assert json_codec.loads_stored(json.dumps(value, sort_keys=True)) == value
