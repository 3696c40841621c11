"""Where upstream OpenStack Placement 16.0.0 lives for side-by-side runs.

Upstream's Python package is also called ``placement``, so it cannot share a
virtualenv with this project: the conformance runner, the reference probe and
the benchmarks that compare with upstream use a virtualenv of its own, by
default ``.upstream-venv`` at the top of the checkout (ignored by git)::

    python3 -m venv .upstream-venv
    .upstream-venv/bin/pip install openstack-placement==16.0.0 gunicorn placeload psycopg2-binary

(the benchmarks run upstream on PostgreSQL through psycopg2.)
``PLACEMENT_UPSTREAM_VENV`` names another one.
"""

import glob
import os

VERSION = "16.0.0"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = "PLACEMENT_UPSTREAM_VENV"


def venv():
    """The upstream virtualenv's directory (it need not exist)."""
    return os.environ.get(ENV) or os.path.join(REPO, ".upstream-venv")


def executable(name):
    """A console script (or ``python``) of the upstream virtualenv."""
    return os.path.join(venv(), "bin", name)


def gabbits():
    """Upstream's gabbi YAML directory inside the virtualenv.

    Before the virtualenv exists this is where it will be (python3.11), so the
    runner's error message names a real path to create.
    """
    pattern = os.path.join(
        venv(), "lib", "python3*", "site-packages", "placement", "tests", "functional", "gabbits"
    )
    found = sorted(glob.glob(pattern))
    if found:
        return found[-1]
    return pattern.replace("python3*", "python3.11")
