"""GET /: version discovery (no authentication needed)."""

from placement import microversion
from placement import util


def home():
    version_data = {
        "id": f"v{microversion.MIN_VERSION}",
        "max_version": microversion.MAX_VERSION,
        "min_version": microversion.MIN_VERSION,
        # Upstream reports a status and a links list to itself.
        "status": "CURRENT",
        "links": [{"rel": "self", "href": ""}],
    }
    # From 1.15 upstream dates the version document "now" (no stored state).
    return util.json_response({"versions": [version_data]}, last_modified="now")
