"""GET /: version discovery (no authentication needed)."""

from placement import microversion
from placement import util


def home():
    version_data = {
        "id": "v%s" % microversion.MIN_VERSION,
        "max_version": microversion.MAX_VERSION,
        "min_version": microversion.MIN_VERSION,
        # Upstream reports a status and a links list to itself.
        "status": "CURRENT",
        "links": [{"rel": "self", "href": ""}],
    }
    return util.json_response({"versions": [version_data]})
