"""Fixtures of the power tests."""

import pytest

from tests.functional.power import redfish_emulator


@pytest.fixture
def emulator(tmp_path):
    """A Redfish emulator serving one system per node of redfish_emulator.NODES."""
    emu = redfish_emulator.Emulator(tmp_path).start()
    yield emu
    emu.stop()
