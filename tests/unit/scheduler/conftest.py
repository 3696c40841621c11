import pytest

from scheduler import conf as conf_mod


def make_conf(**overrides):
    return conf_mod.make_conf(overrides={(group_of(k), k): v for k, v in overrides.items()})


def group_of(option):
    """The group of a scheduler option (max_attempts is in nova's [scheduler])."""
    return "scheduler" if option in ("max_attempts", "service_down_time") else "filter_scheduler"


@pytest.fixture
def sconf():
    return make_conf()
