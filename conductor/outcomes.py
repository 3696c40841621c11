"""Reporting what became of a build: the record, the submitter, the hosts' counts.

What a conductor learns as it builds (conductor.cell_build), schedules
(conductor.super_conductor) or takes over (conductor.sweep) goes three ways,
all from here:

- the record, finished (guarded by ownership) as placed or failed: the
  durable copy, which build-submit also reads; a record that is no longer
  ours is left to its holder, who tells the submitter;
- the submitter: the build result cast to its reply topic, the outcomes
  finished at about the same time for one submitter in one
  ``instances_done`` (the ``outcome_casts`` batchers);
- the hosts' failed-build counts: a failed build reported to placement (the
  ``build_reports`` batcher: one bulk call for the reports of about the same
  moment), and a count that moved cast to every scheduler worker.

``BuildReports`` is the sending half of the counts (the flush of their
batcher, and what it remembers of them); ``Reporter`` is what the rest of
the conductor calls.
"""

import logging
import threading

from conductor import metrics
from joule import placement_client as client_mod
from joule import request_spec as spec_mod

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")

PLACED = "placed"
FAILED = "failed"


def build_result(spec, instance, status):
    """A build result for ``instance`` of ``spec`` (a RequestSpec, or a
    ``RecordedRequest``)."""
    return spec_mod.BuildResult(instance, spec.request_id, spec.workload_class, status)


class RecordedRequest:
    """The fields of a spec an outcome needs, from a record whose spec is unusable."""

    def __init__(self, record):
        self.request_id = record["request_id"]
        self.workload_class = record["workload_class"]


def send_instances_done(bus, reply_topic, outcomes):
    """Flush of the outcome casts: one ``instances_done`` to a submitter."""
    bus.outcomes.instances_done(reply_topic, outcomes)
    return [None] * len(outcomes)


class BuildReports:
    """Build outcomes to placement, and the counts that moved to the schedulers.

    Remembers the failed-build counts placement last answered for hosts this
    conductor saw fail (what ``tell_schedulers`` compares with)."""

    def __init__(self, client, bus):
        self.client = client
        self.bus = bus
        self._failed_builds = {}
        self._lock = threading.Lock()

    def send(self, reports):
        """Many (host_uuid, succeeded) reports in one POST
        /nodes/build_outcomes (in order); one call each on a placement
        without it."""
        try:
            counts = self.client.report_build_outcomes(reports)
        except client_mod.PlacementError as exc:
            if not exc.route_missing:
                raise
            for host_uuid, succeeded in reports:
                self.client.report_build_outcome(host_uuid, succeeded)
            return [None] * len(reports)
        self.tell_schedulers(counts or {})
        return [None] * len(reports)

    def succeeded_on(self, host_uuid):
        """A build succeeded on the host (its finish cleared the count in
        placement): lift it in the schedulers' kept walks if this conductor
        saw it failing."""
        if host_uuid in self._failed_builds:
            self.tell_schedulers({host_uuid: 0})

    def tell_schedulers(self, counts):
        """Cast the hosts whose failed-build count moved from what this
        conductor last saw to every scheduler worker: their kept walks carry
        the counts of when they were read, and the BuildFailureWeigher must
        sink a failing host (and lift a repaired one) at once, not a
        host_cache_seconds later. Every failure moves a count; a success
        only when this conductor saw the host failing (one that another
        conductor saw fail is lifted when the walks are next read)."""
        changed = {}
        with self._lock:
            for host_uuid, count in counts.items():
                if count != self._failed_builds.get(host_uuid, 0):
                    changed[host_uuid] = count
                if count:
                    self._failed_builds[host_uuid] = count
                else:
                    self._failed_builds.pop(host_uuid, None)
        if not changed:
            return
        try:
            self.bus.scheduler.build_outcomes(changed)
        except Exception as exc:  # noqa: BLE001 - the weigher catches up at the next walk
            LOG.warning("scheduler workers not told of build outcomes on %s: %s", changed, exc)


class Reporter:
    """Finishes records and tells whoever needs to know.

    :param batchers: the conductor's batchers (conductor.batchers): its
        ``build_reports`` and ``outcome_casts``.
    """

    def __init__(self, records, bus, build_reports, batchers):
        self.records = records
        self.bus = bus
        self.build_reports = build_reports
        self._reports = batchers.build_reports
        self._casts = batchers.outcome_casts

    def report_build(self, host_uuid, succeeded):
        """Tell placement how a build on the host went: the scheduler's
        BuildFailureWeigher sinks hosts whose builds keep failing, until one
        succeeds. Losing a report must not fail the build."""
        try:
            self._reports.submit((host_uuid, succeeded))
        except client_mod.PlacementError as exc:
            LOG.warning("build outcome on %s not reported: %s", host_uuid, exc)

    def placed(self, instance, host_uuid, result=None, reply_topic=None, generation=None):
        """Finish the record as placed on the host where its build succeeded
        (the finish carries the success: it clears the host's failed builds,
        no separate report) and tell the submitter ``result``, if given.
        ``generation``: the one the record is held at (the finish is then
        guarded by it too, not only by the owner). False when the record is
        no longer ours."""
        if not self.records.finish(
            instance, PLACED, host_uuid=host_uuid, build_succeeded=True, generation=generation
        ):
            return False
        metrics.BUILDS.labels(PLACED).inc()
        self.build_reports.succeeded_on(host_uuid)
        if result is not None:
            self.tell_submitter(reply_topic, spec_mod.dump_build_result(result))
        return True

    def failed(self, spec, instance, reason, reply_topic, result=None, generation=None):
        """Finish the record as failed and tell the submitter (``result``:
        the build result so far, its attempts and reschedules;
        ``generation`` as for ``placed``)."""
        if not self.records.finish(instance, FAILED, reason=reason, generation=generation):
            return
        metrics.BUILDS.labels(FAILED).inc()
        out = result or build_result(spec, instance, FAILED)
        out.status, out.reason, out.host_uuid, out.host_name = FAILED, reason, None, None
        self.tell_submitter(reply_topic, spec_mod.dump_build_result(out))

    def failed_many(self, spec, instances, reason, reply_topic, generations=None):
        """``failed`` for several instances of one request: one bulk finish
        and one message to the submitter. ``generations``: {instance:
        generation held}, guarding each finish as for ``placed``."""
        generations = generations or {}
        done = self.records.finish_many(
            [(i, FAILED, None, reason, False, generations.get(i)) for i in instances]
        )
        outcomes = []
        for instance, finished in zip(instances, done, strict=True):
            if not finished:
                continue  # no longer ours: its holder tells the submitter
            metrics.BUILDS.labels(FAILED).inc()
            out = build_result(spec, instance, FAILED)
            out.reason = reason
            outcomes.append(spec_mod.dump_build_result(out))
        if reply_topic and outcomes:
            self._casts.submit_many(reply_topic, outcomes)

    def tell_submitter(self, reply_topic, outcome):
        """Cast an outcome to its submitter, in one message with the other
        outcomes for that topic finished at about the same time. A cast that
        fails is logged, not raised: the outcome is in the finished build
        request, which the submitter also reads."""
        if reply_topic:
            self._casts.submit(reply_topic, outcome)

    def request_refused(self, reply_topic, request_id, reason):
        """Tell the submitter that a request was not taken (nothing of it is
        recorded)."""
        self.bus.outcomes.request_refused(reply_topic, request_id, reason)
