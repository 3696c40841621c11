"""JoulieFilter: performance work goes only to hosts in the performance class.

The power controller sets each node's schedulable class: ``performance``,
``eco`` (power capped) or ``draining`` (planned eco, still finishing
performance work). A performance request must not land on eco or draining
hosts; standard requests are never filtered here (the power weigher steers
them to eco hosts instead). A host without a twin (no schedulable class) is
unmanaged and runs uncapped, so it counts as performance.
"""

from joule import vocabulary


class JoulieFilter:
    name = "JoulieFilter"
    reason = "performance work is not placed on eco or draining hosts"

    def node_fields(self, spec):
        # Placement already leaves eco and draining hosts out (root_forbidden_traits),
        # by the profile trait; the twin's class is still checked here, since
        # anyone may change a provider's traits until the power controller's
        # next tick puts them back.
        return {"schedulable_class"} if spec.is_performance else set()

    def root_forbidden_traits(self, spec):
        """Traits placement can exclude for us: a draining node's profile is
        already eco, so its trait is CUSTOM_POWER_PROFILE_ECO too."""
        if not spec.is_performance:
            return set()
        return {vocabulary.PROFILE_TRAITS[vocabulary.ECO]}

    def host_passes(self, host, spec):
        if not spec.is_performance:
            return True
        return host.schedulable_class not in vocabulary.BLOCKED_FOR_PERFORMANCE
