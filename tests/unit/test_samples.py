"""``tox -e genconfig`` regenerates every sample under etc/, and they are current.

The policy sample and the placement config sample are also checked in
tests/unit/test_policies.py, the scheduler/conductor ones in
tests/unit/scheduler/test_config_sample.py; this test is the one that fails
when a new sample is added without its genconfig command.
"""

import configparser
import pathlib

import pytest
from oslo_config import generator

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _genconfig_commands():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    lines = tox["testenv:genconfig"]["commands"].strip().splitlines()
    commands = []
    for line in lines:
        tool, flag, conf = line.split()
        assert flag == "--config-file", line
        commands.append((tool, conf))
    return commands


def _output_file(generator_conf):
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    conf.read(ROOT / generator_conf)
    return conf["DEFAULT"]["output_file"]


def test_genconfig_covers_every_sample():
    produced = {_output_file(conf) for _tool, conf in _genconfig_commands()}
    shipped = {str(p.relative_to(ROOT)) for p in (ROOT / "etc").rglob("*.sample")}
    assert produced == shipped


@pytest.mark.parametrize(
    "generator_conf",
    [conf for tool, conf in _genconfig_commands() if tool == "oslo-config-generator"],
)
def test_config_samples_are_current(generator_conf, tmp_path):
    out = tmp_path / "sample"
    generator.main(["--config-file", str(ROOT / generator_conf), "--output-file", str(out)])
    sample = _output_file(generator_conf)
    assert out.read_text() == (ROOT / sample).read_text(), (
        f"{sample} is stale: run tox -e genconfig"
    )
