"""Our app, in-process on a temporary SQLite file, answering ``requests_list.R``.

Usage: python ours.py OUT.json (run.py calls it with the project's python).
"""

import json
import os
import shutil
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", ".."), HERE]

from norm import record  # noqa: E402
from requests_list import R  # noqa: E402

from placement import app as app_mod  # noqa: E402
from placement import conf as conf_mod  # noqa: E402
from placement import db as db_mod  # noqa: E402
from placement import migration  # noqa: E402


def main(out_path):
    warnings.simplefilter("ignore")
    tmp = tempfile.mkdtemp()
    url = f"sqlite:///{tmp}/p.sqlite"
    db = db_mod.Database(url)
    migration.upgrade(db)
    db_mod.sync_standard_classes_and_traits(db)
    conf = conf_mod.make_conf(
        overrides={("placement_database", "connection"): url, ("api", "auth_strategy"): "noauth2"}
    )
    client = app_mod.create_app(conf, db=db, sync=False).test_client()
    out = []
    for method, path, version, body, extra in R:
        headers = {"x-auth-token": "admin", "accept": "application/json"}
        if version:
            headers["openstack-api-version"] = f"placement {version}"
        headers.update(extra)
        kwargs = {}
        if isinstance(body, str):
            kwargs["data"] = body
        elif body is not None:
            kwargs["data"] = json.dumps(body)
            headers.setdefault("content-type", "application/json")
        resp = client.open(path, method=method, headers=headers, **kwargs)
        out.append(record(resp.status_code, resp.headers.items(), resp.data))
    db.dispose()
    shutil.rmtree(tmp)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
