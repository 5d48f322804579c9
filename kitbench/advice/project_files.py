"""A team's project (``project.plan``) as the files uv and pixi read: ``pyproject.toml`` with uv's explicit
PyTorch indexes, its sources by platform marker or by extra, and the extras' conflicts; ``pixi.toml`` with a
feature and an environment per machine. Both remember their machines (``[tool.kitbench.machines]``), so a
second run adds a machine to those already there.

A file that exists is updated in place: kitbench owns the torch family's entries and the tables it writes,
and every other table, entry and comment is kept (``_toml.update``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kitbench import _files, _http, _toml
from kitbench.advice.project import FAMILY, Member, Team, check_name, plan
from kitbench.errors import UsageError
from kitbench.machine.builds import build
from kitbench.machine.probe import Probe, as_dict, saved

PYPROJECT = "pyproject.toml"
PIXI = "pixi.toml"
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_OURS = "tool.kitbench"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wrong(where: str, key: str, what: str) -> UsageError:
    return UsageError(f"{where}: {key} is not {what}",
                      hint=f"make {key} in {where} {what}, as uv and pixi read it, or move the file aside to "
                           "start anew")


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
    found = _REQUIREMENT.match(str(requirement))
    return found is not None and _norm(found[1]) in FAMILY


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


def _old(blocks: list[_toml.Block], header: str) -> dict[str, Any]:
    """What the old file's own table ``header`` holds (its sub-tables not included)."""
    found: dict[str, Any] = {}
    for block in blocks:
        if block.header == header and not block.array:
            found.update(_toml.own(block))
    return found


def _kitbench(old: dict[str, Any], where: str) -> dict[str, Any]:
    """``[tool.kitbench]``, each key kitbench reads checked: extras and indexes lists of names, machines a
    table of tables, release_spec and index text."""
    _at(old, "tool.kitbench", dict, where, "a table")
    machines = _at(old, "tool.kitbench.machines", dict, where, "a table of machines") or {}
    if not all(isinstance(facts, dict) for facts in machines.values()):
        raise UsageError(f"{where}: [tool.kitbench.machines] is not a table of machines",
                         hint="kitbench writes that table: remove it, then name the machines again")
    return {"extras": _strings(old, "tool.kitbench.extras", where),
            "indexes": _strings(old, "tool.kitbench.indexes", where), "machines": machines,
            "release_spec": _at(old, "tool.kitbench.release_spec", str, where, "text"),
            "index": _at(old, "tool.kitbench.index", str, where, "text"),
            "python": _at(old, "tool.kitbench.python", str, where, "text") or _oldest(
                [str(facts.get("python_version", "")) for facts in machines.values()])}


def _remember(team: Team, index: str | None) -> list[_toml.Block]:
    # release is the team's resolved release; release_spec what was asked (stable stays stable on a later run),
    # index the mirror (kept by a later run that names none), python the floor kitbench wrote (recomputed
    # while it is kitbench's own).
    head = {"note": "written by `kitbench project`: it rewrites [tool.kitbench] and the torch family's entries; "
                    "the rest of this file is yours", "release": team.release or "per machine",
            "release_spec": team.spec, **({"index": index} if index else {}), "python": _floor(team),
            "extras": team.extras, "indexes": _unique(index_name(m.wheels.index) for m in team.members
                                                      if m.wheels.index)}
    out = [_toml.Block(_OURS, False, _toml.table(_OURS, head))]
    for member in team.members:
        header = f"{_OURS}.machines.{member.name}"
        out.append(_toml.Block(header, False, _toml.table(header, _facts(member.machine))))
    return out


def pyproject(team: Team, old: str = "", name: str = "project", index: str | None = None) -> str:
    """The project's ``pyproject.toml``: ``old`` updated, or a new one named ``name``. ``index`` replaces the
    root of PyTorch's index in every URL (a mirror, or a test's stand-in), ``{compute}`` standing for the build."""
    blocks = _toml.blocks(old)
    before = _toml.loads(old, PYPROJECT)
    mine = _kitbench(before, PYPROJECT)
    # Every table and key read below, checked first (the blocks' pairs are the same file's, cut by table).
    _at(before, "project", dict, PYPROJECT, "a table")
    _strings(before, "project.dependencies", PYPROJECT)
    for key in ("name", "version", "requires-python"):
        _at(before, f"project.{key}", str, PYPROJECT, "text")
    for extra, pins in (_at(before, "project.optional-dependencies", dict, PYPROJECT, "a table") or {}).items():
        if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
            raise _wrong(PYPROJECT, f"project.optional-dependencies.{extra}", "a list of strings")
    _at(before, "tool.uv", dict, PYPROJECT, "a table")
    _at(before, "tool.uv.sources", dict, PYPROJECT, "a table")
    _tables(before, "tool.uv.index", PYPROJECT)
    for group in _at(before, "tool.uv.conflicts", list, PYPROJECT, "a list of lists of tables") or []:
        if not isinstance(group, list) or not all(isinstance(g, dict) for g in group):
            raise _wrong(PYPROJECT, "tool.uv.conflicts", "a list of lists of tables")
    project = _old(blocks, "project")
    extras = dict(project.pop("optional-dependencies", {}))
    extras.update(_old(blocks, "project.optional-dependencies"))
    uv = _old(blocks, "tool.uv")
    sources = dict(uv.pop("sources", {}))
    sources.update(_old(blocks, "tool.uv.sources"))
    their_indexes = [i for i in uv.pop("index", []) if i.get("name") not in mine["indexes"]]
    # Every [[tool.uv.index]] of the file (its own blocks, not only [tool.uv]'s inline array): one of a person's
    # own named as kitbench names a build's would be taken over, so it is refused.
    taken = next((i["name"] for i in _tables(before, "tool.uv.index", PYPROJECT)
                  if i.get("name") not in mine["indexes"] and i.get("name") in
                  {index_name(m.wheels.index) for m in team.members if m.wheels.index}), None)
    if taken:
        raise UsageError(f"{PYPROJECT}: the index {taken!r} is yours, and kitbench needs the name for a build",
                         hint=f"rename your [[tool.uv.index]] {taken!r}: kitbench names an index pytorch-<build>")

    def url(member: Member) -> str:
        assert member.wheels.index is not None
        return mirrored(index, member.wheels.build) if index else member.wheels.index

    project.setdefault("name", _norm(name) or "project")
    project.setdefault("version", "0.1.0")
    # kitbench's own floor (the one it wrote last) follows the team's oldest Python; a person's is kept.
    if project.get("requires-python") in (None, mine["python"] and f">={mine['python']}"):
        project["requires-python"] = f">={_floor(team)}"
    project["dependencies"] = [d for d in project.get("dependencies", []) if not _family(d)] + _unique(
        pin for m in team.members if not m.extra for pin in _pins(m))
    for extra in mine["extras"]:
        extras.pop(extra, None)
    for extra in team.extras:
        if extra in extras:
            raise UsageError(f"{PYPROJECT}: the extra {extra!r} is yours, and kitbench needs it for a build",
                             hint=f"rename your extra {extra!r}: kitbench names an extra after the build it installs")
        extras[extra] = _unique(pin for m in team.members if m.extra == extra for pin in _pins(m))
    platforms = _unique(m.wheels.marker for m in team.members)
    uv["environments"] = platforms
    uv["required-environments"] = platforms
    theirs = [group for group in uv.get("conflicts", [])
              if not any(g.get("extra") in mine["extras"] for g in group)]
    uv.pop("conflicts", None)
    if theirs or len(team.extras) > 1:
        uv["conflicts"] = theirs + ([[{"extra": e} for e in team.extras]] if len(team.extras) > 1 else [])
    for package in FAMILY:
        sources.pop(package, None)
    for package in FAMILY:
        routes = _unique({"index": index_name(m.wheels.index), **({"extra": m.extra} if m.extra else {}),
                          "marker": m.wheels.marker} for m in team.members
                         if m.wheels.index and package in dict(m.wheels.pins))
        if routes:
            sources[package] = routes
    ours = [_toml.Block("project", False, _toml.table("project", project))]
    if extras:
        ours.append(_toml.Block("project.optional-dependencies", False,
                                _toml.table("project.optional-dependencies", extras)))
    ours.append(_toml.Block("tool.uv", False, _toml.table("tool.uv", uv)))
    if sources:
        ours.append(_toml.Block("tool.uv.sources", False, _toml.table("tool.uv.sources", sources)))
    indexes = their_indexes + _unique({"name": index_name(m.wheels.index), "url": url(m), "explicit": True}
                                      for m in team.members if m.wheels.index)
    ours += [_toml.Block("tool.uv.index", True, _toml.table("tool.uv.index", i, array=True)) for i in indexes]
    ours += _remember(team, index)
    kitbench_indexes = set(mine["indexes"]) | {i["name"] for i in indexes}

    def owned(block: _toml.Block) -> bool:
        header = block.header or ""
        if header == "tool.uv.index":
            return _toml.own(block).get("name") in kitbench_indexes
        return header in ("project", "project.optional-dependencies", "tool.uv", "tool.uv.sources") or (
            header == _OURS or header.startswith(_OURS + "."))
    return _toml.update(old, ours, owned, PYPROJECT)


def pixi(team: Team, old: str = "", name: str = "project", index: str | None = None) -> str:
    """The project's ``pixi.toml``: a feature and an environment per machine, ``old`` updated or a new one."""
    blocks = _toml.blocks(old)
    before = _toml.loads(old, PIXI)
    mine = _kitbench(before, PIXI)
    top = "project" if any(b.header == "project" for b in blocks) else "workspace"
    _at(before, top, dict, PIXI, "a table")
    _strings(before, f"{top}.platforms", PIXI)
    _strings(before, f"{top}.channels", PIXI)
    _at(before, "dependencies", dict, PIXI, "a table")
    _at(before, "environments", dict, PIXI, "a table")
    features = _at(before, "feature", dict, PIXI, "a table") or {}
    earlier = set(mine["machines"])       # kitbench's environments, to be written anew
    theirs = next((m.name for m in team.members if m.name in features and m.name not in earlier), None)
    if theirs:
        raise UsageError(f"{PIXI}: the feature {theirs!r} is yours, and kitbench needs it for the machine {theirs!r}",
                         hint=f"rename your [feature.{theirs}], or name the machine otherwise")
    workspace = _old(blocks, top)
    workspace.setdefault("name", _norm(name) or "project")
    workspace.setdefault("channels", ["conda-forge"])
    workspace["platforms"] = _unique([*workspace.get("platforms", []), *(m.wheels.subdir for m in team.members)])
    dependencies = _old(blocks, "dependencies")
    # As requires-python: kitbench's own floor follows the team; a person's is kept.
    if dependencies.get("python") in (None, mine["python"] and f">={mine['python']}"):
        dependencies["python"] = f">={_floor(team)}"
    environments = _old(blocks, "environments")
    for machine in earlier:
        environments.pop(machine, None)
    ours = [_toml.Block(top, False, _toml.table(top, workspace)),
            _toml.Block("dependencies", False, _toml.table("dependencies", dependencies))]
    for member in team.members:
        feature = f"feature.{member.name}"
        head: dict[str, Any] = {"platforms": [member.wheels.subdir]}
        cuda = build(member.chosen.compute).cuda
        if cuda:
            # What the build needs of the driver, as pixi's __cuda says it: the highest CUDA the driver runs.
            head["system-requirements"] = {"cuda": f"{cuda[0]}.{cuda[1]}"}
        ours.append(_toml.Block(feature, False, _toml.table(feature, head)))
        python = _python(member.machine)
        if python:
            ours.append(_toml.Block(f"{feature}.dependencies", False,
                                    _toml.table(f"{feature}.dependencies", {"python": f"{python}.*"})))
        where = member.wheels.index and (mirrored(index, member.wheels.build) if index else member.wheels.index)
        pins: dict[str, object] = {package: {"version": f"=={version}", "index": where} if where else f"=={version}"
                                   for package, version in member.wheels.pins}
        ours.append(_toml.Block(f"{feature}.pypi-dependencies", False,
                                _toml.table(f"{feature}.pypi-dependencies", pins)))
        environments[member.name] = [member.name]
    ours.append(_toml.Block("environments", False, _toml.table("environments", environments)))
    ours += _remember(team, index)
    machines = earlier | {m.name for m in team.members}

    def owned(block: _toml.Block) -> bool:
        header = block.header or ""
        parts = header.split(".")
        return header in (top, "dependencies", "environments") or (
            parts[0] == "feature" and len(parts) > 1 and parts[1] in machines) or (
            header == _OURS or header.startswith(_OURS + "."))
    return _toml.update(old, ours, owned, PIXI)


def mirrored(index: str, compute: str, given_as: str = "--index") -> str:
    """``index`` with ``compute`` (a build: cpu, cu126) for its one placeholder, ``{compute}``, checked as an
    index URL. Not str.format: any other brace would be a KeyError or an attribute lookup on text."""
    if "{" in index.replace("{compute}", "") or "}" in index.replace("{compute}", ""):
        raise UsageError(f"{given_as}: the only placeholder a mirror's URL takes is {{compute}}",
                         hint="e.g. --index https://mirror.example/whl/{compute} ({compute} becomes cpu, cu126, ...)")
    url = _http.checked(index.replace("{compute}", compute), given_as)
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        raise UsageError(f"{given_as}: a mirror's URL holds a user or token, and pyproject.toml is committed",
                         hint="give uv the credentials apart: UV_INDEX_<NAME>_USERNAME and UV_INDEX_<NAME>_PASSWORD "
                              "(NAME: the index's name, e.g. PYTORCH_CU126), or a netrc entry for the host")
    return url


def _read(path: Path) -> str:
    return _files.read_text(path, 1 << 20, "project file", UsageError) if path.exists() else ""


def write(folder: Path, given: Sequence[tuple[str, Probe]], *, drop: Sequence[str] = (),
          release_spec: str | None = None, with_pixi: bool = False,
          index: str | None = None) -> tuple[Team, list[Path]]:
    """Write (or update) ``folder``'s pyproject.toml, and pixi.toml ``with_pixi`` or where kitbench wrote one
    before, for the machines the files remember and those ``given`` (which replace the remembered of their
    name), less those to ``drop``."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder", hint="create the project's folder first, or name another")
    names = [check_name(name) for name, _ in given]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise UsageError(f"machine {twice!r} is given twice in one run",
                         hint="give each machine once; run again with --machine NAME=... to replace one")
    both = next((n for n in drop if n in names), None)
    if both:
        raise UsageError(f"machine {both!r} is both given (--machine) and dropped (--drop)",
                         hint=f"--machine {both}=... replaces the remembered {both}; --drop {both} alone removes it")
    paths = [folder / PYPROJECT, folder / PIXI]
    old = {path: _read(path) for path in paths}
    machines = remembered((path.name, text) for path, text in old.items())
    unknown = [name for name in drop if name not in machines]
    if unknown:
        raise UsageError(f"--drop {unknown[0]}: no such machine in {folder}",
                         hint=f"the machines there: {', '.join(machines) or 'none'}")
    for name in drop:
        del machines[name]
    for name, machine in given:
        machines[name] = machine
    kept = [_kitbench(_toml.loads(old[path], path.name), path.name) for path in paths]
    # Not asked: what the files remember (the spec asked last, not the release it resolved to), else stable.
    release_spec = release_spec or next((k["release_spec"] for k in kept if k["release_spec"]), None) or "stable"
    given_as = "--index"
    if index is None:
        index = next((k["index"] for k in kept if k["index"]), None)
        given_as = "[tool.kitbench] index"
    team = plan(list(machines.items()), release_spec)
    if index:
        builds = _unique(m.wheels.build for m in team.members if m.wheels.index)
        for compute in builds or ["cpu"]:
            mirrored(index, compute, given_as)
        if len(builds) > 1 and "{compute}" not in index:
            raise UsageError(f"{given_as}: the team needs {len(builds)} builds ({', '.join(builds)}), and the "
                             f"mirror's URL has no {{compute}} to tell them apart",
                             hint="e.g. --index https://mirror.example/whl/{compute}")
    written = []
    pixi_ours = _OURS in {b.header for b in _toml.blocks(old[paths[1]])}
    # Both rendered before either is written: a refusal of pixi.toml leaves pyproject.toml as it was.
    texts = {path: render(team, old[path], folder.resolve().name, index)
             for path, render in ((paths[0], pyproject), (paths[1], pixi))
             if path.name != PIXI or with_pixi or pixi_ours}
    for path, text in texts.items():
        if text != old[path]:
            _files.write(path, text, replace=True, what="the project")
            written.append(path)
    return team, written
