"""The conductor's batchers, built in one factory.

A conductor group-commits what its threads send at about the same time
(conductor.batch): every request to placement, every message on the bus
costs CPU in the sender, the receiver and between them. Five kinds of
traffic are batched, all with the same window (``[conductor]
batch_window_ms``) and, but for the scheduling calls, the same size
(``batch_size``):

- ``records``: the build requests' creates, takes, hand-offs and finishes
  (conductor.records, its bulk calls to placement);
- ``build_reports``: failed builds reported to placement
  (``POST /nodes/build_outcomes``);
- ``build_casts``: the builds that concurrent requests hand off to one cell,
  in one ``build_many`` per cell;
- ``outcome_casts``: the outcomes finished together for one submitter, in
  one ``instances_done`` per reply topic;
- ``scheduling``: concurrent requests in one ``select_destinations_many``
  (``schedule_batch_size``, ``schedule_calls_in_flight`` calls at once), or
  None when ``schedule_batch_size`` is 1: each request calls alone.

A batch's leader only waits out the window while other messages are in
hand (``InHand``, which the RPC endpoints and the fan-outs count): a lone
caller never waits.

The factory takes the flushes (what sends a batch) and knows nothing of
the rest of the conductor; the parts that submit are given the batchers
(conductor.service wires both).
"""

import contextlib
import dataclasses
import threading

from conductor import batch as batch_mod
from conductor import metrics
from conductor import records as records_mod


class InHand:
    """Messages (RPC handlers and the builds of a bulk message) in hand:
    more than one means a batch is worth waiting a moment for."""

    def __init__(self):
        self._count = 0
        self._lock = threading.Lock()

    def company(self):
        return self._count > 1

    @contextlib.contextmanager
    def working(self):
        """Count a message (or a build) in hand while the block runs."""
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1


@dataclasses.dataclass(frozen=True)
class ConductorBatchers:
    records: records_mod.Records
    build_reports: batch_mod.Batcher
    build_casts: batch_mod.Batchers
    outcome_casts: batch_mod.Batchers
    scheduling: batch_mod.Batcher | None


def make(conf, client, owner, company, flushes):
    """The batchers of one conductor process.

    :param owner: the owner name its records are held under.
    :param company: ``InHand.company``.
    :param flushes: {kind: flush} for ``build_reports`` (reports),
        ``build_casts`` (cell, items), ``outcome_casts`` (reply topic,
        outcomes) and ``scheduling`` ((request spec, release) items).
    """
    c = conf.conductor
    window = c.batch_window_ms / 1000.0
    scheduling = None
    if c.schedule_batch_size > 1:
        scheduling = batch_mod.Batcher(
            flushes["scheduling"],
            window,
            c.schedule_batch_size,
            company,
            "select_destinations",
            concurrent=c.schedule_calls_in_flight,
        )
    return ConductorBatchers(
        records=records_mod.Records(client, owner, c.lease_seconds, window, c.batch_size, company),
        build_reports=batch_mod.Batcher(
            flushes["build_reports"], window, c.batch_size, company, "build_outcomes"
        ),
        build_casts=batch_mod.Batchers(
            flushes["build_casts"], window, c.batch_size, company, "build_many", metrics.BUS_BATCH
        ),
        outcome_casts=batch_mod.Batchers(
            flushes["outcome_casts"],
            window,
            c.batch_size,
            company,
            "instances_done",
            metrics.BUS_BATCH,
        ),
        scheduling=scheduling,
    )
