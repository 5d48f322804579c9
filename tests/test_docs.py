"""The README and docs/ stay true: every kitbench command they show parses with today's CLI,
every nox session they name exists, and every quoted install-cmd transcript is what
install-cmd prints now."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from kitbench import _cli, _parser
from kitbench.environments import targets

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_KITBENCH = re.compile(r"^(?:\$ )?(?:\S*/)?kitbench (?P<args>.*)$")
_NOX = re.compile(r"\bnox(?: -R)? -s (?P<session>[\w-]+)")
_SESSIONS = {"tests", "lint", "lock", "bench"}


def _blocks(page: Path) -> Iterator[list[str]]:
    """The lines of each fenced code block, continuation lines joined."""
    block: list[str] | None = None
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            if block is not None:
                yield block
            block = None if block is not None else []
        elif block is not None:
            if block and block[-1].endswith("\\"):
                block[-1] = block[-1][:-1] + " " + line.strip()
            else:
                block.append(line)


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in _blocks(page):
            found += [(page.name, line) for line in block if _KITBENCH.match(line.strip())]
    return found


def _transcripts() -> list[tuple[str, list[str], str]]:
    """``$ kitbench install-cmd ...`` followed by its stdout, in README and docs."""
    found = []
    for page in PAGES:
        for block in _blocks(page):
            for at, line in enumerate(block):
                if line.startswith("$ kitbench install-cmd") and at + 1 < len(block):
                    output = [out for out in block[at + 1 :] if not out.startswith(("#", "note:", "$", "..."))]
                    found.append((page.name, shlex.split(line[2:])[1:], output[0] if output else ""))
    return found


def test_the_pages_show_commands() -> None:
    assert len(_commands()) >= 10 and _transcripts()


@pytest.mark.parametrize(("page", "line"), _commands())
def test_every_kitbench_command_shown_parses(page: str, line: str) -> None:
    match = _KITBENCH.match(line.strip())
    assert match
    args = shlex.split(match["args"], comments=True)
    if any(arg in ("...", "ARGS") or arg.isupper() or any(c in arg for c in "<[|") for arg in args):
        pytest.skip(f"{page}: a synopsis with placeholders, not a command")
    # What follows "--" goes to the `kitbench run` that container and fleet run start.
    passed = args[args.index("--") + 1 :] if "--" in args else None
    _parser.build().parse_args(args[: args.index("--")] if passed is not None else args)
    if passed is not None:
        _parser.build().parse_args(["run", *passed])


@pytest.mark.parametrize(
    ("page", "line"),
    [(page.name, line) for page in PAGES for block in _blocks(page) for line in block if _NOX.search(line)],
)
def test_every_nox_session_named_exists(page: str, line: str) -> None:
    known = set(targets.load_all()) | _SESSIONS
    for session in _NOX.findall(line):
        assert session in known, f"{page}: {line}"


@pytest.mark.parametrize(("page", "args", "output"), _transcripts())
def test_quoted_install_commands_are_today_s(
    page: str, args: list[str], output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "--os" not in args and not {"--driver", "--no-gpu", "--gpu-gfx", "--intel-gpu"} & set(args):
        pytest.skip(f"{page}: a transcript of the machine it ran on")
    assert _cli.main(args) == 0
    assert capsys.readouterr().out.strip() == output.strip()


def test_the_fast_tier_the_readme_names_is_a_marker_pytest_knows(request: pytest.FixtureRequest) -> None:
    """The README's change-test loop deselects a marker pyproject.toml registers (an unknown one selects all)."""
    named = set(re.findall(r'-m "not (\w+)"', (REPO / "README.md").read_text()))
    assert named == {"integration"}
    assert any(m.startswith("integration:") for m in request.config.getini("markers"))
