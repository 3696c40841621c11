"""The shipped etc/scheduler samples match the options in the code."""

import pathlib

import pytest
from oslo_config import generator

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["scheduler", "conductor"])
def test_sample_is_current(name, tmp_path):
    out = tmp_path / f"{name}.conf.sample"
    generator.main(
        [
            "--config-file",
            str(ROOT / "etc/scheduler" / f"{name}-config-generator.conf"),
            "--output-file",
            str(out),
        ]
    )
    shipped = (ROOT / "etc/scheduler" / f"{name}.conf.sample").read_text()
    assert out.read_text() == shipped, (
        f"etc/scheduler/{name}.conf.sample is stale; regenerate with oslo-config-generator "
        f"--config-file etc/scheduler/{name}-config-generator.conf"
    )
