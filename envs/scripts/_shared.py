"""What the fact scripts share: facts written as data, checked before they replace a file, bad input in one line.

A script's file is YAML that pyyaml makes from values (never text pasted around a value a listing sent), under a
fixed header of comments; those exact bytes are parsed and validated against the file's schema
(kitbench/records/schemas, as install-cmd will read them) and only then written beside the file and renamed over
it (``kitbench._files.write``), so a refused or killed run leaves the file as it was. ``run`` answers every refusal
as the CLI does: one ``ERROR:`` line, a ``hint:`` line, exit 1, never a traceback.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import BuildTag, InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

from kitbench import _files
from kitbench.errors import KitbenchError, clean
from kitbench.records import manifest


class Refused(KitbenchError):
    """What a script read is not a fact it may write (a listing's odd file name, an unreadable wheel)."""


# What a wheel's file name holds once escaped (the binary distribution format): no %-escape, quote, space or
# backslash, so nothing a listing sends is ever decoded into a tag.
_WHEEL_NAME = re.compile(r"[A-Za-z0-9._+!-]{1,255}\.whl")
# A Requires-Python as PEP 440 writes one: clauses of an operator and a version, nothing packaging would strip.
_SPECIFIERS = re.compile(r"[0-9A-Za-z.*+!,<>=~ ]{0,200}")
_UNSHOWN = re.compile(r"[^A-Za-z0-9._+!%-]")


def shown(name: str) -> str:
    """A name a listing sent, for a report that becomes a pull request's text: its odd characters as ``?``."""
    return _UNSHOWN.sub("?", name[:120])


def wheel(filename: str) -> tuple[NormalizedName, Version, BuildTag, frozenset[Tag]] | None:
    """A wheel's name, version, build number and tags, as strictly as packaging reads them (and only from a name
    in a wheel's characters); None for anything else: an sdist, or a name no installer reads as a wheel."""
    if not _WHEEL_NAME.fullmatch(filename):
        return None
    try:
        parsed = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return parsed if all(t.interpreter and t.abi and t.platform for t in parsed[3]) else None


def requires_python(text: str, where: str) -> str:
    """A Requires-Python an index gave for ``where``, as given, once packaging reads it (PEP 440 specifiers) and it
    holds no character packaging would strip (a control, U+001C): else Refused."""
    try:
        if _SPECIFIERS.fullmatch(text):
            SpecifierSet(text)
            return text
    except InvalidSpecifier:
        pass
    raise Refused(
        f"{where}: a Requires-Python that is no PEP 440 specifier set ({clean(text[:60])!r})",
        hint="nothing was written; look at what the index serves for it",
    )


def git_show(git_dir: str, commit: str, path: str) -> str:
    """``path`` at ``commit`` of the repository ``git_dir``; one Refused where git cannot say."""
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        raise Refused(f"{commit[:60]!r} is not a commit id", hint="give the full hex id the data is read at")
    try:
        return subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
            capture_output=True,
            text=True,
            check=True,
            errors="replace",
        ).stdout
    except (OSError, subprocess.CalledProcessError) as failed:
        why = getattr(failed, "stderr", None) or str(failed)
        raise Refused(
            f"git show {commit[:12]}:{path} in {git_dir} failed: {why.strip()[:200]}",
            hint="a clone that has that commit, with git on PATH",
        ) from None


class _Dumper(yaml.SafeDumper):
    """envs/'s hand-written style: lists indented under their key, string values double-quoted (keys plain), and no
    line folded, so that a diff shows one value per line."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def choose_scalar_style(self) -> str:
        event = self.event
        if isinstance(event, yaml.ScalarEvent) and event.tag == "tag:yaml.org,2002:str" and not self.simple_key_context:
            return '"'
        style: str = super().choose_scalar_style()
        return style


def dump(data: Mapping[str, Any], header: str = "", flow: bool = False) -> str:
    """``data`` as YAML under ``header``, each of its lines a comment (its controls escaped: no line break YAML
    knows, U+2028 included, can end a comment early); with ``flow``, a list or mapping of scalars on one line."""
    comments = "".join(f"# {clean(line)}".rstrip() + "\n" for line in header.split("\n")) if header else ""
    body: str = yaml.dump(
        dict(data),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=1 << 20,
        default_flow_style=None if flow else False,
    )
    return comments + body


def checked(text: str, path: Path, schema: str) -> dict[str, Any]:
    """The data of ``text`` as ``path`` would load: parsed as kitbench parses envs/ and valid against ``schema``;
    else one ManifestError naming the line."""
    data, root = manifest.parse(text, path)
    manifest.validate(data, root, schema, path)
    return data


def write(path: Path, text: str, schema: str) -> dict[str, Any]:
    """Check ``text`` (``checked``), then put it at ``path`` in one rename; its data."""
    data = checked(text, path, schema)
    _files.write(path, text, replace=True, what=f"the {schema} facts")
    return data


def write_rendered(render: Callable[[], str], usage: str) -> NoReturn:
    """The command line of a script that renders one file (its one argument): the file written whole, or a usage
    line (an option included: ``--help`` is no file to write), or the refusal ``run`` words."""
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(f"usage: {usage}")

    def main() -> int:
        _files.write(Path(sys.argv[1]), render(), replace=True)
        return 0

    run(main)


def run(main: Callable[[], int]) -> NoReturn:
    """Run a script's ``main`` and exit with its code; a KitbenchError is one ``ERROR:`` line, its hint, exit 1."""
    try:
        code = main()
    except KitbenchError as error:
        print(f"ERROR: {clean(error.message)}", file=sys.stderr)
        if error.hint:
            print(f"hint: {clean(error.hint)}", file=sys.stderr)
        code = 1
    raise SystemExit(code)
