"""Prometheus metrics of the conductor services (served on [metrics] port)."""

import prometheus_client as prom

BUILDS = prom.Counter(
    "joule_conductor_instances_finished",
    "Instances finished by this conductor, by outcome (placed, failed).",
    ["status"],
)
BUILD_FAILURES = prom.Counter(
    "joule_conductor_build_failures",
    "Builds the compute driver failed (each moves the claim to the next alternate, if any).",
)
RESCHEDULES = prom.Counter(
    "joule_conductor_reschedules", "Claims moved to an alternate after a failed build."
)
TAKEOVERS = prom.Counter(
    "joule_conductor_takeovers", "Build requests taken over after their holder's lease expired."
)
LATE_CLAIMS_RELEASED = prom.Counter(
    "joule_conductor_late_claims_released",
    "Claims the sweep released on instances failed because no scheduler "
    "answered in time (a scheduler claimed after the call was given up).",
)
INSTANCES_ENDED = prom.Counter(
    "joule_conductor_instances_ended",
    "Instances their node agent reported ended whose claim this conductor "
    "released, by how they ended (finished, errored, deleted, lost).",
    ["state"],
)
REFUSED = prom.Counter(
    "joule_conductor_requests_refused",
    "Request specs refused by the wire contract (nothing recorded).",
)
SCHEDULER_CALL = prom.Histogram(
    "joule_conductor_select_destinations_seconds",
    "Round trip of the scheduler RPC call, retries included.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120),
)
HANDLED = prom.Histogram(
    "joule_conductor_rpc_seconds",
    "Time to handle one RPC message, by method.",
    ["method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120),
)
BATCH = prom.Histogram(
    "joule_conductor_placement_batch_items",
    "Items per bulk call of the conductor, by kind: create (requests), take, "
    "hand_off, finish (build requests), build_outcomes (reports) to placement; "
    "select_destinations (requests per select_destinations_many call) to the scheduler.",
    ["kind"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
)
BUS_BATCH = prom.Histogram(
    "joule_conductor_message_batch_items",
    "Items per message the conductor casts, by kind: build_many (builds to one cell, "
    "of one or several requests), instances_done (outcomes to one submitter).",
    ["kind"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
)
WAITING_FOR_WAKE = prom.Gauge(
    "joule_conductor_requests_waiting_for_wake",
    "Requests this conductor holds because they fit only on sleeping nodes "
    "(scheduled again every [conductor] wake_retry_interval until placed or "
    "wake_wait_seconds have passed).",
)
HELD_FOR_WAKE = prom.Counter(
    "joule_conductor_requests_held_for_wake",
    "Requests held for waking nodes, by how the wait ended (placed, failed, timed_out).",
    ["outcome"],
)
