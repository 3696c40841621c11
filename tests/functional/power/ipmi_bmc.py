"""An IPMI BMC for the ipmi driver's tests: pyghmi's BMC server as a real
UDP peer, one process per node, its power state kept in a file.

    python -m tests.functional.power.ipmi_bmc --port P --state FILE --password PW

Like a BMC that offers only cipher suite 3 (HMAC-SHA1), it refuses an
open-session request proposing another authentication algorithm with RMCP+
status 0x01 (insufficient resources for the suite), as the IPMI 2.0 spec has
it: the client then retries with SHA-1. pyghmi's own server answers SHA-1
whatever was proposed, which its client (trying SHA-256 first) cannot
verify; a real SHA-1-only BMC says no instead.
"""

import argparse
import pathlib

from pyghmi.ipmi import bmc
from pyghmi.ipmi.private import serversession

# Offset of the authentication algorithm in an RMCP+ open session request:
# tag, privilege, 2 reserved, session id (4), then the auth payload's type,
# 2 reserved, length, algorithm.
AUTH_ALGORITHM = 12
HMAC_SHA1 = 1

_respond = serversession.ServerSession.create_open_session_response


def _sha1_only(self, request):
    if len(request) > AUTH_ALGORITHM and request[AUTH_ALGORITHM] != HMAC_SHA1:
        return bytearray([request[0], 0x01, 0, 0]) + bytes(request[4:8])
    return _respond(self, request)


serversession.ServerSession.create_open_session_response = _sha1_only


class FileBmc(bmc.Bmc):
    """Power on or off, in ``state`` (so the test reads what the BMC did)."""

    def __init__(self, authdata, port, state):
        super().__init__(authdata, port, address="127.0.0.1")
        self.state = pathlib.Path(state)
        if not self.state.exists():
            self.state.write_text("on")

    def get_power_state(self):
        return self.state.read_text().strip()

    def power_on(self):
        self.state.write_text("on")

    def power_off(self):
        self.state.write_text("off")

    def power_shutdown(self):
        self.state.write_text("off")

    def power_reset(self):
        pass

    def is_active(self):
        return self.get_power_state() == "on"


def main():
    parser = argparse.ArgumentParser(prog="ipmi_bmc")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", required=True)
    args = parser.parse_args()
    FileBmc({args.user: args.password}, args.port, args.state).listen()


if __name__ == "__main__":
    main()
