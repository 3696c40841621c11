"""Sphinx configuration of the joule-placement documentation.

Build from a checkout (no network access needed):

    tox -e docs
    # or: pip install -e '.[docs]' && sphinx-build -W --keep-going -b html docs docs/_build/html
"""

import os
import sys

# Local extensions (docs/_ext).
sys.path.insert(0, os.path.abspath("_ext"))

project = "joule-placement"
copyright = "joule-placement authors"
author = "joule-placement authors"

extensions = [
    "myst_parser",
    # .. show-options:: (docs/configuration/index.rst), from the oslo.config.opts
    # entry points of setup.cfg.
    "oslo_config.sphinxext",
    # .. show-policy:: (docs/configuration/policy.rst), from the
    # oslo.policy.policies entry point.
    "oslo_policy.sphinxext",
    # .. openapi-reference:: (docs/api/index.rst), the REST API reference
    # rendered from docs/api/openapi.yaml (docs/_ext/openapi_reference.py).
    "openapi_reference",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Markdown headings become link targets (#the-request-spec, ...), as on GitHub.
myst_heading_anchors = 4

html_theme = "alabaster"
html_title = "joule-placement"
