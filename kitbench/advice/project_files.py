"""A team's project (``project.plan``) as the files uv and pixi read: ``pyproject.toml`` with uv's explicit
PyTorch indexes, its sources by platform marker or by extra, and the extras' conflicts; ``pixi.toml`` with a
feature and an environment per machine. Both remember their machines (``[tool.kitbench.machines]``), so a
second run adds a machine to those already there.

A file that exists is updated in place: kitbench owns the torch family's entries and the tables it writes,
and every other table, entry and comment is kept (``_toml.update``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kitbench import _files, _toml
from kitbench.advice.project import FAMILY, Member, Team, plan
from kitbench.errors import UsageError
from kitbench.machine.builds import build
from kitbench.machine.probe import Probe, saved

PYPROJECT = "pyproject.toml"
PIXI = "pixi.toml"
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_OURS = "tool.kitbench"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _family(requirement: object) -> bool:
    found = _REQUIREMENT.match(str(requirement))
    return found is not None and _norm(found[1]) in FAMILY


def index_name(url: str) -> str:
    return "pytorch-" + url.rstrip("/").rsplit("/", 1)[-1]


def remembered(texts: Iterable[tuple[str, str]]) -> dict[str, Probe]:
    """The machines that files kitbench wrote remember, by name (the first file that names one wins)."""
    found: dict[str, Probe] = {}
    for where, text in texts:
        machines = _toml.loads(text, where).get("tool", {}).get("kitbench", {}).get("machines", {})
        if not isinstance(machines, dict):
            raise UsageError(f"{where}: [tool.kitbench.machines] is not a table of machines",
                             hint="kitbench writes that table: remove it, then name the machines again")
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
    facts = dataclasses.asdict(machine)
    facts.pop("sources")
    return dict(kept(facts))


def _python(machine: Probe) -> str | None:
    found = re.match(r"([0-9]+)\.([0-9]+)", machine.python_version)
    return f"{found[1]}.{found[2]}" if found else None


def _floor(team: Team) -> str:
    known = [p for p in (_python(m.machine) for m in team.members) if p]
    # Unknown everywhere: the oldest Python kitbench itself runs on.
    return min(known, key=lambda v: tuple(int(p) for p in v.split("."))) if known else "3.10"


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


def _kitbench(old: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = old.get("tool", {}).get("kitbench", {})
    return found


def _remember(team: Team) -> list[_toml.Block]:
    head = {"note": "written by `kitbench project`: it rewrites [tool.kitbench] and the torch family's entries; "
                    "the rest of this file is yours", "release": team.release or "per machine",
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
    mine = _kitbench(before)
    project = _old(blocks, "project")
    extras = dict(project.pop("optional-dependencies", {}))
    extras.update(_old(blocks, "project.optional-dependencies"))
    uv = _old(blocks, "tool.uv")
    sources = dict(uv.pop("sources", {}))
    sources.update(_old(blocks, "tool.uv.sources"))
    their_indexes = [i for i in uv.pop("index", []) if i.get("name") not in mine.get("indexes", [])]

    def url(member: Member) -> str:
        assert member.wheels.index is not None
        return index.format(compute=member.wheels.build) if index else member.wheels.index

    project.setdefault("name", _norm(name) or "project")
    project.setdefault("version", "0.1.0")
    project.setdefault("requires-python", f">={_floor(team)}")
    project["dependencies"] = [d for d in project.get("dependencies", []) if not _family(d)] + _unique(
        pin for m in team.members if not m.extra for pin in _pins(m))
    for extra in mine.get("extras", []):
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
              if not any(g.get("extra") in mine.get("extras", []) for g in group)]
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
    ours += _remember(team)
    kitbench_indexes = set(mine.get("indexes", [])) | {i["name"] for i in indexes}

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
    mine = _kitbench(before)
    top = "project" if any(b.header == "project" for b in blocks) else "workspace"
    workspace = _old(blocks, top)
    workspace.setdefault("name", _norm(name) or "project")
    workspace.setdefault("channels", ["conda-forge"])
    workspace["platforms"] = _unique([*workspace.get("platforms", []), *(m.wheels.subdir for m in team.members)])
    dependencies = _old(blocks, "dependencies")
    dependencies.setdefault("python", f">={_floor(team)}")
    environments = _old(blocks, "environments")
    earlier = set(mine.get("machines", {}))       # kitbench's environments, to be written anew
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
        where = member.wheels.index and (index.format(compute=member.wheels.build) if index else member.wheels.index)
        pins: dict[str, object] = {package: {"version": f"=={version}", "index": where} if where else f"=={version}"
                                   for package, version in member.wheels.pins}
        ours.append(_toml.Block(f"{feature}.pypi-dependencies", False,
                                _toml.table(f"{feature}.pypi-dependencies", pins)))
        environments[member.name] = [member.name]
    ours.append(_toml.Block("environments", False, _toml.table("environments", environments)))
    ours += _remember(team)
    machines = earlier | {m.name for m in team.members}

    def owned(block: _toml.Block) -> bool:
        header = block.header or ""
        parts = header.split(".")
        return header in (top, "dependencies", "environments") or (
            parts[0] == "feature" and len(parts) > 1 and parts[1] in machines) or (
            header == _OURS or header.startswith(_OURS + "."))
    return _toml.update(old, ours, owned, PIXI)


def _read(path: Path) -> str:
    return _files.read_text(path, 1 << 20, "project file", UsageError) if path.exists() else ""


def write(folder: Path, given: Sequence[tuple[str, Probe]], *, drop: Sequence[str] = (), release_spec: str = "stable",
          with_pixi: bool = False, index: str | None = None) -> tuple[Team, list[Path]]:
    """Write (or update) ``folder``'s pyproject.toml, and pixi.toml ``with_pixi`` or where kitbench wrote one
    before, for the machines the files remember and those ``given`` (which replace the remembered of their
    name), less those to ``drop``."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder", hint="create the project's folder first, or name another")
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
    team = plan(list(machines.items()), release_spec)
    written = []
    pixi_ours = _OURS in {b.header for b in _toml.blocks(old[paths[1]])}
    for path, render in ((paths[0], pyproject), (paths[1], pixi)):
        if path.name == PIXI and not (with_pixi or pixi_ours):
            continue
        text = render(team, old[path], folder.resolve().name, index)
        if text != old[path]:
            _files.write(path, text, replace=True, what="the project")
            written.append(path)
    return team, written
