"""One IPMI call in its own process: ``python -m powerpolicy.ipmi_call``.

The ipmi driver runs this once per BMC call. The BMC, credentials and the
action come as one JSON object on stdin (never in argv, where any user
could read them); the answer is one JSON object on stdout:
``{"powerstate": "on"}`` for ``state``, ``{}`` for the power actions, or
``{"error": "..."}`` with exit status 1.

Why a process per call: pyghmi keeps its RMCP+ sessions in process-wide
tables driven by one loop, and in a long-lived process a second session to
a BMC it already talked to could wait forever for a login nobody drives,
or fail with "Session no longer connected" for a BMC that restarted (seen
with pyghmi 1.6). A process per call logs in once, acts, and exits, as
``ipmitool`` does for Slurm's power programs, and the driver bounds it with
a timeout; a controller acts on few nodes per tick, so the start-up cost
(a fraction of a second) does not matter.
"""

import json
import sys

ACTIONS = ("state", "on", "off", "shutdown")


def call(request):
    from pyghmi import exceptions
    from pyghmi.ipmi import command

    action = request["action"]
    if action not in ACTIONS:
        return {"error": f"unknown action {action!r}"}
    try:
        cmd = command.Command(
            bmc=request["address"],
            userid=request.get("username"),
            password=request.get("password"),
            port=int(request.get("port", 623)),
        )
        if action == "state":
            return {"powerstate": (cmd.get_power() or {}).get("powerstate")}
        cmd.set_power(action)
        return {}
    except (exceptions.PyghmiException, OSError) as exc:
        # pyghmi's messages say what failed ("Incorrect password provided",
        # "timeout"), never the credentials.
        return {"error": str(exc) or type(exc).__name__}


def main():
    try:
        request = json.loads(sys.stdin.read())
    except ValueError as exc:
        answer = {"error": f"the request on stdin is not JSON: {exc}"}
    else:
        answer = call(request)
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    # pyghmi's session threads are daemons: leave without waiting for them.
    sys.exit(1 if "error" in answer else 0)


if __name__ == "__main__":
    main()
