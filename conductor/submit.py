"""``build-submit``: cast request specs to the conductors, stream the outcomes.

    build-submit --config-file etc/scheduler/conductor.conf \\
        --requests etc/scheduler/request-specs.sample.jsonl [--json]

Each line of ``--requests`` is a request spec (the wire contract,
joule.request_spec; the format is in docs/architecture.md, "The request
spec"). A line that is not one is answered at once with ``{"line": N,
"status": "invalid", "error": ...}`` and sent nowhere. The others get their
request id and instance uuids filled in (when absent) and are cast to topic
``conductor``, all at once or, with ``--rate``, at that many instances per
second. Then every instance's outcome is printed as it completes, one
JSON line each (a build result: instance_uuid, request_id, status
placed|failed, host_uuid, reason, attempts, rescheduled, and seconds: from
the request's first cast to this outcome), flushed; a request
the conductors refuse is one line ``{"request_id", "status": "refused",
"error"}``. Last comes the summary; with ``--json`` it is one JSON object on
the last line: requests, instances, placed, failed, rescheduled, invalid,
refused, unanswered, seconds, instances_per_second.

Outcomes arrive over the bus on a topic of this process's own. Placement's
build requests are the durable copy: outcomes a conductor could not send (it
died, and another one finished its work) are read from there, and a request
that no conductor recorded after ``--resend-after`` seconds (its message died
with a conductor) is sent again (the records make a second delivery
harmless), once the conductors have recorded a request sent after it or it
is the oldest one not recorded (a long queue is not a lost message). The
quiet requests are read in one placement request per poll. Exit status 0
when every request was answered (placed, failed with a reason, refused or
invalid), 1 when some never were within ``--timeout`` seconds, 2 for a bad
configuration or command line, 3 when placement or the bus cannot be
reached at start-up.
"""

import json
import logging
import queue
import sys
import time
import uuid as uuid_lib

from oslo_config import cfg

from conductor import conf as conf_mod
from conductor import records as records_mod
from joule import config
from joule import placement_client as client_mod
from joule import request_spec as spec_mod
from joule import rpc
from joule.rpc import oslo_messaging  # imported there, quietly
from scheduler import cli
from scheduler import conf as sconf

LOG = logging.getLogger("build-submit")
# Quiet requests read from placement per poll, in one GET (request_id=in:...).
POLL_BATCH = 100

cli_opts = [
    cfg.StrOpt(
        "requests",
        required=True,
        help="File of request specs, one JSON object per line; - for stdin.",
    ),
    cfg.BoolOpt(
        "json", default=False, help="Print the summary as one JSON object on the last line."
    ),
    cfg.FloatOpt(
        "timeout",
        default=600.0,
        min=1.0,
        help="Seconds to wait for every outcome before giving up (exit 1).",
    ),
    cfg.FloatOpt(
        "resend-after",
        default=20.0,
        min=1.0,
        help="Send a request again when no conductor recorded it this long after it was sent.",
    ),
    cfg.FloatOpt(
        "poll-interval",
        default=2.0,
        min=0.1,
        help="Seconds between two reads of placement for outcomes the bus did not bring.",
    ),
    cfg.IntOpt(
        "requests-per-message",
        default=64,
        min=1,
        max=1000,
        help="Requests cast to the super conductors in one build_instances_many "
        "message (conductor RPC 1.1), which handles them side by side; 1 casts one "
        "build_instances per request, for super conductors older than 1.1 (a newer "
        "message is refused there, and its requests are sent again one by one "
        "after --resend-after). Resends always go one by one.",
    ),
    cfg.FloatOpt(
        "rate",
        default=0.0,
        min=0.0,
        help="Instances per second to offer: the requests are cast at this pace, in "
        "file order (what is due is cast together, in messages of up to "
        "--requests-per-message), instead of all at the start; a steady load "
        "rather than a burst. 0 (the default) casts every request at once.",
    ),
]


# Outcomes in one instances_done: a conductor sends at most its
# [conductor] batch_size (at most this) per message.
MAX_OUTCOMES_PER_MESSAGE = spec_mod.MAX_BUILDS_PER_MESSAGE
# Of a refusal's error, what is kept (a line of output, not a document).
REFUSAL_ERROR_MAX = 4096


class _OutcomeEndpoint:
    """This process's own topic. 1.0: ``instance_done`` (one outcome),
    ``request_refused``; 1.1: ``instances_done`` (the outcomes a conductor
    finished together, in one message).

    Anyone on the bus may cast here: a message that is not what a conductor
    sends (not a list, longer than MAX_OUTCOMES_PER_MESSAGE, a refusal
    without a request id) is ignored whole, with its reason logged, and
    never fails the run; each outcome is checked again as it is taken
    (``Submitter._take``), a malformed one ignored alone. What the bus does
    not bring is read from placement anyway."""

    target = oslo_messaging.Target(version="1.1")

    def __init__(self, inbox):
        self.inbox = inbox

    def instance_done(self, ctxt, outcome):
        self.inbox.put(("done", outcome))

    def instances_done(self, ctxt, outcomes):
        problem = spec_mod.list_problem("outcomes", outcomes, MAX_OUTCOMES_PER_MESSAGE)
        if problem is not None:
            LOG.warning("instances_done ignored: %s", problem)
            return
        for outcome in outcomes:
            self.inbox.put(("done", outcome))

    def request_refused(self, ctxt, request_id, error):
        if not spec_mod.is_safe_id(request_id, spec_mod.REQUEST_ID_MAX):
            LOG.warning("request_refused ignored: request_id %.80r is not a request id", request_id)
            return
        if not isinstance(error, str):
            error = f"(a {type(error).__name__}, not a message)"
        self.inbox.put(("refused", {"request_id": request_id, "error": error[:REFUSAL_ERROR_MAX]}))


class _Request:
    def __init__(self, spec, wire):
        self.spec = spec
        self.wire = wire
        self.pending = set(spec.instance_uuids)
        self.sent_at = 0.0
        self.first_sent_at = None
        self.sends = 0
        self.order = 0  # of its last send, among every send of this run
        self.recorded = False
        self.last_news = 0.0
        # Instances placement showed finished once: taken from there at the
        # next poll if the bus has not brought their outcome by then.
        self.seen_finished = set()


class Submitter:
    """Sends specs and gathers their outcomes; ``emit(dict)`` gets each line."""

    def __init__(self, conf, transport, client, emit):
        self.conf = conf
        self.transport = transport
        self.records = records_mod.Records(client, "build-submit", 60)
        self.emit = emit
        self.inbox = queue.Queue()
        self.reply_topic = rpc.topic(conf, f"build-submit.{uuid_lib.uuid4().hex}")
        self.conductors = rpc.ConductorAPI(conf, transport)
        self.counts = {
            "requests": 0,
            "instances": 0,
            "placed": 0,
            "failed": 0,
            "rescheduled": 0,
            "invalid": 0,
            "refused": 0,
            "unanswered": 0,
        }
        self.results = []  # the build results, as dicts
        self._sends = 0
        # The latest send (by order) of a request known to be recorded: the
        # conductors have taken the queue past it.
        self._recorded_up_to = 0

    def parse(self, lines):
        """The valid requests of ``lines``; invalid ones are emitted right away."""
        requests = {}
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            self.counts["requests"] += 1
            try:
                spec = spec_mod.load_request_spec(json.loads(line))
            except ValueError as exc:  # JSONDecodeError and InvalidRequestSpec alike
                self.counts["invalid"] += 1
                self.emit({"line": number, "status": "invalid", "error": f"line {number}: {exc}"})
                continue
            if spec.request_id in requests:
                self.counts["invalid"] += 1
                self.emit(
                    {
                        "line": number,
                        "status": "invalid",
                        "error": f"line {number}: "
                        f"request_id {spec.request_id} repeats an earlier line",
                    }
                )
                continue
            requests[spec.request_id] = _Request(spec, spec_mod.dump_request_spec(spec))
            self.counts["instances"] += spec.num_instances
        return requests

    def run(self, requests, timeout=600.0, resend_after=20.0, poll_interval=2.0, rate=0.0):
        """Send every request (all at once, or ``rate`` instances per second),
        gather outcomes until all are in or ``timeout``."""
        start = time.monotonic()
        server = rpc.make_server(
            self.conf,
            self.transport,
            self.reply_topic,
            [_OutcomeEndpoint(self.inbox)],
            self.reply_topic,
        )
        server.start()
        try:
            per_message = getattr(self.conf, "requests_per_message", 1)
            unsent = list(requests.values())
            if not rate:
                self._send_all(unsent, per_message)
                unsent = []
            offered = 0  # instances cast so far, at the pace of ``rate``
            waiting = {r.spec.request_id: r for r in requests.values()}
            last_poll = time.monotonic()
            while waiting and time.monotonic() - start < timeout:
                wait = min(poll_interval, 0.5)
                if unsent:
                    unsent, offered = self._send_due(unsent, offered, start, rate, per_message)
                    if unsent:
                        wait = max(0.0, min(wait, start + offered / rate - time.monotonic()))
                try:
                    kind, body = self.inbox.get(timeout=wait)
                    self._take(kind, body, waiting)
                    continue
                except queue.Empty:
                    pass
                if time.monotonic() - last_poll >= poll_interval:
                    # Placement is read for requests the bus has been quiet
                    # about for a while, not raced against the bus.
                    self._poll(waiting, resend_after, max(5.0, 3 * poll_interval))
                    last_poll = time.monotonic()
            while not self.inbox.empty():
                self._take(*self.inbox.get_nowait(), waiting)
            for req in waiting.values():
                self.counts["unanswered"] += len(req.pending)
        finally:
            server.stop()
            server.wait()
        seconds = time.monotonic() - start
        self.counts["seconds"] = round(seconds, 3)
        done = self.counts["placed"] + self.counts["failed"]
        self.counts["instances_per_second"] = round(done / seconds, 1) if seconds else None
        return self.counts

    def _send(self, req):
        self._sent(req)
        self.conductors.build_instances(req.wire, self.reply_topic)

    def _send_due(self, unsent, offered, start, rate, per_message):
        """Cast the requests whose time has come at ``rate`` instances per
        second from ``start``; (the rest, instances cast)."""
        now = time.monotonic()
        due = 0
        while due < len(unsent) and start + offered / rate <= now:
            offered += unsent[due].spec.num_instances
            due += 1
        if due:
            self._send_all(unsent[:due], per_message)
        return unsent[due:], offered

    def _sent(self, req):
        req.sent_at = req.last_news = time.monotonic()
        if req.first_sent_at is None:
            req.first_sent_at = req.sent_at
        req.sends += 1
        self._sends += 1
        req.order = self._sends

    def _send_all(self, reqs, per_message):
        """The first send of every request, ``per_message`` to a message."""
        if per_message <= 1:
            for req in reqs:
                self._send(req)
            return
        for start in range(0, len(reqs), per_message):
            chunk = reqs[start : start + per_message]
            for req in chunk:
                self._sent(req)
            self.conductors.build_instances_many([r.wire for r in chunk], self.reply_topic)

    def _take(self, kind, body, waiting):
        if kind == "refused":
            req = waiting.pop(body["request_id"], None)
            if req is None:
                return
            self.counts["refused"] += 1
            self.emit(
                {"request_id": body["request_id"], "status": "refused", "error": body["error"]}
            )
            return
        try:
            result = spec_mod.load_build_result(body)
        except spec_mod.InvalidMessage as exc:
            LOG.warning("outcome ignored: %s", exc)
            return
        self._record_result(
            waiting,
            result.request_id,
            result.instance_uuid,
            {
                "instance_uuid": result.instance_uuid,
                "request_id": result.request_id,
                "workload_class": result.workload_class,
                "status": result.status,
                "host_uuid": result.host_uuid,
                "host_name": result.host_name,
                "reason": result.reason,
                "attempts": result.attempts,
                "rescheduled": result.rescheduled,
            },
        )

    def _record_result(self, waiting, request_id, instance, line):
        req = waiting.get(request_id)
        if req is None or instance not in req.pending:
            return  # a second copy (bus and placement both told us)
        req.pending.discard(instance)
        self._mark_recorded(req)
        req.last_news = time.monotonic()
        # From the request's first cast to this outcome: the latency a
        # steady load (--rate) measures.
        line["seconds"] = round(req.last_news - req.first_sent_at, 3)
        status = line["status"]
        self.counts[status] = self.counts.get(status, 0) + 1
        self.counts["rescheduled"] += line.get("rescheduled") or 0
        self.results.append(line)
        self.emit(line)
        if not req.pending:
            del waiting[request_id]

    def _mark_recorded(self, req):
        req.recorded = True
        self._recorded_up_to = max(self._recorded_up_to, req.order)

    def _overdue(self, req, head):
        """Whether a request nobody recorded looks lost rather than queued:
        a request sent after it was recorded (the conductors took the queue
        past it), or it is the oldest unrecorded one (``head``, the order of
        that one when the poll began). A long queue in front of slow
        conductors is not a lost message."""
        return self._recorded_up_to > req.order or req.order == head

    def _poll(self, waiting, resend_after, stale_after):
        """Read placement (one request) for requests the bus has been quiet about."""
        now = time.monotonic()
        # Requests not yet cast (a paced run) have no news to wait for.
        sent = [r for r in waiting.values() if r.sends]
        quiet = [r for r in sent if now - r.last_news >= stale_after][:POLL_BATCH]
        if not quiet:
            return
        try:
            records = self.records.of_requests([r.spec.request_id for r in quiet])
        except (client_mod.PlacementError, client_mod.PlacementUnreachable) as exc:
            LOG.warning("placement not read: %s", exc)
            return
        head = min((r.order for r in sent if not r.recorded), default=0)
        by_request = {}
        for rec in records:
            by_request.setdefault(rec["request_id"], []).append(rec)
        for req in quiet:
            if req.spec.request_id in by_request:
                self._mark_recorded(req)
        for req in quiet:
            if req.spec.request_id not in waiting:
                continue
            recs = by_request.get(req.spec.request_id, [])
            req.last_news = now
            if (
                not req.recorded
                and now - req.sent_at >= resend_after
                and req.sends < 5
                and self._overdue(req, head)
            ):
                LOG.info(
                    "%s: not recorded %.0f s after sending; sending again",
                    req.spec.request_id,
                    now - req.sent_at,
                )
                self._send(req)
                continue
            self._take_finished(waiting, req, recs)

    def _take_finished(self, waiting, req, recs):
        """The outcomes placement shows for ``req`` that the bus has not
        brought, each from the second poll that finds it (the conductor
        records an outcome and then casts it: the bus's copy, with attempts
        and moves, is usually a moment behind)."""
        for rec in recs:
            if rec["status"] not in ("placed", "failed"):
                continue
            if rec["instance_uuid"] not in req.seen_finished:
                req.seen_finished.add(rec["instance_uuid"])
                continue
            self._record_result(
                waiting,
                req.spec.request_id,
                rec["instance_uuid"],
                {
                    "instance_uuid": rec["instance_uuid"],
                    "request_id": rec["request_id"],
                    "workload_class": rec["workload_class"],
                    "status": rec["status"],
                    "host_uuid": rec["host_uuid"],
                    "host_name": None,
                    "reason": rec["reason"],
                    "attempts": None,
                    "rescheduled": None,
                    "source": "placement",
                },
            )


def format_summary(counts):
    keys = (
        "requests",
        "instances",
        "placed",
        "failed",
        "rescheduled",
        "invalid",
        "refused",
        "unanswered",
        "seconds",
        "instances_per_second",
    )
    return "\n".join(f"{k:<22}{counts.get(k)!s:>10}" for k in keys)


def main(argv=None):
    prog = "build-submit"
    try:
        conf = cli.load_conf(argv, prog, "conductor", conf_mod.register_opts, cli_opts)
    except config.ConfigError as exc:
        return config.fail(prog, exc)
    client = sconf.placement_client_of(conf)
    try:
        cli.check_placement(client)
        rpc.check_reachable(conf)
        transport = rpc.transport_of(conf)
    except (rpc.BusUnreachable, *client_mod.NOT_THERE) as exc:
        return config.fail(prog, exc, config.EXIT_UNAVAILABLE)

    def emit(line):
        sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
        sys.stdout.flush()

    submitter = Submitter(conf, transport, client, emit)
    try:
        with cli.open_stream(conf.requests, "r") as src:
            requests = submitter.parse(src)
    except OSError as exc:
        return config.fail(prog, f"cannot read {conf.requests}: {exc.strerror}")
    counts = submitter.run(
        requests,
        timeout=conf.timeout,
        resend_after=conf.resend_after,
        poll_interval=conf.poll_interval,
        rate=conf.rate,
    )
    transport.cleanup()
    print(format_summary(counts), file=sys.stderr if conf.json else sys.stdout)
    if conf.json:
        print(json.dumps(counts, sort_keys=True))
    return 0 if counts["unanswered"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
