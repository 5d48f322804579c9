"""A team's project (``project.plan``) as the files uv and pixi read: ``pyproject.toml`` with uv's explicit
PyTorch indexes, its sources by platform marker or by extra, and the extras' conflicts; ``pixi.toml`` with a
feature and an environment per machine. Both remember their machines (``[tool.kitbench.machines]``), so a
second run adds a machine to those already there.

A file that exists is updated in place (``_toml.Document``): kitbench's entries are replaced as values, and
every other byte is kept. Everything is checked, and both files made, before either is written.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kitbench import _files, _http, _toml
from kitbench.advice.project import FAMILY, Member, Team, check_name, plan
from kitbench.errors import KitbenchError, UsageError
from kitbench.machine.builds import build
from kitbench.machine.probe import Probe, as_dict, saved

PYPROJECT = "pyproject.toml"
PIXI = "pixi.toml"


def _norm(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def _wrong(where: str, key: str, what: str) -> UsageError:
    return UsageError(
        f"{where}: {key} is not {what}",
        hint=f"make {key} in {where} {what}, as uv and pixi read it, or move the file aside to start anew",
    )


def _at(data: dict[str, Any], path: str, kind: type, where: str, what: str) -> Any:
    """``data``'s ``path`` (dotted), each table on the way checked to be a table and the value to be a
    ``kind``; None where it is absent. A hand-written file may hold anything: kitbench reads no key it has not
    checked."""
    found: Any = data
    parts = path.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(found, dict):
            raise _wrong(where, ".".join(parts[:depth]), "a table")
        if part not in found:
            return None
        found = found[part]
    if not isinstance(found, kind):
        raise _wrong(where, path, what)
    return found


def _strings(data: dict[str, Any], path: str, where: str) -> list[str]:
    found = _at(data, path, list, where, "a list of strings") or []
    if not all(isinstance(item, str) for item in found):
        raise _wrong(where, path, "a list of strings")
    return list(found)


def _tables(data: dict[str, Any], path: str, where: str) -> list[dict[str, Any]]:
    found = _at(data, path, list, where, "an array of tables") or []
    if not all(isinstance(item, dict) for item in found):
        raise _wrong(where, path, "an array of tables")
    return list(found)


def _family(requirement: object) -> bool:
    """Whether ``requirement`` is one of the torch family's (a line that is no requirement is a person's)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return isinstance(requirement, str) and _norm(Requirement(requirement).name) in FAMILY
    except InvalidRequirement:
        return False


def index_name(url: str) -> str:
    return "pytorch-" + url.rstrip("/").rsplit("/", 1)[-1]


def remembered(texts: Iterable[tuple[str, str]]) -> dict[str, Probe]:
    """The machines that files kitbench wrote remember, by name (the first file that names one wins)."""
    found: dict[str, Probe] = {}
    for where, text in texts:
        machines = _kitbench(_toml.loads(text, where), where)["machines"]
        for name, facts in machines.items():
            found.setdefault(name, saved.from_json(facts, f"{where} [tool.kitbench.machines.{name}]"))
    return found


def _facts(machine: Probe) -> dict[str, Any]:
    """The probe as TOML holds it: no nulls (an absent key reads back as None), no sources."""

    def kept(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: kept(v) for k, v in item.items() if v is not None}
        if isinstance(item, (list, tuple)):
            return [kept(v) for v in item]
        return item

    facts = as_dict(machine)
    facts.pop("sources")
    return dict(kept(facts))


def _python(machine: Probe) -> str | None:
    found = re.match(r"([0-9]+)\.([0-9]+)", machine.python_version)
    return f"{found[1]}.{found[2]}" if found else None


def _oldest(versions: Iterable[str]) -> str | None:
    known = [f"{m[1]}.{m[2]}" for m in (re.match(r"([0-9]+)\.([0-9]+)", v) for v in versions) if m]
    return min(known, key=lambda v: tuple(int(p) for p in v.split("."))) if known else None


def _floor(team: Team) -> str:
    # Unknown everywhere: the oldest Python kitbench itself runs on.
    return _oldest(m.machine.python_version for m in team.members) or "3.10"


def _pins(member: Member) -> list[str]:
    return [f"{name}=={version}; {member.wheels.marker}" for name, version in member.wheels.pins]


def _unique(items: Iterable[Any]) -> list[Any]:
    found: list[Any] = []
    for item in items:
        if item not in found:
            found.append(item)
    return found


def _kitbench(old: dict[str, Any], where: str) -> dict[str, Any]:
    """``[tool.kitbench]``, each key kitbench reads checked: extras and indexes lists of names, machines a
    table of tables, release_spec and index text."""
    _at(old, "tool.kitbench", dict, where, "a table")
    machines = _at(old, "tool.kitbench.machines", dict, where, "a table of machines") or {}
    if not all(isinstance(facts, dict) for facts in machines.values()):
        raise UsageError(
            f"{where}: [tool.kitbench.machines] is not a table of machines",
            hint="kitbench writes that table: remove it, then name the machines again",
        )
    return {
        "extras": _strings(old, "tool.kitbench.extras", where),
        "indexes": _strings(old, "tool.kitbench.indexes", where),
        "machines": machines,
        "release_spec": _at(old, "tool.kitbench.release_spec", str, where, "text"),
        "index": _at(old, "tool.kitbench.index", str, where, "text"),
        "python": _at(old, "tool.kitbench.python", str, where, "text")
        or _oldest([str(facts.get("python_version", "")) for facts in machines.values()]),
        "written": "kitbench" in (old.get("tool") or {}),
    }


def _remember(doc: _toml.Document, team: Team, index: str | None) -> None:
    # release is the team's resolved release; release_spec what was asked (stable stays stable on a later run),
    # index the mirror (kept by a later run that names none), python the floor kitbench wrote (recomputed
    # while it is kitbench's own).
    head = {
        "note": "written by `kitbench project`: it rewrites [tool.kitbench] and the torch family's entries; "
        "the rest of this file is yours",
        "release": team.release or "per machine",
        "release_spec": team.spec,
        **({"index": index} if index else {}),
        "python": _floor(team),
        "extras": team.extras,
        "indexes": _unique(index_name(m.wheels.index) for m in team.members if m.wheels.index),
        "machines": _toml.Headed({member.name: _toml.Headed(_facts(member.machine)) for member in team.members}),
    }
    doc.set(("tool", "kitbench"), head)


def project_name(name: str, given_as: str = "--name") -> str:
    """``name`` where it is a valid project name (PEP 508's, which uv and pip take), else refused."""
    from packaging.utils import InvalidName, canonicalize_name

    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        raise UsageError(
            f"{given_as} {name[:80]!r} is not a valid project name",
            hint="letters, digits and '-', '_' or '.' between them, e.g. --name my-project (PEP 508)",
        ) from None
    return name


def folder_name(folder: str) -> str:
    """A folder's name as a project's: its letters and digits (accents set aside: über is uber), each run
    of anything else one '-', normalised as PEP 503 does (My Project is my-project)."""
    import unicodedata

    from packaging.utils import canonicalize_name

    ascii_only = unicodedata.normalize("NFKD", folder).encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9]+", "-", ascii_only).strip("-")
    if not name:
        raise UsageError(
            f"the folder's name {folder[:80]!r} makes no project name (PEP 508: ASCII letters, digits "
            "and '-', '_', '.')",
            hint="name the project: --name my-project",
        )
    return str(canonicalize_name(name))


def _named(doc: _toml.Document, path: tuple[str, ...], name: str | None, folder: str) -> None:
    """The project's name: a name already there is kept (a different --name is refused), else --name, else
    the folder's."""
    there = doc.get(path)
    if there is None:
        doc.set(path, name or folder_name(folder))
    elif name is not None and _norm(name) != _norm(str(there)):
        raise UsageError(
            f"{doc.where}: the project is named {there!r}, not {name!r}",
            hint=f"give --name {there} or none: kitbench does not rename a project",
        )


def pyproject(
    team: Team, old: str = "", name: str | None = None, index: str | None = None, folder: str = "project"
) -> str:
    """The project's ``pyproject.toml``: ``old`` updated, or a new one named ``name`` (else after ``folder``).
    ``index`` replaces the root of PyTorch's index in every URL (a mirror, or a test's stand-in), ``{compute}``
    standing for the build."""
    doc = _toml.Document(old, PYPROJECT)
    before = doc.data
    mine = _kitbench(before, PYPROJECT)
    # Every table and key read below, checked first.
    _at(before, "project", dict, PYPROJECT, "a table")
    _strings(before, "project.dependencies", PYPROJECT)
    dynamic = _strings(before, "project.dynamic", PYPROJECT)
    for key in ("name", "version", "requires-python"):
        _at(before, f"project.{key}", str, PYPROJECT, "text")
    extras = _at(before, "project.optional-dependencies", dict, PYPROJECT, "a table") or {}
    for extra, pins in extras.items():
        if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
            raise _wrong(PYPROJECT, f"project.optional-dependencies.{extra}", "a list of strings")
    _at(before, "tool.uv", dict, PYPROJECT, "a table")
    _at(before, "tool.uv.sources", dict, PYPROJECT, "a table")
    their_indexes = _tables(before, "tool.uv.index", PYPROJECT)
    for group in _at(before, "tool.uv.conflicts", list, PYPROJECT, "a list of lists of tables") or []:
        if not isinstance(group, list) or not all(isinstance(g, dict) for g in group):
            raise _wrong(PYPROJECT, "tool.uv.conflicts", "a list of lists of tables")
    for key in ("dependencies", *(["optional-dependencies"] if team.extras else [])):
        if key in dynamic:
            raise UsageError(
                f"{PYPROJECT}: the project's {key} are dynamic (its build backend makes them), and "
                f"kitbench pins torch in {key}",
                hint=f"write the project's {key} in [project] and take {key!r} out of its dynamic "
                "list, or run kitbench project in a folder of its own for the team",
            )
    # One of a person's own named as kitbench names a build's would be taken over, so it is refused.
    needed = {index_name(m.wheels.index) for m in team.members if m.wheels.index}
    taken = next(
        (i.get("name") for i in their_indexes if i.get("name") not in mine["indexes"] and i.get("name") in needed), None
    )
    if taken:
        raise UsageError(
            f"{PYPROJECT}: the index {taken!r} is yours, and kitbench needs the name for a build",
            hint=f"rename your [[tool.uv.index]] {taken!r}: kitbench names an index pytorch-<build>",
        )
    theirs = next((e for e in team.extras if e in extras and e not in mine["extras"]), None)
    if theirs:
        raise UsageError(
            f"{PYPROJECT}: the extra {theirs!r} is yours, and kitbench needs it for a build",
            hint=f"rename your extra {theirs!r}: kitbench names an extra after the build it installs",
        )
    platforms = _unique(m.wheels.marker for m in team.members)
    for key in ("environments", "required-environments"):
        found = _at(before, f"tool.uv.{key}", list, PYPROJECT, "a list of markers")
        # kitbench writes both for the team's platforms: a person's own (in a file kitbench has not written)
        # would be lost, so it is refused.
        if found is not None and not mine["written"] and found != platforms:
            raise UsageError(
                f"{PYPROJECT}: [tool.uv] {key} is yours, and kitbench writes it for the team's platforms",
                hint=f"remove {key} from [tool.uv] (kitbench writes the platforms of "
                "the machines it is given), or keep this project apart",
            )

    def url(member: Member) -> str:
        assert member.wheels.index is not None
        return mirrored(index, member.wheels.build) if index else member.wheels.index

    _named(doc, ("project", "name"), name, folder)
    if "version" not in dynamic and doc.get(("project", "version")) is None:
        doc.set(("project", "version"), "0.1.0")
    # kitbench's own floor (the one it wrote last) follows the team's oldest Python; a person's is kept.
    if "requires-python" not in dynamic and doc.get(("project", "requires-python")) in (
        None,
        mine["python"] and f">={mine['python']}",
    ):
        doc.set(("project", "requires-python"), f">={_floor(team)}")
    doc.splice(
        ("project", "dependencies"), _family, _unique(pin for m in team.members if not m.extra for pin in _pins(m))
    )
    if doc.get(("project", "dependencies")) is None:
        doc.set(("project", "dependencies"), [])
    # In kitbench's extras too, the torch family's entries are kitbench's, and a person's own are kept.
    for extra in mine["extras"]:
        if extra not in team.extras:
            doc.splice(("project", "optional-dependencies", extra), _family, [])
    for extra in team.extras:
        doc.splice(
            ("project", "optional-dependencies", extra),
            _family,
            _unique(pin for m in team.members if m.extra == extra for pin in _pins(m)),
        )
    doc.set(("tool", "uv", "environments"), platforms)
    doc.set(("tool", "uv", "required-environments"), platforms)
    doc.splice(
        ("tool", "uv", "conflicts"),
        lambda group: any(isinstance(g, dict) and g.get("extra") in mine["extras"] for g in group),
        [[{"extra": e} for e in team.extras]] if len(team.extras) > 1 else [],
    )
    for package in FAMILY:
        routes = _unique(
            {"index": index_name(m.wheels.index), **({"extra": m.extra} if m.extra else {}), "marker": m.wheels.marker}
            for m in team.members
            if m.wheels.index and package in dict(m.wheels.pins)
        )
        if routes:
            doc.set(("tool", "uv", "sources", package), routes)
        else:
            doc.delete(("tool", "uv", "sources", package))
    indexes = _unique(
        _toml.Headed({"name": index_name(m.wheels.index), "url": url(m), "explicit": True})
        for m in team.members
        if m.wheels.index
    )
    doc.splice(("tool", "uv", "index"), lambda i: isinstance(i, dict) and i.get("name") in mine["indexes"], indexes)
    _remember(doc, team, index)
    return doc.text()


def pixi(team: Team, old: str = "", name: str | None = None, index: str | None = None, folder: str = "project") -> str:
    """The project's ``pixi.toml``: a feature and an environment per machine, ``old`` updated or a new one."""
    doc = _toml.Document(old, PIXI)
    before = doc.data
    mine = _kitbench(before, PIXI)
    top = "project" if "project" in before else "workspace"
    _at(before, top, dict, PIXI, "a table")
    _strings(before, f"{top}.platforms", PIXI)
    _strings(before, f"{top}.channels", PIXI)
    _at(before, top + ".name", str, PIXI, "text")
    _at(before, "dependencies", dict, PIXI, "a table")
    environments = _at(before, "environments", dict, PIXI, "a table") or {}
    features = _at(before, "feature", dict, PIXI, "a table") or {}
    earlier = set(mine["machines"])  # kitbench's machines, whose features and environments are its own
    for kind, found in (("feature", features), ("environment", environments)):
        theirs = next((m.name for m in team.members if m.name in found and m.name not in earlier), None)
        if theirs:
            header = f"[feature.{theirs}]" if kind == "feature" else f"{theirs} in [environments]"
            raise UsageError(
                f"{PIXI}: the {kind} {theirs!r} is yours, and kitbench needs it for the machine {theirs!r}",
                hint=f"rename your {header}, or name the machine otherwise",
            )
    _named(doc, (top, "name"), name, folder)
    if doc.get((top, "channels")) is None:
        doc.set((top, "channels"), ["conda-forge"])
    there = doc.get((top, "platforms")) or []
    doc.splice(
        (top, "platforms"),
        lambda _: False,
        [s for s in _unique(m.wheels.subdir for m in team.members) if s not in there],
    )
    # As requires-python: kitbench's own floor follows the team; a person's is kept.
    if doc.get(("dependencies", "python")) in (None, mine["python"] and f">={mine['python']}"):
        doc.set(("dependencies", "python"), f">={_floor(team)}")
    machines = {m.name for m in team.members}
    for machine in sorted(earlier - machines):
        doc.delete(("feature", machine))
        doc.delete(("environments", machine))
    for member in team.members:
        head: dict[str, Any] = {"platforms": [member.wheels.subdir]}
        cuda = build(member.chosen.compute).cuda
        if cuda:
            # What the build needs of the driver, as pixi's __cuda says it: the highest CUDA the driver runs.
            head["system-requirements"] = {"cuda": f"{cuda[0]}.{cuda[1]}"}
        python = _python(member.machine)
        if python:
            head["dependencies"] = _toml.Headed({"python": f"{python}.*"})
        where = member.wheels.index and (mirrored(index, member.wheels.build) if index else member.wheels.index)
        head["pypi-dependencies"] = _toml.Headed(
            {
                package: {"version": f"=={version}", "index": where} if where else f"=={version}"
                for package, version in member.wheels.pins
            }
        )
        # kitbench's keys of its feature, each; a person's own in it (tasks, another package) are kept.
        feature = ("feature", member.name)
        doc.set(feature, head, keep_others=True)
        if not cuda:
            doc.delete((*feature, "system-requirements", "cuda"))
        if not python:
            doc.delete((*feature, "dependencies", "python"))
        for package in FAMILY:
            if package not in dict(member.wheels.pins):
                doc.delete((*feature, "pypi-dependencies", package))
    for member in team.members:
        doc.set(("environments", member.name), [member.name])
    _remember(doc, team, index)
    return doc.text()


def mirrored(index: str, compute: str, given_as: str = "--index") -> str:
    """``index`` with ``compute`` (a build: cpu, cu126) for its one placeholder, ``{compute}``, checked as an
    index URL. Not str.format: any other brace would be a KeyError or an attribute lookup on text."""
    if "{" in index.replace("{compute}", "") or "}" in index.replace("{compute}", ""):
        raise UsageError(
            f"{given_as}: the only placeholder a mirror's URL takes is {{compute}}",
            hint="e.g. --index https://mirror.example/whl/{compute} ({compute} becomes cpu, cu126, ...)",
        )
    url = _http.checked(index.replace("{compute}", compute), given_as)
    parts = urllib.parse.urlsplit(url)
    # Any query or fragment too: a token hides there as often as in the user part (?private_token=...), and an
    # index's URL needs neither. The URL itself is never quoted back.
    if "@" in parts.netloc or "?" in url or "#" in url:
        raise UsageError(
            f"{given_as}: a mirror's URL holds a user, token, query or fragment, and the project's files are committed",
            hint="give uv the credentials apart: UV_INDEX_<NAME>_USERNAME and UV_INDEX_<NAME>_PASSWORD "
            "(NAME: the index's name, e.g. PYTORCH_CU126), or a netrc entry for the host",
        )
    return url


def _older_python(data: dict[str, Any], ours: str | None, floor: str) -> tuple[str, str] | None:
    """A person's requires-python and the oldest Python it admits, where that is older than ``floor`` (the
    team's oldest); None where it is not, or where the floor is kitbench's own (``ours``)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    given = (data.get("project") or {}).get("requires-python") if isinstance(data.get("project"), dict) else None
    if not isinstance(given, str) or given == f">={ours}" or given == f">={floor}":
        return None
    try:
        admits = SpecifierSet(given)
    except InvalidSpecifier:
        return None  # uv says so, in its words
    major, minor = (int(p) for p in floor.split("."))
    older = next((f"{major}.{m}" for m in range(minor) if admits.contains(f"{major}.{m}", prereleases=True)), None)
    return (given, older) if older else None


def _read(path: Path) -> str:
    return _files.read_text(path, 1 << 20, "project file", UsageError) if path.exists() else ""


def write(
    folder: Path,
    given: Sequence[tuple[str, Probe]],
    *,
    drop: Sequence[str] = (),
    release_spec: str | None = None,
    with_pixi: bool = False,
    index: str | None = None,
    name: str | None = None,
) -> tuple[Team, list[Path]]:
    """Write (or update) ``folder``'s pyproject.toml, and pixi.toml ``with_pixi`` or where kitbench wrote one
    before, for the machines the files remember and those ``given`` (which replace the remembered of their
    name), less those to ``drop``; a new project is named ``name`` (else after the folder). Everything is
    checked before anything is written: a refusal leaves the folder as it was."""
    if name is not None:
        project_name(name)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder", hint="create the project's folder first, or name another")
    names = [check_name(name) for name, _ in given]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise UsageError(
            f"machine {twice!r} is given twice in one run",
            hint="give each machine once; run again with --machine NAME=... to replace one",
        )
    both = next((n for n in drop if n in names), None)
    if both:
        raise UsageError(
            f"machine {both!r} is both given (--machine) and dropped (--drop)",
            hint=f"--machine {both}=... replaces the remembered {both}; --drop {both} alone removes it",
        )
    paths = [folder / PYPROJECT, folder / PIXI]
    old = {path: _read(path) for path in paths}
    existed = {path for path in paths if path.exists()}
    machines = remembered((path.name, text) for path, text in old.items())
    unknown = [name for name in drop if name not in machines]
    if unknown:
        raise UsageError(
            f"--drop {unknown[0]}: no such machine in {folder}",
            hint=f"the machines there: {', '.join(machines) or 'none'}",
        )
    for machine_name in drop:
        del machines[machine_name]
    for machine_name, machine in given:
        machines[machine_name] = machine
    kept = [_kitbench(_toml.loads(old[path], path.name), path.name) for path in paths]
    # Not asked: what the files remember (the spec asked last, not the release it resolved to), else stable.
    release_spec = release_spec or next((k["release_spec"] for k in kept if k["release_spec"]), None) or "stable"
    given_as = "--index"
    if index is None:
        index = next((k["index"] for k in kept if k["index"]), None)
        given_as = "[tool.kitbench] index"
    team = plan(list(machines.items()), release_spec)
    older = _older_python(_toml.loads(old[paths[0]], PYPROJECT), kept[0]["python"], _floor(team))
    if older:
        team.notes.append(
            f"requires-python {older[0]!r} is yours and admits Python {older[1]}, older than the "
            f"team's oldest ({_floor(team)}): uv lock resolves for every Python it admits, and fails "
            f"where the pinned torch has no wheel for one; raise it to >={_floor(team)} if so"
        )
    if index:
        builds = _unique(m.wheels.build for m in team.members if m.wheels.index)
        for compute in builds or ["cpu"]:
            mirrored(index, compute, given_as)
        if len(builds) > 1 and "{compute}" not in index:
            raise UsageError(
                f"{given_as}: the team needs {len(builds)} builds ({', '.join(builds)}), and the "
                f"mirror's URL has no {{compute}} to tell them apart",
                hint="e.g. --index https://mirror.example/whl/{compute}",
            )
    pixi_ours = "kitbench" in (_toml.loads(old[paths[1]], PIXI).get("tool") or {})
    texts = {
        path: render(team, old[path], name, index, folder.resolve().name)
        for path, render in ((paths[0], pyproject), (paths[1], pixi))
        if path.name != PIXI or with_pixi or pixi_ours
    }
    changed = {path: text for path, text in texts.items() if text != old[path]}
    for path in changed:
        _files.check_target(path, replace=True)
    written: list[Path] = []
    try:
        for path, text in changed.items():
            _files.write(path, text, replace=True, what="the project")
            written.append(path)
    except KitbenchError:
        # Both or neither: what was written is put back as it was (a full disk, a file that appeared).
        for path in written:
            if path in existed:
                _files.write(path, old[path], replace=True, what="the project")
            else:
                path.unlink()
        raise
    return team, written
