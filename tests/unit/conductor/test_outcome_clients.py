"""The RPC clients a conductor keeps per submitter's reply topic are
forgotten once their topic is idle (and beyond a count): every build-submit
run has a topic of its own (joule.rpc.OutcomeAPI, joule.idle_cache)."""

import threading

from conductor import conf as cconf
from conductor import submit
from joule import rpc

# What a conductor keeps at most (joule.rpc.OUTCOME_TOPICS_MAX).
BOUND = 1024


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _transport():
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    return conf, rpc.transport_of(conf)


def test_outcome_clients_of_finished_runs_do_not_pile_up():
    _conf, transport = _transport()
    outcomes = rpc.OutcomeAPI(transport)
    for run in range(3 * BOUND):
        outcomes.request_refused(f"build-submit.{run:032x}", "req-1", "no")
    assert outcomes.topics() <= BOUND


class _Inbox:
    target = submit._OutcomeEndpoint.target

    def __init__(self):
        self.got = []
        self.event = threading.Event()

    def request_refused(self, ctxt, request_id, error):
        self.got.append(request_id)
        self.event.set()


def test_an_idle_topic_client_is_forgotten_and_its_topic_still_reached():
    conf, transport = _transport()
    clock, inbox = _Clock(), _Inbox()
    outcomes = rpc.OutcomeAPI(transport, max_topics=10, idle_seconds=300, clock=clock)
    server = rpc.make_server(conf, transport, "build-submit.back", [inbox], "submit-back")
    server.start()
    try:
        outcomes.request_refused("build-submit.back", "req-1", "no")
        assert inbox.event.wait(10)
        outcomes.request_refused("build-submit.other", "req-2", "no")
        clock.now += 301
        assert outcomes.topics() == 0
        inbox.event.clear()
        outcomes.request_refused("build-submit.back", "req-3", "no")
        assert inbox.event.wait(10) and inbox.got == ["req-1", "req-3"]
        assert outcomes.topics() == 1
    finally:
        server.stop()
        server.wait()
