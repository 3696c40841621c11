"""CI runs exactly the test command the README gives, and proves the plain
install first (DEVELOPERS: a green run that installed the test extra proves
nothing about ``pip install .``)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _readme_section(title):
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def _commands(section):
    return [line[4:] for line in section.splitlines() if line.startswith("    ") and line.strip()]


def test_ci_ends_with_the_readme_test_command_verbatim():
    (command,) = _commands(_readme_section("Test"))
    lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[-1] == command


def test_ci_checks_the_plain_install_before_the_test_extra():
    script = "\n".join(
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if not line.lstrip().startswith("#")
    )
    plain = script.index('pip" install -q . ')
    assert script.index("--version", plain) < script.index("'.[test]'")
    assert "placement-api" in script[plain : script.index("'.[test]'")]


def test_readme_run_section_installs_without_extras():
    # The Run commands are what a newcomer types: no test or docs extra.
    for command in _commands(_readme_section("Run")):
        assert "[test]" not in command and "[docs]" not in command, command
