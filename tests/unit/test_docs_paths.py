"""Every repository path the README and the docs name exists.

A path is a token that starts with one of the repository's top-level
directories (``etc/``, ``docs/``, ``placement/``, ``tools/``, ``.ci/`` ...),
wherever it appears: prose, code spans, command lines, links. A token with a
glob character (``etc/scheduler/*.conf.sample``) must match something.
Relative Markdown link targets are checked from the file's own directory.
Paths under ``docs/_build`` (the build output) are not checked, nor are
absolute paths (``/etc/placement/placement.conf`` is a deployment's, not the
repository's), nor the few paths of other repositories in ``_ELSEWHERE``.
"""

import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Without git: top-level directories that are build or install output, never
# named as repository content.
_NOT_CONTENT = {"build", "dist", "node_modules", "__pycache__"}
_HIDDEN_CONTENT = {".ci"}
# Paths the docs name in another repository, not this one: path -> whose.
_ELSEWHERE = {
    "placement/rest_api_version_history.rst": "upstream OpenStack Placement's",
}
_GLOB = re.compile(r"[*?\[]")
# Characters of a path token; a token ends at anything else (space, quote,
# backquote, parenthesis, colon, comma ...).
_PATH_CHARS = r"[A-Za-z0-9_.*?\[\]/@%+=-]"
# Markdown inline links and images: [text](target) or ![alt](target "title").
_MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def top_level_dirs(root=ROOT):
    """The top-level directories git tracks files in (so neither build output
    nor a directory a command of the docs creates, such as a ``--plots`` one,
    counts); without git, the directories on disk but known output."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z"],
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        out = ""
    tracked = {path.split("/", 1)[0] for path in out.split("\0") if "/" in path}
    if tracked:
        return sorted(tracked)
    names = []
    for name in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, name)):
            continue
        if name.startswith(".") and name not in _HIDDEN_CONTENT:
            continue
        if name in _NOT_CONTENT or name.endswith(".egg-info"):
            continue
        names.append(name)
    return names


def path_pattern(dirs):
    """A regex of the tokens that start with one of ``dirs`` and a slash,
    not preceded by a character that would make them part of a longer path,
    a URL or a name (``/etc/...``, ``~/.local/state/placement/...``,
    ``$XDG_STATE_HOME/placement/...``, ``openstack/placement``)."""
    alternatives = "|".join(re.escape(d) for d in sorted(dirs, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_./~$@:-])((?:{alternatives})/{_PATH_CHARS}*)")


def doc_files(root=ROOT):
    files = [os.path.join(root, "README.md")]
    for ext in ("md", "rst"):
        files += glob.glob(os.path.join(root, "docs", "**", f"*.{ext}"), recursive=True)
    build = os.path.join(root, "docs", "_build") + os.sep
    return sorted(f for f in set(files) if os.path.isfile(f) and not f.startswith(build))


def _clean(token):
    # Sentence punctuation and Markdown emphasis after a path are not part of it.
    token = token.rstrip(".,;:*_=")
    return token.split("#", 1)[0]


def _exists(root, relative):
    path = os.path.join(root, relative)
    if _GLOB.search(relative):
        return bool(glob.glob(path, recursive=True))
    return os.path.exists(path)


def missing_paths(text, source, root=ROOT, dirs=None):
    """(token, reason) for each path of ``text`` (the file ``source``) that
    does not exist under ``root``."""
    pattern = path_pattern(top_level_dirs(root) if dirs is None else dirs)
    missing = []
    seen = set()
    for match in pattern.finditer(text):
        token = _clean(match.group(1))
        if not token or token in seen or token.startswith("docs/_build") or token in _ELSEWHERE:
            continue
        seen.add(token)
        if not _exists(root, token):
            missing.append((token, "no such path in the repository"))
    if source.endswith(".md"):
        here = os.path.dirname(source)
        for match in _MD_LINK.finditer(text):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
                continue  # a URL, an anchor of this page, an absolute path
            target = target.split("#", 1)[0]
            if not target:
                continue
            resolved = os.path.normpath(os.path.join(here, target))
            rel = os.path.relpath(resolved, root)
            if rel.startswith("docs/_build") or rel in seen:
                continue
            seen.add(rel)
            if not _exists(root, rel):
                missing.append((target, f"link target {rel} does not exist"))
    return missing


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_named_path_exists(path):
    with open(path, encoding="utf-8") as src:
        text = src.read()
    missing = missing_paths(text, path)
    listed = "; ".join(f"{token} ({why})" for token, why in missing)
    assert not missing, f"{os.path.relpath(path, ROOT)} names paths that do not exist: {listed}"


def test_the_check_finds_a_wrong_path(tmp_path):
    (tmp_path / "etc" / "placement").mkdir(parents=True)
    (tmp_path / "etc" / "placement" / "placement.conf.sample").write_text("")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    text = (
        "Copy `etc/placement/placement.conf.sample`, then run\n"
        "`placement-api --config-file etc/placement/placement.conf`.\n"
        "Samples: etc/placement/*.sample, etc/scheduler/*.sample.\n"
        "Deployed as /etc/placement/placement.conf, state in\n"
        "~/.local/state/placement/placement.sqlite; [a link](../etc/nope.md),\n"
        "[built](_build/html/index.html), [home](https://example.org/etc/x).\n"
    )
    page.write_text(text)
    missing = missing_paths(text, str(page), root=str(tmp_path), dirs=["etc", "docs"])
    assert sorted(token for token, _ in missing) == [
        "../etc/nope.md",
        "etc/placement/placement.conf",
        "etc/scheduler/*.sample",
    ]
