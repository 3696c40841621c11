"""A single request's answer and explanation, unchanged by the pipeline.

The answers recorded in single_request_answers.json were given by the
scheduler before a single request became a batch of one through the one
pipeline (scheduler.pipeline); every case must still give exactly those:
the same hosts, alternates and allocation requests, the same error text,
the same scheduling report.
"""

import json
import pathlib

import pytest

from tests.unit.scheduler import single_request_cases

RECORDED = json.loads(
    (pathlib.Path(__file__).parent / "single_request_answers.json").read_text(encoding="utf-8")
)


def test_every_recorded_case_is_run():
    assert sorted(RECORDED) == sorted(single_request_cases.CASES)


@pytest.mark.parametrize("name", sorted(single_request_cases.CASES))
def test_single_request_answer_is_unchanged(name):
    got = json.loads(json.dumps(single_request_cases.CASES[name]()))
    want = RECORDED[name]
    for got_one, want_one in zip(got, want, strict=True):
        assert got_one.get("error") == want_one.get("error")
        assert got_one.get("selections") == want_one.get("selections")
        assert got_one["held"] == want_one["held"]
        assert got_one["report"] == want_one["report"]
