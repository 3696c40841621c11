"""The conductors' RPC endpoints: what oslo.messaging dispatches to.

Every public method of an endpoint is an RPC method of its topic, so these
classes hold nothing else. Each method times its message
(``joule_conductor_rpc_seconds``, by method), counts it in hand while it is
handled (conductor.batchers.InHand: a batch waits for company only while
there is some) and logs a placement error instead of raising it (the
records stay held: the sweep finishes them after the lease). The message
itself goes to the ``Conductor`` (conductor.service), which checks and
loads it where it enters (conductor.intake).
"""

import contextlib
import logging
import time

from conductor import metrics
from conductor import records as records_mod
from joule.rpc import oslo_messaging  # imported there, quietly

# The logger of the conductor before its split into modules: its lines keep
# the name operators filter on.
LOG = logging.getLogger("conductor.service")


@contextlib.contextmanager
def _handled(method):
    start = time.perf_counter()
    try:
        yield
    finally:
        metrics.HANDLED.labels(method).observe(time.perf_counter() - start)


@contextlib.contextmanager
def _in_hand(conductor, what):
    """The message counted in hand; a placement error logged as ``what: error``."""
    try:
        with conductor.working():
            yield
    except records_mod.PLACEMENT_ERRORS as exc:
        # Held records stay pending; the sweep finishes them after the lease.
        LOG.warning("%s: %s", what, exc)


# The most ended instances one instances_ended message may carry.
MAX_ENDED = 1000


def _instances_ended(conductor, host, host_uuid, instances):
    """The ``instances_ended`` call of either topic: the uuids dealt with.
    A message that is not a list of at most MAX_ENDED records is refused
    whole (nothing is released), with the reason logged."""
    if not isinstance(instances, list) or len(instances) > MAX_ENDED:
        LOG.warning(
            "instances_ended from %r refused: instances must be a list of at most %d",
            host,
            MAX_ENDED,
        )
        return []
    records = [i for i in instances if isinstance(i, dict)]
    with _handled("instances_ended"), conductor.working():
        return conductor.instances_ended(host, host_uuid, records)


class SuperConductorEndpoint:
    """Topic ``conductor``. 1.0: ``build_instances`` (one request); 1.1:
    ``build_instances_many`` (several requests of one submitter); 1.2:
    ``instances_ended`` (a node agent of a node without a cell)."""

    target = oslo_messaging.Target(version="1.2")

    def __init__(self, conductor):
        self.conductor = conductor

    def build_instances(self, ctxt, request_spec, reply_topic=None):
        with _handled("build_instances"), _in_hand(self.conductor, "build_instances"):
            self.conductor.build_instances(request_spec, reply_topic)

    def build_instances_many(self, ctxt, request_specs, reply_topic=None):
        # Each request is counted in hand, and its errors logged, on its own
        # request thread.
        with _handled("build_instances_many"):
            self.conductor.build_instances_many(request_specs, reply_topic)

    def instances_ended(self, ctxt, host, host_uuid, instances):
        return _instances_ended(self.conductor, host, host_uuid, instances)


class CellConductorEndpoint:
    """Topic ``conductor.<cell>``. 1.0: ``build_instance`` (one instance);
    1.1: ``build_many`` (instances going to this cell, each with the
    generation it was handed off at, one reply topic per message); 1.2: a
    build of ``build_many`` may carry its own ``reply_topic`` (builds of
    several submitters in one message); 1.3: ``instances_ended`` (the node
    agents of the cell); 1.4: a build of ``build_many`` may name the super
    conductor that still holds its record (``holder``: cast without a
    hand-off, taken from it). A conductor serves every older form, so cell
    conductors are upgraded before super conductors (whose messages are 1.4
    since they stopped handing builds off)."""

    target = oslo_messaging.Target(version="1.4")

    def __init__(self, conductor):
        self.conductor = conductor

    def build_instance(
        self, ctxt, instance_uuid, request_spec, selections, reply_topic=None, generation=None
    ):
        what = f"build_instance {instance_uuid}"
        with _handled("build_instance"), _in_hand(self.conductor, what):
            self.conductor.build_instance(
                instance_uuid, request_spec, selections, reply_topic, generation
            )

    def build_many(self, ctxt, builds, reply_topic=None):
        with _handled("build_many"), _in_hand(self.conductor, "build_many"):
            self.conductor.build_many(builds, reply_topic)

    def instances_ended(self, ctxt, host, host_uuid, instances):
        return _instances_ended(self.conductor, host, host_uuid, instances)
