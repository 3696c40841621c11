"""Prometheus metrics of the scheduler service (served on [metrics] port)."""

import prometheus_client as prom

REQUESTS = prom.Counter(
    "joule_scheduler_requests",
    "Requests answered (one per select_destinations call, one per request of a "
    "select_destinations_many call), by result (placed, no_valid_host, invalid, "
    "consumer_in_use, expired, error).",
    ["result"],
)
DECISIONS = prom.Counter("joule_scheduler_instances_placed", "Instances given a claimed host.")
NO_VALID_HOST = prom.Counter(
    "joule_scheduler_no_valid_host_by_filter",
    "Hosts removed by each filter in requests that ended in NoValidHost.",
    ["filter"],
)
RACES_LOST = prom.Counter(
    "joule_scheduler_races_lost",
    "Claims lost to a concurrent writer (the host was dropped or retried).",
)
LATE_RELEASES = prom.Counter(
    "joule_scheduler_late_claims_released",
    "Claims released because their request was placed after its caller's "
    "deadline (the caller had given it up).",
)
LATENCY = prom.Histogram(
    "joule_scheduler_select_destinations_seconds",
    "Time to answer a request: its select_destinations call, or the whole "
    "select_destinations_many call it came in (observed once per request).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
KEPT_WALKS = prom.Counter(
    "joule_scheduler_kept_walks",
    "Candidate walks read to be kept (scheduler.host_cache), by how long: "
    "'full' (host_cache_seconds) or 'shared' (a quarter of it: the walk "
    "showed other workers' claims this worker had not heard of).",
    ["life"],
)
CLAIMS_FED = prom.Counter(
    "joule_scheduler_claims_fed",
    "Claims told to the other workers ('sent') and heard from them "
    "('received'), scheduler.claim_feed.",
    ["direction"],
)
