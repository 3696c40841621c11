"""CPU an idle RPC server uses on RabbitMQ: the services' bounded server
(joule.rpc_server) against oslo.messaging's own.

Usage (from the top of a checkout; RabbitMQ on 127.0.0.1:5672, guest, with
rabbitmqctl allowed to add a virtual host):

    python -m benchmarks.rpc_idle [--seconds 15]

Each server runs alone in a process of its own (this module run again),
with one endpoint and nothing sent to it, on a virtual host of this run;
after 3 s to connect and settle, the process's CPU time over ``--seconds``
is printed as milliseconds of CPU per second of wall time. Every service
(scheduler workers, super and cell conductors) runs one such server or
more, idle whenever there is no work.
"""

import argparse
import shutil
import subprocess
import sys
import time
import uuid

KINDS = ("bounded", "oslo")


def _child(kind, url, seconds):
    # joule.rpc first: it imports oslo.messaging with its import-time
    # warnings silenced.
    from joule import rpc
    from joule import rpc_server
    from joule.rpc import oslo_messaging
    from scheduler import conf as sconf

    conf = sconf.make_conf(overrides={(None, "transport_url"): url})
    transport = rpc.transport_of(conf)
    target = oslo_messaging.Target(topic=f"idle-{kind}", server="s1")

    class Endpoint:
        def ping(self, ctxt):
            return 1

    if kind == "bounded":
        server = rpc_server.make(transport, target, [Endpoint()])
    else:
        server = oslo_messaging.get_rpc_server(
            transport, target, [Endpoint()], access_policy=oslo_messaging.DefaultRPCAccessPolicy
        )
    server.start()
    try:
        time.sleep(3)
        cpu, wall = time.process_time(), time.monotonic()
        time.sleep(seconds)
        rate = (time.process_time() - cpu) / (time.monotonic() - wall) * 1000
    finally:
        server.stop()
        server.wait()
        transport.cleanup()
    print(f"{rate:.2f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--child", nargs=2, metavar=("KIND", "URL"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], args.seconds)
        return 0
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        sys.exit("rpc_idle: no rabbitmqctl to make a virtual host")
    vhost = f"joule-bench-{uuid.uuid4().hex[:10]}"
    subprocess.run([ctl, "add_vhost", vhost], check=True, capture_output=True)
    try:
        subprocess.run(
            [ctl, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
            check=True,
            capture_output=True,
        )
        url = f"rabbit://guest:guest@127.0.0.1:5672/{vhost}"
        for kind in KINDS:
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.rpc_idle", "--child", kind, url]
                + ["--seconds", str(args.seconds)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            print(f"{kind}: {out[-1]} ms of CPU per second, idle")
    finally:
        subprocess.run([ctl, "delete_vhost", vhost], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
