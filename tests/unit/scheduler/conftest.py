import pytest

from scheduler import conf as conf_mod


def make_conf(**overrides):
    return conf_mod.make_conf(overrides={("filter_scheduler", k): v for k, v in overrides.items()})


@pytest.fixture
def sconf():
    return make_conf()
