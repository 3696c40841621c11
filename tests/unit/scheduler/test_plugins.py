"""Filters and weighers come from entry points; the options that pick them."""

import pytest

from scheduler import conf as conf_mod
from scheduler import filters as filters_mod
from scheduler import weighers as weighers_mod
from tests.unit.scheduler.conftest import make_conf


def test_our_filters_and_weighers_are_registered_entry_points():
    # setup.cfg and the default chain / weigher order stay in sync.
    assert set(filters_mod.DEFAULT_CHAIN) <= set(filters_mod.installed())
    assert list(weighers_mod.installed())[: len(weighers_mod.OURS)] == list(weighers_mod.OURS)
    chain = filters_mod.from_conf(make_conf().filter_scheduler)
    assert [f.name for f in chain] == list(filters_mod.DEFAULT_CHAIN)


def test_enabled_filter_outside_available_filters_is_refused():
    group = make_conf(
        available_filters=["ComputeFilter"], enabled_filters=["ComputeFilter", "CellFilter"]
    ).filter_scheduler
    with pytest.raises(filters_mod.UnknownFilter, match="'CellFilter'.*available: ComputeFilter"):
        filters_mod.from_conf(group)
    group = make_conf(
        available_filters=["ComputeFilter", "CellFilter"], enabled_filters=["CellFilter"]
    ).filter_scheduler
    assert [f.name for f in filters_mod.from_conf(group)] == ["CellFilter"]


def test_weight_classes_picks_weighers_and_refuses_unknown():
    group = make_conf(weight_classes=["PowerWeigher", "RAMWeigher"]).filter_scheduler
    assert [(w.name, m) for w, m in weighers_mod.load(group)] == [
        ("PowerWeigher", 10.0),
        ("RAMWeigher", 1.0),
    ]
    with pytest.raises(weighers_mod.UnknownWeigher, match="'NoSuchWeigher'"):
        weighers_mod.load(make_conf(weight_classes=["NoSuchWeigher"]).filter_scheduler)


def test_max_attempts_old_group_still_read(tmp_path):
    old = tmp_path / "old.conf"
    old.write_text("[filter_scheduler]\nmax_attempts = 5\n")
    assert conf_mod.make_conf(args=["--config-file", str(old)]).scheduler.max_attempts == 5
    new = tmp_path / "new.conf"
    new.write_text("[scheduler]\nmax_attempts = 4\n")
    assert conf_mod.make_conf(args=["--config-file", str(new)]).scheduler.max_attempts == 4
    assert conf_mod.make_conf().scheduler.max_attempts == 3
