"""What a service takes off the bus: its prefetch follows its executor
threads unless the operator set it, and the samples say so; a stop bounded
by ``[rpc] stop_timeout`` (issue 23, finding 4). The behaviour on RabbitMQ
is tested with real processes in tests/functional/bus/test_bus_intake.py."""

import json
import re
import threading

from conductor import cmd as conductor_cmd
from conductor import conf as cconf
from conductor import driver as driver_mod
from conductor import service as cservice
from joule import rpc
from joule import rpc_server
from joule import service as service_mod
from scheduler import cmd as scheduler_cmd
from scheduler import conf as sconf
from tests import bus

RABBIT = "oslo_messaging_rabbit"


def _conf(make, overrides=None):
    return make(
        overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL, **(overrides or {})}
    )


def test_a_super_conductor_prefetches_its_derived_threads():
    conf = _conf(cconf.make_conf)
    svc = conductor_cmd.build_service(conf, rpc.transport_of(conf), None, "c1", client=object())
    try:
        assert conf.executor_thread_pool_size == cconf.super_executor_threads(conf) == 8
        assert conf[RABBIT].rabbit_qos_prefetch_count == 8
        assert not rpc.prefetch_configured(conf)
        # A conductor acknowledges a cast once its endpoint returned.
        assert [s._ack_when_done for s in svc.servers] == [True]
    finally:
        svc.conductor.stop_sweeping()


def test_a_cell_conductor_prefetches_its_threads():
    conf = _conf(cconf.make_conf, {(None, "executor_thread_pool_size"): 3})
    svc = conductor_cmd.build_service(conf, rpc.transport_of(conf), "cell1", "c1", client=object())
    try:
        assert conf[RABBIT].rabbit_qos_prefetch_count == 3
        assert [s._ack_when_done for s in svc.servers] == [True]
    finally:
        svc.conductor.stop_sweeping()


def test_a_scheduler_worker_prefetches_its_batch_threads_and_acks_on_start():
    conf = _conf(sconf.make_conf)
    svc = scheduler_cmd.build_service(conf, rpc.transport_of(conf), "s1")
    assert conf[RABBIT].rabbit_qos_prefetch_count == sconf.executor_threads(conf) == 128
    # Its calls, and the other workers' claims on a server of their own.
    assert [s._ack_when_done for s in svc.servers] == [False, False]
    assert [s._target.topic for s in svc.servers] == [
        rpc.topic(conf, rpc.SCHEDULER_TOPIC),
        rpc.topic(conf, rpc.CLAIMS_TOPIC),
    ]
    svc.endpoint.stop()


def test_a_prefetch_the_operator_set_is_kept(monkeypatch):
    conf = _conf(cconf.make_conf, {(RABBIT, "rabbit_qos_prefetch_count"): 2})
    assert rpc.prefetch_configured(conf)
    assert rpc.derive_prefetch(conf) == 2
    monkeypatch.setenv("OS_OSLO_MESSAGING_RABBIT__RABBIT_QOS_PREFETCH_COUNT", "5")
    conf = _conf(cconf.make_conf)
    assert rpc.derive_prefetch(conf) == 5


def test_the_samples_say_the_prefetch_follows_the_threads():
    rabbit = dict(rpc.list_opts())["oslo_messaging_rabbit"]
    (opt,) = [o for o in rabbit if o.dest == "rabbit_qos_prefetch_count"]
    assert opt.sample_default == "<[DEFAULT] executor_thread_pool_size>"
    assert "executor_thread_pool_size" in opt.help
    # The options oslo.messaging registers stay as they are.
    assert rpc.oslo_messaging.opts.list_opts()  # still listable
    for path in ("etc/scheduler/conductor.conf.sample", "etc/scheduler/scheduler.conf.sample"):
        text = open(path, encoding="utf-8").read()
        assert "#rabbit_qos_prefetch_count = <[DEFAULT] executor_thread_pool_size>" in text


def test_a_call_is_told_from_a_cast_by_the_caller_s_id():
    class Message:
        msg_id = "made-up"

    cast, call = Message(), Message()
    cast.orig_msg_id = None
    call.orig_msg_id = "the caller's"
    assert not rpc_server._is_call(cast) and rpc_server._is_call(call)


def test_a_stop_gives_up_after_its_timeout():
    conf = _conf(cconf.make_conf)
    svc = service_mod.Service(conf, rpc.transport_of(conf), "s1")
    release = threading.Event()
    svc.stop_hooks.append(release.wait)
    assert svc.stop(timeout=0.2) is False
    release.set()
    svc = service_mod.Service(conf, rpc.transport_of(conf), "s2")
    assert svc.stop(timeout=5) is True
    assert conf.rpc.stop_timeout == 45


def test_the_stop_timeout_fits_in_every_bus_unit_s_stop_timeout():
    conf = _conf(cconf.make_conf)
    # The transport's cleanup and the exit after it: a few seconds at most.
    margin = 10
    for unit in ("scheduler-worker", "conductor-worker", "conductor-worker@"):
        text = open(f"etc/systemd/{unit}.service", encoding="utf-8").read()
        (seconds,) = re.findall(r"^TimeoutStopSec=(\d+)s$", text, re.M)
        assert conf.rpc.stop_timeout + margin < int(seconds), unit
        assert "stop_timeout" in text, unit  # its comment says what SIGTERM does


def test_a_second_delivery_of_a_request_in_hand_is_dropped(monkeypatch):
    """RabbitMQ hands a message back when its acknowledgement was lost with
    the connection, maybe to the process still handling it: that second
    delivery never reaches the records (where a lost answer is read back
    by owner, and would be taken for this process's own create)."""
    conf = _conf(cconf.make_conf)
    conductor = cservice.Conductor(
        conf, object(), rpc.transport_of(conf), driver_mod.SimulatedDriver(), "c1"
    )
    entered, release, calls = threading.Event(), threading.Event(), []

    def build(spec, reply_topic=None, recorded=None):
        calls.append(spec.request_id)
        entered.set()
        release.wait(10)

    monkeypatch.setattr(conductor.super_conductor, "build_instances", build)
    spec = json.loads(bus.spec_lines(1)[0])
    first = threading.Thread(target=conductor.build_instances, args=(spec,))
    first.start()
    assert entered.wait(10)
    conductor.build_instances(spec)  # returns at once: dropped
    assert calls == [spec["request_id"]]
    release.set()
    first.join()
    # Once handled, a delivery goes on (the records refuse it as recorded).
    conductor.build_instances(spec)
    assert calls == [spec["request_id"]] * 2


def test_a_many_message_is_done_once_its_requests_are_recorded_and_slots_bound_the_intake(
    monkeypatch,
):
    """build_instances_many returns (its message is acknowledged) once each
    request is recorded, not once it is scheduled: a steady submitter's
    one-request messages then do not each hold a message thread through
    scheduling. The request threads bound what is taken in: with 4 of them
    (schedule_batch_size 2, one call in flight), a message of 6 waits,
    unacknowledged, for two requests to finish before its last two are
    recorded."""
    conf = _conf(
        cconf.make_conf,
        {("conductor", "schedule_batch_size"): 2, ("conductor", "schedule_calls_in_flight"): 1},
    )
    conductor = cservice.Conductor(
        conf, object(), rpc.transport_of(conf), driver_mod.SimulatedDriver(), "c1"
    )
    gate, lock, recorded = threading.Event(), threading.Lock(), []

    def build(spec, reply_topic=None, recorded_cb=None):
        with lock:
            recorded.append(spec.request_id)
        recorded_cb()  # recorded: the message may be acknowledged
        gate.wait(10)  # scheduling takes a while

    monkeypatch.setattr(conductor.super_conductor, "build_instances", build)
    specs = [json.loads(line) for line in bus.spec_lines(6)]
    done = threading.Event()

    def message(batch):
        conductor.build_instances_many(batch)
        done.set()

    two = threading.Thread(target=message, args=(specs[:2],))
    two.start()
    assert done.wait(10), "a message whose requests are recorded is done while they schedule"
    two.join()
    done.clear()
    more = threading.Thread(target=message, args=(specs[2:],))
    more.start()
    threading.Event().wait(0.5)
    with lock:
        assert len(recorded) == 4  # every request thread busy: the rest wait
    assert not done.is_set()
    gate.set()
    assert done.wait(10)
    more.join()
    assert sorted(recorded) == sorted(s["request_id"] for s in specs)
