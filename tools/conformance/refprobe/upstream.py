"""Upstream Placement 16.0.0 (noauth2, temporary SQLite file) answering ``requests_list.R``.

Usage: .upstream-venv/bin/python upstream.py OUT.json (run.py calls it; the
virtualenv is described in tools/upstream.py).
Only upstream's installed package is imported; nothing of it is copied here.
"""

import json
import os
import shutil
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import webob  # noqa: E402
from norm import record  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_policy import opts as policy_opts  # noqa: E402
from placement.db.sqlalchemy import migration  # noqa: E402
from requests_list import R  # noqa: E402

from placement import conf as pconf  # noqa: E402
from placement import db_api  # noqa: E402
from placement import deploy  # noqa: E402


def main(out_path):
    warnings.simplefilter("ignore")
    tmp = tempfile.mkdtemp()
    conf = cfg.ConfigOpts()
    pconf.register_opts(conf)
    policy_opts.set_defaults(conf)
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("connection", f"sqlite:///{tmp}/up.sqlite", group="placement_database")
    conf([], default_config_files=[])
    db_api.configure(conf)
    migration.create_schema(db_api.get_placement_engine())
    app = deploy.loadapp(conf)
    out = []
    for method, path, version, body, extra in R:
        req = webob.Request.blank(path, method=method)
        req.headers["x-auth-token"] = "admin"
        req.headers["accept"] = "application/json"
        if version:
            req.headers["openstack-api-version"] = f"placement {version}"
        for key, value in extra.items():
            req.headers[key] = value
        if isinstance(body, str):
            req.body = body.encode()
        elif body is not None:
            req.body = json.dumps(body).encode()
            req.headers.setdefault("content-type", "application/json")
        resp = req.get_response(app)
        out.append(record(resp.status_code, resp.headerlist, resp.body))
    shutil.rmtree(tmp)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
