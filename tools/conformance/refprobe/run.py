"""Differential probe: the same request sequence against our app and upstream 16.0.0.

    python tools/conformance/refprobe/run.py [--upstream-python PATH]

Runs ``requests_list.R`` (every endpoint at its microversion boundaries,
error paths included; stateful, fixed UUIDs) through both apps in-process on
fresh SQLite files, then prints each request whose status, kept headers or
normalised body differ, with the first differing paths. Exit status 0 always:
the known, accepted differences are listed in docs/conformance.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from requests_list import R  # noqa: E402

from tools import upstream  # noqa: E402


def _first_differences(ours, theirs, path=""):
    if type(ours) is not type(theirs):
        return [(path, ours, theirs)]
    if isinstance(ours, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key not in ours or key not in theirs:
                out.append(
                    (f"{path}/{key}", ours.get(key, "<absent>"), theirs.get(key, "<absent>"))
                )
            elif ours[key] != theirs[key]:
                out += _first_differences(ours[key], theirs[key], f"{path}/{key}")
        return out
    if isinstance(ours, list):
        if len(ours) != len(theirs):
            return [(f"{path}#len", len(ours), len(theirs))]
        out = []
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                out += _first_differences(a, b, f"{path}[{i}]")
        return out
    return [] if ours == theirs else [(path, ours, theirs)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--upstream-python",
        default=upstream.executable("python"),
        help="python of the upstream virtualenv (tools/upstream.py)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours_path, theirs_path = os.path.join(tmp, "ours.json"), os.path.join(tmp, "up.json")
        subprocess.run([sys.executable, os.path.join(HERE, "ours.py"), ours_path], check=True)
        subprocess.run(
            [args.upstream_python, os.path.join(HERE, "upstream.py"), theirs_path],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(ours_path) as f:
            ours = json.load(f)
        with open(theirs_path) as f:
            theirs = json.load(f)
    differing = 0
    for i, (req, a, b) in enumerate(zip(R, ours, theirs, strict=True)):
        if a == b:
            continue
        differing += 1
        method, path, version, body, _extra = req
        shown = json.dumps(body)[:100] if body is not None else ""
        print(f"#{i} {method} {path} (version {version}) {shown}")
        for diff in _first_differences(a, b)[:4]:
            print("    ours vs upstream at", json.dumps(diff)[:300])
    print(f"{differing} of {len(R)} requests differ")


if __name__ == "__main__":
    main()
