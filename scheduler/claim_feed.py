"""The claims of the other scheduler workers, kept in this worker's walks.

A worker places batches on the walks it keeps (scheduler.host_cache), with
its own claims subtracted. Alone, it keeps a walk for the whole
``host_cache_seconds``. With other workers claiming on the same hosts, a
kept walk goes stale: the others' claims are missing from it. Two things
follow. Workers pick the same "emptiest" hosts, which costs the spread over
identical hosts. And they lose races, which costs a fresh walk each. The
cache's old defence was to keep a walk for a quarter of the time whenever
a new walk showed other workers' claims. At 5,000 hosts that meant four
times the walks: 4 workers placed 0.28 times one worker's instances per
second, at about 4 times its CPU per instance (docs/benchmarks.md).

So each worker tells the others what it claimed: a fanout cast
(``claims_made``) on a topic of its own (``scheduler_claims``, so that a
worker whose threads all wait for their batches still reads it at once),
one message per ``PUBLISH_SECONDS`` at most, carrying every claim sent to
placement since the last one (sent as the write goes out, not once it is
answered: a placement round trip is most of the time in which another
worker could race for the same host). A receiving worker adds those
amounts to the hosts of the walks it keeps (HostCache.apply_claims), so its
view matches placement's within a message's latency, and ranks them as
they now are. Its next walk's "other workers claimed" check then finds
nothing foreign, so the walk keeps its whole life, which is
``host_cache_seconds`` times the workers heard on the feed
(HostCache._life): together the workers read each kind as often as one.

It is a hint, never the arbiter. Placement checks every claim, so a lost
or late message costs a lost race (the member is placed again on the same
walk without that host: scheduler.batching), never an over-commit.
Releases, and claims that failed after they were told, are not sent: a
view that still counts them only under-states a host until its next walk.
A worker ignores its own messages (they are already in its view).

The feed also says who is there. A worker sends an empty message when it
starts, every PRESENCE_SECONDS while it claims nothing, and once more soon
after it first hears a worker it did not know (so a worker that starts
after the others learns of them at once). Its sender id is its RPC server
name: the workers heard on the feed are the ones a super conductor can
send a kind of request to (``FeedEndpoint.scheduler_workers``,
conductor.scheduler_routing).
"""

import logging
import threading
import time
import uuid

from joule.rpc import oslo_messaging  # imported there, quietly
from scheduler import metrics

LOG = logging.getLogger(__name__)

# Claims sent within this time go in one message: under load a worker
# claims a batch every few milliseconds, and one message per batch per
# other worker would be most of what the bus carries.
PUBLISH_SECONDS = 0.001
# Claims waiting to be sent beyond this are dropped (the bus is down or
# slow): the feed is a hint, and a backlog would only be stale.
MAX_PENDING = 20000
# At most this many claims in one message (a receiver refuses more).
MAX_CLAIMS_PER_MESSAGE = 5000
# A worker that claimed nothing for this long says it is there (an empty
# message); a worker not heard for ROUTE_PEER_SECONDS is taken to be gone
# (scheduler.host_cache.HostCache.live_workers).
PRESENCE_SECONDS = 5.0
ROUTE_PEER_SECONDS = 3 * PRESENCE_SECONDS
# After hearing a new worker, say we are there at once, but at most once
# per this long (several workers starting at once hear each other).
ANNOUNCE_SECONDS = 0.2


def claims_of(selections):
    """The wire form of the claims in ``selections`` (per instance,
    [selected, *alternates]): [[host uuid, {provider: {class: amount}}]]."""
    return [claim_of(hosts[0].host_uuid, hosts[0].allocation_request) for hosts in selections]


def claims_of_picks(picks):
    """The wire form of the claims of ``picks`` (scheduler.pipeline.Pick)."""
    return [claim_of(p.host.uuid, p.allocation_request) for p in picks]


def claim_of(host_uuid, allocation_request):
    """One claim's wire form: [host uuid, {provider: {class: amount}}]."""
    allocations = allocation_request["allocations"]
    return [host_uuid, {rp: dict(entry["resources"]) for rp, entry in allocations.items()}]


def problem(claims):
    """Why ``claims`` (a received message's) is not a list of claims, or None."""
    if not isinstance(claims, list):
        return f"claims must be a list, not {type(claims).__name__}"
    if len(claims) > MAX_CLAIMS_PER_MESSAGE:
        return f"{len(claims)} claims in one message (at most {MAX_CLAIMS_PER_MESSAGE})"
    for claim in claims:
        if not (isinstance(claim, list | tuple) and len(claim) == 2):
            return f"a claim must be [host uuid, allocations], not {claim!r:.80}"
        host, allocations = claim
        if not isinstance(host, str) or not isinstance(allocations, dict):
            return f"a claim must be [host uuid, allocations], not {claim!r:.80}"
        for rp, classes in allocations.items():
            if not isinstance(rp, str) or not isinstance(classes, dict):
                return f"bad allocations in a claim: {allocations!r:.80}"
            for rc, amount in classes.items():
                if (
                    not isinstance(rc, str)
                    or not isinstance(amount, int)
                    or isinstance(amount, bool)
                    or amount < 0
                ):
                    return f"bad amount in a claim: {rc!r}: {amount!r}"
    return None


class FeedEndpoint:
    """The RPC endpoint of topic ``scheduler_claims``: ``claims_made`` from
    the other workers, handed to ``heard(sender, claims)``, and (1.1)
    ``scheduler_workers``, answered by ``workers()``: asked here, not on the
    scheduler topic, because this server answers at once however many
    scheduling calls the worker holds."""

    target = oslo_messaging.Target(version="1.1")

    def __init__(self, heard, workers=list):
        self._heard = heard
        self._workers = workers

    def claims_made(self, ctxt, sender, claims):
        self._heard(sender, claims)

    def scheduler_workers(self, ctxt):
        """1.1: the workers this one heard on the feed lately, itself
        included, sorted (conductor.scheduler_routing)."""
        return self._workers()


class ClaimFeed:
    """Sends what this worker claimed to the other workers, from one
    thread, ``PUBLISH_SECONDS`` of claims per message. ``publish(sender,
    claims)`` sends one message; ``sender`` is this worker's own id."""

    def __init__(self, publish, sender=None, presence_seconds=PRESENCE_SECONDS):
        self.sender = sender or str(uuid.uuid4())
        self._publish = publish
        self._presence_seconds = presence_seconds
        self._pending = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        # Say we are there at the next turn of the thread (at start, and
        # after hearing a new worker).
        self._announce = True
        self._announced = 0.0  # time.monotonic() of the last announcement asked
        self.stats = {"sent": 0, "messages": 0, "dropped": 0, "failed": 0, "presence": 0}
        self._wake.set()
        self._thread = threading.Thread(target=self._run, name="claim-feed", daemon=True)
        self._thread.start()

    def announce(self):
        """Say this worker is there (a new worker was heard): at once, but
        at most once per ANNOUNCE_SECONDS."""
        with self._lock:
            now = time.monotonic()
            if now - self._announced < ANNOUNCE_SECONDS:
                return
            self._announced = now
            self._announce = True
        self._wake.set()

    def publish(self, claims):
        """Send ``claims`` (wire form: ``claim_of``) to the other workers."""
        if not claims:
            return
        with self._lock:
            room = MAX_PENDING - len(self._pending)
            if room < len(claims):
                self.stats["dropped"] += len(claims) - max(room, 0)
                claims = claims[: max(room, 0)]
            self._pending.extend(claims)
        self._wake.set()

    def stop(self):
        self._stopped.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def _run(self):
        while not self._stopped.is_set():
            if not self._wake.wait(self._presence_seconds):
                # Nothing claimed for a while: say we are still there.
                self._say_present()
                continue
            if self._stopped.is_set():
                return
            # Let the claims of the next few milliseconds join this message.
            self._stopped.wait(PUBLISH_SECONDS)
            with self._lock:
                self._wake.clear()
                pending, self._pending = self._pending, []
                announce, self._announce = self._announce, False
            if announce and not pending:
                self._say_present()
            for start in range(0, len(pending), MAX_CLAIMS_PER_MESSAGE):
                part = pending[start : start + MAX_CLAIMS_PER_MESSAGE]
                try:
                    self._publish(self.sender, part)
                except Exception as exc:  # noqa: BLE001 - a hint: never stop the worker
                    self.stats["failed"] += len(part)
                    LOG.warning("%d claim(s) not sent to the other workers: %s", len(part), exc)
                    continue
                self.stats["sent"] += len(part)
                metrics.CLAIMS_FED.labels("sent").inc(len(part))
                self.stats["messages"] += 1

    def _say_present(self):
        """An empty message: this worker is there."""
        try:
            self._publish(self.sender, [])
        except Exception as exc:  # noqa: BLE001 - a hint: never stop the worker
            LOG.warning("presence not sent to the other workers: %s", exc)
            return
        self.stats["presence"] += 1
