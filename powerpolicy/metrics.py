"""Prometheus metrics of the power controller (prometheus-client).

The family gauges describe the cluster *after* the downgrade guard: a draining
node counts in ``joulie_policy_family_nodes`` but not in
``joulie_policy_family_performance_nodes``, so the gauges always agree with
the schedulable classes stored in the twins.
"""

import prometheus_client as prom


class Metrics:
    """One registry per controller, so tests and several controllers never collide."""

    def __init__(self, registry=None):
        self.registry = registry or prom.CollectorRegistry()
        self._define_plan_metrics()
        self._define_tick_metrics()

    def _gauge(self, name, documentation, labels=()):
        return prom.Gauge(name, documentation, labels, registry=self.registry)

    def _counter(self, name, documentation, labels=()):
        return prom.Counter(name, documentation, labels, registry=self.registry)

    def _define_plan_metrics(self):
        """What the last tick planned: families, slots, demand, drained and down nodes."""
        self.family_nodes = self._gauge(
            "joulie_policy_family_nodes", "Eligible nodes per hardware family.", ["family"]
        )
        self.family_performance_nodes = self._gauge(
            "joulie_policy_family_performance_nodes",
            "Nodes per hardware family whose schedulable class is performance (after the "
            "downgrade guard; draining nodes are not counted).",
            ["family"],
        )
        self.hp_count = self._gauge(
            "joulie_policy_hp_count",
            "Performance slots of the current plan (after the family floor and node cap).",
        )
        self.requested_hp_count = self._gauge(
            "joulie_policy_requested_hp_count",
            "Performance slots the policy asked for, before the family floor and node cap.",
        )
        self.demand = self._gauge(
            "joulie_policy_performance_demand",
            "Demand P: running plus pending performance consumers.",
            ["source"],
        )
        self.draining_nodes = self._gauge(
            "joulie_policy_draining_nodes",
            "Nodes planned eco that keep performance caps while performance work finishes.",
        )
        self.down_nodes = self._gauge(
            "joulie_policy_down_nodes",
            "Nodes left out of the tick because their node agent has not reported "
            "within service_down_time.",
        )

    def _define_tick_metrics(self):
        """What the ticks did: transitions and twins written, outcomes, timing."""
        self.transitions = self._counter(
            "joulie_policy_state_transitions",
            "Schedulable-class transitions written by the controller; result is applied or "
            "deferred (a downgrade held back as draining).",
            ["from_state", "to_state", "result"],
        )
        self.reconciles = self._counter(
            "joulie_policy_reconciles", "Reconcile ticks by outcome.", ["outcome"]
        )
        self.tick_seconds = self._gauge(
            "joulie_policy_reconcile_duration_seconds", "Duration of the last reconcile tick."
        )
        self.written_nodes = self._counter(
            "joulie_policy_written_nodes",
            "Twins written (nodes whose twin changed or whose profile trait was repaired).",
        )
        self.last_success = self._gauge(
            "joulie_policy_last_reconcile_success_timestamp_seconds",
            "Unix time at which the last successful reconcile tick ended (0: none yet); "
            "with joulie_policy_reconcile_interval_seconds it tells a stalled controller.",
        )
        self.reconcile_interval = self._gauge(
            "joulie_policy_reconcile_interval_seconds",
            "The configured seconds between two reconcile ticks (reconcile_interval).",
        )
        self.repaired_traits = self._counter(
            "joulie_policy_repaired_traits",
            "Nodes whose CUSTOM_POWER_PROFILE_* trait disagreed with their twin (changed "
            "behind the controller's back) and was put back.",
        )

        self.power_transitions = self._counter(
            "joulie_power_transitions",
            "Power-state transitions the controller wrote ([power] suspend_enabled): "
            "on -> suspending -> off -> waking -> on.",
            ["from_state", "to_state"],
        )
        self.power_failures = self._counter(
            "joulie_power_driver_failures",
            "Power driver calls that failed or timed out (the node stays where it was "
            "and is asked again next tick).",
        )
        self.power_nodes = self._gauge(
            "joulie_power_nodes", "Eligible nodes by power state after the tick.", ["state"]
        )

    def record_power_transition(self, before, after):
        self.power_transitions.labels(before, after).inc()

    def record_power_failure(self):
        self.power_failures.inc()

    def record_tick(self, result):
        """Publish the outcome of a successful tick (a controller.TickResult)."""
        self.family_nodes.clear()
        self.family_performance_nodes.clear()
        for family, counts in result.families.items():
            self.family_nodes.labels(family).set(counts["nodes"])
            self.family_performance_nodes.labels(family).set(counts["performance"])
        self.hp_count.set(result.hp_count)
        self.requested_hp_count.set(result.requested_hp_count)
        self.demand.labels("running").set(result.running)
        self.demand.labels("pending").set(result.pending)
        self.draining_nodes.set(result.draining)
        self.down_nodes.set(len(result.down))
        for decision in result.transitions:
            self.transitions.labels(decision.from_state, decision.to_state, decision.result).inc()
        self.written_nodes.inc(result.written)
        self.repaired_traits.inc(len(result.repaired))
        for state, count in result.power_states.items():
            self.power_nodes.labels(state).set(count)
        self.tick_seconds.set(result.seconds)
        self.reconciles.labels("ok").inc()
        self.last_success.set_to_current_time()

    def record_failure(self):
        self.reconciles.labels("error").inc()

    def value(self, name, **labels):
        """A sample's current value (tests, the dry run); None when absent."""
        return self.registry.get_sample_value(name, labels or None)

    def serve(self, port, addr="127.0.0.1"):
        """Serve /metrics in a background thread; returns (server, thread)."""
        return prom.start_http_server(port, addr=addr, registry=self.registry)
