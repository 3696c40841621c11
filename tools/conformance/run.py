#!/usr/bin/env python
"""Run upstream OpenStack Placement's gabbi tests against our app, in-process.

    python tools/conformance/run.py [--gabbits DIR]
        [--db sqlite|postgresql] [--verbose] [--report FILE] [FILE ...]

FILE is a gabbit file name with or without ``.yaml`` (``inventory``,
``inventory.yaml``) or a path; without FILE every ``*.yaml`` of the gabbits
directory runs. The YAML is read from the directory at run time and never
copied into this repository. Each file runs against a clean database and a
fresh app built by the fixture classes it names (tools/conformance/fixtures.py).

Prints per file the passed/failed counts, then the total, then every failure
as ``file :: test name :: one-line reason`` (``--verbose``: the whole gabbi
message). Exits 1 when any test failed, 2 on a usage error.
"""

import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    # tests/builders.py and tools/ are not installed packages.
    sys.path.insert(0, REPO)

from tools import upstream  # noqa: E402


class RequestTimeout(BaseException):
    """Raised by the alarm in a request that hangs.

    A BaseException so that Flask's error handler does not turn it into a 500
    and the test is reported as a timeout instead.
    """


class _Alarm:
    """Gabbi inner fixture: interrupt a request that runs longer than the limit."""

    seconds = 60

    def setUp(self):
        def _fire(_signum, _frame):
            raise RequestTimeout(f"request took longer than {self.seconds}s")

        self._previous = signal.signal(signal.SIGALRM, _fire)
        signal.alarm(self.seconds)

    def cleanUp(self):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self._previous)


class FileResult(unittest.TestResult):
    """Outcome of every test of one file, in order."""

    def __init__(self):
        super().__init__()
        self.outcomes = []  # (name, "pass"|"fail"|"error"|"skip", message)

    @staticmethod
    def _name(test):
        data = getattr(test, "test_data", None)
        return data["name"] if data else str(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes.append((self._name(test), "pass", ""))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes.append((self._name(test), "fail", _message(err)))

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes.append((self._name(test), "error", _message(err)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        # A fixture failure reports an error on the first test and then skips
        # every test; keep one outcome per test.
        name = self._name(test)
        if not any(o[0] == name and o[1] == "error" for o in self.outcomes):
            self.outcomes.append((name, "skip", reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcomes.append((self._name(test), "pass", "xfail"))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes.append((self._name(test), "pass", "unexpected success of an xfail"))


def _message(err):
    exc_type, exc, _tb = err
    text = str(exc).strip() or exc_type.__name__
    if not isinstance(exc, AssertionError):
        text = f"{exc_type.__name__}: {text}"
    return text


def one_line(message, width=200):
    """The gist of a gabbi failure message on one line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0]
    m = re.match(r"'(\d+)' not found in \[(.*)\], response:", first)
    if m:
        first = f"status {m.group(1)}, expected {m.group(2).replace(chr(39), '')}"
    # gabbi's status mismatch carries the response body on the next lines; the
    # specific part of the error detail (after webob's generic explanation) is
    # what tells why.
    detail = None
    body = message.split("\n", 1)[1] if "\n" in message else ""
    try:
        detail = json.loads(body)["errors"][0]["detail"]
        detail = detail.split("\n\n", 1)[-1].strip()
    except (ValueError, KeyError, IndexError, TypeError):
        if body.strip() and m:
            detail = body.strip()
    text = first if detail is None else f"{first}: {detail}"
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= width else text[: width - 3] + "..."


def _git_head():
    try:
        out = subprocess.run(
            ["git", "-C", REPO, "log", "-1", "--format=%h %s"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown commit"
    except (OSError, subprocess.SubprocessError):
        return "unknown commit"


def resolve_files(gabbits_dir, names):
    if not names:
        return sorted(glob.glob(os.path.join(gabbits_dir, "*.yaml")))
    files = []
    for name in names:
        candidates = [
            name,
            os.path.join(gabbits_dir, name),
            os.path.join(gabbits_dir, name + ".yaml"),
        ]
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found is None:
            raise SystemExit(f"run.py: no gabbit file {name!r} in {gabbits_dir}")
        files.append(found)
    return files


def run_file(path, loader, handlers, fixture_module):
    from gabbi import suitemaker
    from gabbi import utils

    base_name = os.path.splitext(os.path.basename(path))[0]
    suite_dict = utils.load_yaml(yaml_file=path, safe=True)
    suite = suitemaker.test_suite_from_dict(
        loader,
        base_name,
        suite_dict,
        os.path.dirname(path),
        str(uuid.uuid4()),
        8001,
        fixture_module,
        fixture_module.setup_app,
        prefix="",
        handlers=handlers,
        test_loader_name="conformance",
        inner_fixtures=[_Alarm],
    )
    result = FileResult()
    suite.run(result)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Run upstream Placement gabbits against this placement app."
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="gabbit files to run (name, name.yaml or path); default all",
    )
    parser.add_argument(
        "--gabbits",
        default=upstream.gabbits(),
        help="directory of upstream gabbit YAML files (default: %(default)s)",
    )
    parser.add_argument(
        "--db",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="database backend (PostgreSQL: PLACEMENT_TEST_DB_URL or postgres@127.0.0.1:5432)",
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="print the whole failure message of every failed test",
    )
    parser.add_argument(
        "--report", metavar="FILE", help="also write the summary and failures to FILE"
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=60,
        help="seconds one request may take before it counts as failed",
    )
    args = parser.parse_args(argv)

    if not os.path.isdir(args.gabbits):
        parser.error(f"gabbits directory {args.gabbits} does not exist (use --gabbits)")
    files = resolve_files(args.gabbits, args.files)
    if not files:
        parser.error(f"no *.yaml files in {args.gabbits}")

    # The app logs every uncaught exception; the failures list already says 500.
    import logging

    logging.basicConfig(level=logging.CRITICAL)
    warnings.simplefilter("ignore")
    _Alarm.seconds = args.timeout

    from gabbi import handlers as gabbi_handlers

    from tools.conformance import backend as backend_mod
    from tools.conformance import fixtures as fixture_module

    handlers = [h() for h in gabbi_handlers.RESPONSE_HANDLERS]
    loader = unittest.TestLoader()
    started = time.monotonic()
    out_lines = []

    def emit(line=""):
        print(line, flush=True)
        out_lines.append(line)

    with tempfile.TemporaryDirectory(prefix="conformance-") as workdir:
        backend = backend_mod.make(args.db, workdir)
        fixture_module.configure(backend, workdir)
        per_file = []
        try:
            for path in files:
                name = os.path.basename(path)
                t0 = time.monotonic()
                result = run_file(path, loader, handlers, fixture_module)
                counts = {
                    k: sum(1 for o in result.outcomes if o[1] == k)
                    for k in ("pass", "fail", "error", "skip")
                }
                failed = counts["fail"] + counts["error"]
                total = len(result.outcomes)
                per_file.append((name, result, counts))
                emit(
                    f"{name:<52} {counts['pass']:>4}/{total:<4} passed"
                    f"{'  ' + str(failed) + ' failed' if failed else ''}"
                    f"{'  ' + str(counts['skip']) + ' skipped' if counts['skip'] else ''}"
                    f"  ({time.monotonic() - t0:.1f}s)"
                )
        finally:
            backend.close()

    passed = sum(c["pass"] for _n, _r, c in per_file)
    failed = sum(c["fail"] + c["error"] for _n, _r, c in per_file)
    skipped = sum(c["skip"] for _n, _r, c in per_file)
    total = passed + failed + skipped
    clean_files = sum(1 for _n, _r, c in per_file if c["fail"] + c["error"] + c["skip"] == 0)
    emit()
    emit(
        f"TOTAL ({args.db}): {passed}/{total} passed, {failed} failed, {skipped} skipped; "
        f"{clean_files}/{len(per_file)} files fully passing "
        f"({time.monotonic() - started:.0f}s)"
    )

    if failed or skipped:
        emit()
        emit("FAILURES")
    for name, result, _counts in per_file:
        for test_name, outcome, message in result.outcomes:
            if outcome in ("fail", "error"):
                emit(f"{name} :: {test_name} :: {one_line(message)}")
                if args.verbose:
                    for ln in message.splitlines():
                        emit(f"    {ln}")
            elif outcome == "skip":
                emit(f"{name} :: {test_name} :: SKIPPED: {message}")

    if args.report:
        header = (
            f"# conformance run {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, "
            f"--db {args.db}, working tree of {REPO} at {_git_head()}\n"
            f"# regenerate: {sys.executable} tools/conformance/run.py "
            f"--db {args.db} --report {args.report}\n\n"
        )
        with open(args.report, "w") as f:
            f.write(header + "\n".join(out_lines) + "\n")
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
