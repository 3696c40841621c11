"""A well-behaved client's latency while idle and slow clients hold connections.

Usage (from the repository, with the package installed):

    python -m benchmarks.slow_clients [--server ours|gthread] [--db sqlite|postgresql]
        [--workers N] [--idle 200] [--slowloris 48] [--slow-body 48]
        [--requests 400] [--timeout 10] [--min-seconds 0]

Starts ``placement-api`` (``--server ours``, the shipped server and its
default settings) or, for comparison, the same app under gunicorn's gthread
worker (1 worker x 8 threads, the server before issue 13) on a free port of
127.0.0.1, opens the hostile connections, then sends ``--requests``
sequential GET /resource_providers, each on a new connection, and prints
p50/p99/max latency, the failures (timeouts count as failures, at
``--timeout`` seconds) and how often the server cut hostile clients off.

Hostile clients (all reconnect as soon as the server closes them, so the
pressure lasts the whole run):

- idle: connect and send nothing;
- slowloris: send a request line, then one header byte every 2 s;
- slow body: send a POST's headers (Content-Length 100000), then 10 bytes/s.

Every connection goes to 127.0.0.1 only, and the run stops by itself.
tests/functional/ops/test_api_server.py runs the same load against the
shipped server in the suite.
"""

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TOKEN_HEADERS = (
    b"X-Auth-Token: admin\r\nOpenStack-API-Version: placement latest\r\nHost: localhost\r\n"
)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stats:
    def __init__(self):
        self.connects = {"idle": 0, "slowloris": 0, "slow_body": 0}
        self.open = {"idle": 0, "slowloris": 0, "slow_body": 0}


async def _hold(kind, port, stop, stats, talk):
    """One hostile client: connect, run ``talk`` until the server closes, repeat."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        stats.connects[kind] += 1
        stats.open[kind] += 1
        try:
            await talk(reader, writer, stop)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            stats.open[kind] -= 1
            writer.close()


async def _idle(reader, writer, stop):
    # Returns when the server closes the connection (read gives b"") or at stop.
    read = asyncio.ensure_future(reader.read(1))
    halt = asyncio.ensure_future(stop.wait())
    await asyncio.wait([read, halt], return_when=asyncio.FIRST_COMPLETED)
    read.cancel()
    halt.cancel()


async def _drip(reader, writer, stop, head, drip, interval):
    writer.write(head)
    await writer.drain()
    read = asyncio.ensure_future(reader.read(1))
    try:
        while not stop.is_set() and not read.done():
            for byte in drip:
                done, _pending = await asyncio.wait([read], timeout=interval)
                if done or stop.is_set():
                    return
                writer.write(bytes([byte]))
                await writer.drain()
    finally:
        read.cancel()


async def _slowloris(reader, writer, stop):
    await _drip(
        reader,
        writer,
        stop,
        b"GET / HTTP/1.1\r\nHost: localhost\r\n",
        b"X-Padding: " + b"a" * 10_000,
        2.0,
    )


async def _slow_body(reader, writer, stop):
    head = (
        b"POST /resource_providers HTTP/1.1\r\n"
        + TOKEN_HEADERS
        + b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    writer.write(head)
    await writer.drain()
    read = asyncio.ensure_future(reader.read(1))
    try:
        while not stop.is_set() and not read.done():
            done, _pending = await asyncio.wait([read], timeout=1.0)
            if done:
                return
            writer.write(b" " * 10)  # 10 bytes/s of JSON whitespace
            await writer.drain()
    finally:
        read.cancel()


async def _one_request(port, timeout):
    started = time.monotonic()
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(
                b"GET /resource_providers HTTP/1.1\r\n"
                + TOKEN_HEADERS
                + b"Connection: close\r\n\r\n"
            )
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0
    return status, time.monotonic() - started


def percentile(values, fraction):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * len(ordered) + 0.5)) - 1))
    return ordered[index]


async def measure(
    port,
    idle=200,
    slowloris=48,
    slow_body=48,
    requests=400,
    timeout=10.0,
    settle=2.0,
    min_seconds=0.0,
):
    """Open the hostile clients, time at least ``requests`` good requests (and
    keep on for at least ``min_seconds``); a result dict."""
    stop = asyncio.Event()
    stats = Stats()
    tasks = []
    for kind, count, talk in (
        ("idle", idle, _idle),
        ("slowloris", slowloris, _slowloris),
        ("slow_body", slow_body, _slow_body),
    ):
        tasks += [asyncio.ensure_future(_hold(kind, port, stop, stats, talk)) for _ in range(count)]
    await asyncio.sleep(settle)
    open_at_start = dict(stats.open)
    latencies, failures = [], []
    started = time.monotonic()
    while len(latencies) < requests or time.monotonic() - started < min_seconds:
        try:
            status, seconds = await _one_request(port, timeout)
        except (TimeoutError, OSError) as exc:
            failures.append(type(exc).__name__)
            latencies.append(timeout)
            continue
        latencies.append(seconds)
        if status != 200:
            failures.append(f"status {status}")
    elapsed = time.monotonic() - started
    open_at_end = dict(stats.open)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "requests": len(latencies),
        "failures": len(failures),
        "failure_kinds": sorted(set(failures)),
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies),
        "seconds": elapsed,
        "hostile_open_at_start": open_at_start,
        "hostile_open_at_end": open_at_end,
        "hostile_connects": dict(stats.connects),
    }


def wait_ready(port, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                sock.settimeout(5)
                if sock.recv(12).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not answer in time")


def start_server(kind, db_url, port, workers, log):
    env = dict(
        os.environ,
        OS_PLACEMENT_DATABASE__CONNECTION=db_url,
        OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP="true",
    )
    bindir = os.path.dirname(sys.executable)
    if kind == "ours":
        cmd = [os.path.join(bindir, "placement-api"), "--port", str(port)]
        if workers:
            cmd += ["--workers", str(workers)]
    else:  # the server before issue 13
        # Migrate first (create_app syncs when sync_on_startup is set).
        subprocess.run(
            [sys.executable, "-c", "from placement import app; app.create_app()"],
            env=env,
            check=True,
        )
        cmd = [
            os.path.join(bindir, "gunicorn"),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers or 1),
            "--threads",
            "8",
            "--worker-class",
            "gthread",
            "placement.app:create_app()",
        ]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=log)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["ours", "gthread"], default="ours")
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--slowloris", type=int, default=48)
    parser.add_argument("--slow-body", type=int, default=48)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=0.0,
        help="keep sending past --requests until this long has passed",
    )
    args = parser.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="slow-clients-")
    pg_name = None
    if args.db == "sqlite":
        db_url = f"sqlite:///{tmp}/placement.sqlite"
    else:
        from benchmarks import claims

        pg_name = f"bench_slow_{os.getpid()}"
        db_url = claims.fresh_database(pg_name).render_as_string(hide_password=False)
    port = free_port()
    log_path = os.path.join(tmp, "server.log")
    with open(log_path, "wb") as log:
        proc = start_server(args.server, db_url, port, args.workers, log)
        try:
            wait_ready(port, proc)
            result = asyncio.run(
                measure(
                    port,
                    args.idle,
                    args.slowloris,
                    args.slow_body,
                    args.requests,
                    args.timeout,
                    min_seconds=args.min_seconds,
                )
            )
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if pg_name:
        from benchmarks import claims

        claims.drop_database(pg_name)
    shutil.rmtree(tmp, ignore_errors=True)
    result.update(
        server=args.server,
        db=args.db,
        workers=args.workers or "default",
        hostile={"idle": args.idle, "slowloris": args.slowloris, "slow_body": args.slow_body},
    )
    print(
        f"server={args.server} db={args.db} workers={result['workers']} hostile: "
        f"{args.idle} idle + {args.slowloris} slowloris + {args.slow_body} slow-body"
    )
    print(
        f"{result['requests']} requests in {result['seconds']:.1f} s: p50 "
        f"{result['p50'] * 1000:.0f} ms, p99 {result['p99'] * 1000:.0f} ms, max "
        f"{result['max'] * 1000:.0f} ms, failures {result['failures']} "
        f"{result['failure_kinds']}"
    )
    print(
        f"hostile open at start {result['hostile_open_at_start']}, at end "
        f"{result['hostile_open_at_end']}, connects {result['hostile_connects']}"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
