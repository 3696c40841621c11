"""Prometheus metrics of node-agent (served on ``[agent] metrics_port``)."""

import prometheus_client as prom


class Metrics:
    """One registry per agent, so tests and several agents never collide."""

    def __init__(self, registry=None):
        self.registry = registry or prom.CollectorRegistry()
        r = self.registry
        self.cap_watts = prom.Gauge(
            "node_agent_cap_watts",
            "Cap in force per domain (RAPL package, GPU) as the agent applied it; "
            "part is cpu or gpu, method rapl, cpufreq or nvml.",
            ["part", "method", "domain"],
            registry=r,
        )
        self.power_watts = prom.Gauge(
            "node_agent_power_watts",
            "Measured power per domain: RAPL energy_uj deltas between passes, NVML power usage.",
            ["part", "domain"],
            registry=r,
        )
        self.apply_failures = prom.Counter(
            "node_agent_apply_failures",
            "Passes where a part's cap could not be applied, by result "
            "(unsupported, out_of_range, failed).",
            ["part", "result"],
            registry=r,
        )
        self.heartbeats = prom.Counter(
            "node_agent_heartbeats",
            "Heartbeats sent, by outcome (ok, error).",
            ["outcome"],
            registry=r,
        )
        self.registration_writes = prom.Counter(
            "node_agent_registration_writes",
            "Registration writes to placement (provider, inventories, traits, node, hardware).",
            ["what"],
            registry=r,
        )
        self.last_heartbeat = prom.Gauge(
            "node_agent_last_heartbeat_timestamp_seconds",
            "Unix time of the last heartbeat placement accepted.",
            registry=r,
        )

    def record_status(self, status):
        for part in ("cpu", "gpu"):
            info = (status or {}).get(part)
            if not info:
                continue
            if info["result"] in ("unsupported", "out_of_range", "failed"):
                self.apply_failures.labels(part, info["result"]).inc()
            for domain in info.get("domains") or ():
                if domain.get("limit_watts") is not None:
                    self.cap_watts.labels(part, info["method"], domain["name"]).set(
                        domain["limit_watts"]
                    )
                if domain.get("measured_watts") is not None:
                    self.power_watts.labels(part, domain["name"]).set(domain["measured_watts"])
            if info["method"] == "cpufreq" and info.get("applied_watts") is not None:
                self.cap_watts.labels(part, "cpufreq", "node").set(info["applied_watts"])
