"""The downgrade guard: draining keeps performance caps; the end of a drain is recorded."""

from powerpolicy import guard


def test_planned_eco_with_running_performance_work_drains():
    d = guard.decide("n", "eco", running_performance=2, current_class="performance")
    assert (d.profile, d.schedulable_class, d.caps_profile) == ("eco", "draining", "performance")
    assert d.result == "deferred"


def test_draining_node_keeps_performance_caps_until_work_ends():
    """Joulie gap: its guard wrote eco caps to a draining node at once."""
    d = guard.decide("n", "eco", running_performance=1, current_class="draining")
    assert d.caps_profile == "performance" and d.result is None  # still draining
    # A node already eco that runs performance work drains too.
    d = guard.decide("n", "eco", running_performance=1, current_class="eco")
    assert (d.schedulable_class, d.caps_profile, d.result) == (
        "draining",
        "performance",
        "deferred",
    )


def test_end_of_drain_is_recorded_as_applied():
    """Joulie gap: it never recorded the draining -> eco transition."""
    d = guard.decide("n", "eco", running_performance=0, current_class="draining")
    assert (d.schedulable_class, d.caps_profile) == ("eco", "eco")
    assert (d.from_state, d.to_state, d.result) == ("draining", "eco", "applied")


def test_performance_plans_and_idle_eco_are_not_guarded():
    d = guard.decide("n", "performance", running_performance=5, current_class="draining")
    assert (d.schedulable_class, d.result) == ("performance", "applied")
    d = guard.decide("n", "eco", running_performance=0, current_class=None)
    assert (d.from_state, d.to_state, d.result) == ("unknown", "eco", "applied")
    d = guard.decide("n", "eco", running_performance=0, current_class="eco")
    assert d.result is None
