"""A replay's plan: what to rebuild, read from the record alone, on a bare Python (no torch).

The record names every distribution (``environment.packages``, kitbench.run/2) or, for a /1 record,
torch and torchvision, the rest coming from the target's pins; its command line gives the run options
that change what is measured, and nothing else. Every word of the record that reaches a command line,
a file or a message is checked here first. A container record plans its image instead: the recorded
one, or the target's rebuilt, provided the target still pins the recorded torch and torchvision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kitbench.environments import targets
from kitbench.environments.locks import normalize
from kitbench.errors import KitbenchError, ReplayError
from kitbench.machine.probe import Probe
from kitbench.reading.verify import CROSS_DEVICE_RTOL
from kitbench.records import record as records
from kitbench.records.types import RunRecord


@dataclass
class Plan:
    source: Path
    sha256: str
    record: RunRecord
    python: str  # X.Y
    requirements: list[str]  # requirement lines (with --hash where known)
    exact: bool  # the whole recorded set, installed without resolving
    index: str | None
    target: str | None
    run_args: list[str]
    notes: list[str] = field(default_factory=list)  # what is not rebuilt exactly, said
    here: str | None = None  # what this machine can do with the record, said before building
    missing: str | None = None  # the record's accelerator this machine lacks ("NVIDIA H200")
    image: str | None = None  # a container record: the image it ran in, and its id
    image_id: str | None = None
    data: Path | None = None  # MNIST: this user's own (KITBENCH_DATA or the cache), never the record's


# The run options a replay takes from a record: what changes what is measured, and nothing else. Never a
# path (--data, --out), a host (--rdzv-endpoint) or how the result was shown (--json): a record chooses
# none of them. (option, Namespace attribute): flags and repeated options as run takes them.
_TAKEN = (
    ("--check", "checks"),
    ("--device", "device"),
    ("--quick", "quick"),
    ("--model", "models"),
    ("--loop", "loops"),
    ("--epochs", "epochs"),
    ("--batch-size", "batch_size"),
    ("--sweep", "sweep"),
    ("--seed", "seed"),
    ("--threads", "threads"),
    ("--limit", "limit"),
    ("--lr", "lr"),
    ("--deterministic", "deterministic"),
    ("--nproc", "nproc"),
    ("--ddp-timeout", "ddp_timeout"),
)
_DEVICE = re.compile(r"auto|cpu|mps|(cuda|xpu)(:[0-9]{1,3})?")


def _run_args(path: Path, argv: list[str]) -> tuple[list[str], list[str]]:
    """The record's command line read as ``kitbench run``'s own parser reads it (abbreviations such as
    ``--forc`` or ``--ou=x`` included), then rebuilt from ``_TAKEN`` alone; with notes on what a
    multi-node run loses. A command line that parser refuses is refused here, before anything is built."""
    from kitbench.errors import UsageError
    from kitbench.suite import runargs

    try:  # as run itself would refuse it, after an hour of building
        given = runargs.parse(argv[1:] if argv[:1] == ["run"] else list(argv))
    except UsageError as refused:
        raise ReplayError(
            f"{path}'s command line is not one this kitbench's run takes: {refused.message[:200]}",
            hint="it was not written by this kitbench or was edited since; nothing was built",
        ) from None
    if not _DEVICE.fullmatch(given.device):
        raise ReplayError(
            f"{path}'s command line names the device {given.device[:40]!r}, which is none kitbench runs on",
            hint="it was not written by kitbench or was edited since; nothing was built",
        )
    default = runargs.parse([])
    kept: list[str] = []
    for option, attribute in _TAKEN:
        value = getattr(given, attribute)
        if value == getattr(default, attribute):
            continue
        if isinstance(value, bool):
            kept.append(option)
        elif isinstance(value, list):
            for item in value:
                kept += [option, str(item)]
        else:
            kept += [option, ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]
    notes = []
    if given.nnodes is not None or given.rdzv_endpoint is not None:
        notes.append(
            f"the record's DDP ran across {given.nnodes or 'several'} nodes through a rendezvous "
            "(--nnodes, --rdzv-endpoint): that part cannot be rebuilt from a record, which never chooses "
            "a host; DDP is replayed standalone on this machine"
        )
    return kept, notes


def _accelerator(record: RunRecord) -> tuple[str, str] | None:
    """(kind, what it was) of the accelerator the record ran on, from the device it recorded; None on the CPU."""
    env = record["environment"]
    kind = str(record.get("device") or "cpu").partition(":")[0]
    if kind == "cuda":
        vendor = "AMD" if env.get("hip") else "NVIDIA"
        named = ", ".join(dict.fromkeys(env.get("gpus") or [])) or f"an {vendor} GPU"
        return ("amd" if env.get("hip") else "nvidia"), named
    if kind == "xpu":
        return "intel", ", ".join(dict.fromkeys(env.get("xpu_devices") or [])) or "an Intel GPU"
    if kind == "mps":
        return "mps", "Apple's GPU (MPS)"
    return None


def _lacks(kind: str, machine: Probe) -> bool:
    return {
        "nvidia": not machine.gpus,
        "amd": not machine.amd_gpus,
        "intel": not machine.intel_gpus,
        "mps": not (machine.os == "macos" and machine.arch == "arm64"),
    }[kind]


def _on_this_machine(
    record: RunRecord, machine: Probe, run_args: list[str]
) -> tuple[list[str], str | None, str | None]:
    """The run options for here, what this machine can do with the record (one sentence, said before
    building) and the accelerator it lacks: a GPU record on a machine without that GPU rebuilds the
    environment and runs the same checks on the CPU, comparing what a CPU run can show."""
    accelerator = _accelerator(record)
    if accelerator is None or not _lacks(accelerator[0], machine):
        return run_args, None, None
    named = accelerator[1]
    args = list(run_args)
    for i, word in enumerate(args[:-1]):
        if word == "--device":
            args[i + 1] = "cpu"
    held = record["checks"]
    compared = ["the checks' status"]
    if "availability" in held:
        compared.append("the torch build and the kernel check against float64")
    if "ddp" in held:
        compared.append("DDP's replicas identical, for the backends that run on the CPU")
    runs = held.get("mnist", {}).get("runs", [])
    if any(r["device"] == "cpu" for r in runs):
        compared.append("the record's MNIST runs on the CPU, by verify's rules (its GPU runs cannot be)")
    elif runs:
        compared.append(f"MNIST's losses and accuracy across devices (within rtol {CROSS_DEVICE_RTOL}, never bitwise)")
    here = (
        f"this machine has no {named} (the record's {record.get('device')}): rebuilding the environment "
        f"and running the record's checks on the CPU; compared: {'; '.join(compared)}; not comparable here: "
        "the GPU's devices, transfers, device-mismatch refusal, multi-GPU runs and timings"
    )
    return args, here, named


def _data_root() -> Path:
    from kitbench.suite import data

    return data.default_root()


LOCAL_BY_NAME = "--local-by-name"  # replay's option: a local file's unhashed package taken by name from an index


def plan(path: Path, machine: Probe, local_by_name: bool = False) -> Plan:
    """What to rebuild, from the record alone (and the target's manifest for a /1 record). ``local_by_name``:
    a package the record's machine installed from a local file, and that carries no hash, may be installed by
    name and version from the index (else it is refused: nothing else says it is the same package)."""
    record, sha256 = records.read_hashed(path)
    env = record["environment"]
    _check_fields(path, record)
    if not record["checks"].get("mnist", {}).get("runs") and not record["checks"].keys() & {
        "availability",
        "moves",
        "ddp",
    }:
        raise ReplayError(
            f"{path} holds neither MNIST runs nor the availability, moves or DDP checks: a replay "
            "compares those, and there is nothing to compare",
            hint="replay a record of `kitbench run` with those checks; nothing was built",
        )
    run_args, notes = _run_args(path, record["argv"])
    run_args, can_do, missing = _on_this_machine(record, machine, run_args)
    python = ".".join(env["python"].split(".")[:2])
    target_name = env.get("target")
    try:
        target = targets.get(target_name) if target_name else None
    except KitbenchError:
        target = None
    if env.get("image"):
        return _container_plan(path, sha256, record, target, machine, run_args, notes, can_do, missing)
    here, there = f"{machine.os}-{machine.arch}", f"{env['os']}-{env['arch']}"
    same_platform = here == there
    if not same_platform:
        if target is not None and not any(h.os == machine.os and machine.arch in h.arch for h in target.hosts):
            raise ReplayError(
                f"the record ran on {there} with target {target.name}, which does not run on {here}",
                hint=f"replay it on a {there} host",
            )
        notes.append(
            f"platforms differ: the record ran on {there}, this is {here}; the recorded versions of "
            "torch, torchvision and the suite's pins are rebuilt, their dependencies resolved for here"
        )
    index = target.index_for(machine.os) if target is not None else None
    packages = env.get("packages")
    if packages is not None and same_platform:
        pins = [p for p in packages if normalize(p["name"]) != "kitbench"]
        # Where a file came from is a hint, not its identity: the same name, version and hash from any
        # index is the same package (older records kept a local path of their machine here). Without a
        # hash, a name is all there is, and an index's package of that name may be anyone's.
        local = [p for p in pins if _LOCAL.match(str(p.get("source") or ""))]
        blind = [p for p in local if not p.get("hashes")]
        if blind and not local_by_name:
            named = ", ".join(f"{p['name']} {p['version']}" for p in blind[:3]) + (
                " and more" if len(blind) > 3 else ""
            )
            raise ReplayError(
                f"{path}: {named} came from a local file on the record's machine and carries no "
                "hash: installed by name from an index, it would be whatever package of that name "
                "the index serves",
                hint=f"pass {LOCAL_BY_NAME} to install it by name and version from the index anyway; nothing was built",
            )
        if local:
            names = [p["name"] for p in local]
            notes.append(
                f"{', '.join(names[:3])}{' and more' if len(names) > 3 else ''} came from a local file "
                "on the record's machine: installed by name and version (and hash, where recorded) "
                f"from the index{f' ({LOCAL_BY_NAME})' if blind else ''}"
            )
        requirements = [
            f"{p['name']}=={p['version']}" + "".join(f" --hash={h}" for h in p.get("hashes", [])) for p in pins
        ]
        unhashed = [p["name"] for p in pins if not p.get("hashes")]
        if unhashed:
            # pip checks hashes for every line of an install or for none (one --hash turns it on, and then it
            # refuses an unhashed line): the hashed lines are installed hash-checked, the others apart
            # (replay.build), so that one package without a hash never turns off the others'.
            notes.append(
                f"{len(pins) - len(unhashed)} of {len(pins)} packages hash-checked; {len(unhashed)} "
                f"({', '.join(unhashed[:3])}{' and more' if len(unhashed) > 3 else ''}) carry no hash "
                "(no lock, or not in the lock that built the environment): pinned by version only"
            )
        exact = True
    else:
        wanted = {"torch": env.get("torch"), "torchvision": env.get("torchvision")}
        if packages is not None:
            wanted.update({normalize(p["name"]): p["version"] for p in packages})
        # What the record does not name, the suite's pins give (said in the notes).
        pinned = dict(r.split("==", 1) for r in targets.suite_requirements(python))
        requirements = []
        for name in ["torch", "torchvision", *pinned]:
            version = str(wanted.get(normalize(name)) or pinned.get(name) or "")
            if not version or version.startswith("unusable"):
                continue
            if "+" in version:
                notes.append(
                    f"{name} {version}: the build tag comes from the index; pinned as {version.partition('+')[0]}"
                )
                version = version.partition("+")[0]
            requirements.append(f"{name}=={version}")
        if packages is None:
            notes.append(
                f"{record['schema']} records name only torch and torchvision: the suite's pins "
                "(envs/suite.yaml) and their resolved dependencies stand in for the rest"
            )
        exact = False
    if env.get("kitbench") or env.get("git_revision"):
        notes.append(
            f"kitbench: this one runs the checks (the record's: {env.get('kitbench')}, "
            f"git {str(env.get('git_revision') or 'unknown')[:12]})"
        )
    checks = {run_args[i + 1] for i, word in enumerate(run_args) if word == "--check"}
    trains = not checks or bool(checks & {"mnist", "ddp"})  # run's default checks include MNIST
    return Plan(
        path,
        sha256,
        record,
        python,
        requirements,
        exact,
        index,
        target_name,
        run_args,
        notes,
        here=can_do,
        missing=missing,
        data=_data_root() if trains else None,
    )


# What a record may name: it becomes a line of a requirements file, an argument or a message, where a
# newline or an option ("--index-url ...", "http://host/evil.tar.gz") would be obeyed, not installed.
# PEP 508 names; PEP 440 versions in their normal form, with a local label (the build tag, "+cu130").
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_N = r"[0-9]{1,12}"
_VERSION = re.compile(
    rf"({_N}!)?{_N}(\.{_N}){{0,7}}((a|b|rc){_N})?(\.post{_N})?(\.dev{_N})?"
    r"(\+[A-Za-z0-9]{1,32}(\.[A-Za-z0-9]{1,32}){0,7})?"
)
_HASH = re.compile(r"(sha256|sha384|sha512):[0-9a-f]{64,128}")
_PYTHON = re.compile(r"[0-9]{1,2}\.[0-9]{1,3}(\.[0-9A-Za-z+]{1,16})?")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a target, an OS, an architecture
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/-]{0,199}(:[A-Za-z0-9._-]{1,128})?")
_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
_LOCAL = re.compile(r"file:|/|[A-Za-z]:\\|[^:]*\.whl$")  # a path or a file name, not an index's URL


def _check_fields(path: Path, record: RunRecord) -> None:
    """Refuse a record any of whose fields that reach a command line, a file or a message is not a plain
    one: the one place a record's words are checked before a replay uses them."""
    env = record["environment"]
    bad = [f"python {env['python']!r}"] if not _PYTHON.fullmatch(env["python"]) else []
    for key in ("target", "os", "arch"):
        value = env.get(key)
        bad += [f"{key} {value!r}"] if value is not None and not _PLAIN.fullmatch(str(value)) else []
    for key in ("torch", "torchvision"):
        value = env.get(key)
        # A /1 record says "unusable: <why>" where torch would not import: no version, never installed.
        if isinstance(value, str) and not value.startswith("unusable") and not _VERSION.fullmatch(value):
            bad.append(f"{key} version {value!r}")
    for key, pattern in (("image", _IMAGE), ("image_id", _IMAGE_ID)):
        value = env.get(key)
        bad += [f"{key} {value!r}"] if value is not None and not pattern.fullmatch(str(value)) else []
    for package in env.get("packages") or []:
        bad += [f"package {package['name']!r}"] if not _NAME.fullmatch(package["name"]) else []
        bad += (
            [f"{package['name']!r} version {package['version']!r}"]
            if not _VERSION.fullmatch(package["version"])
            else []
        )
        bad += [f"{package['name']!r} hash {h!r}" for h in package.get("hashes", []) if not _HASH.fullmatch(h)]
    if bad:
        raise ReplayError(
            f"{path} names {bad[0][:120]}, which no index serves"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
            hint="it was not written by kitbench or was edited since; nothing was built",
        )


def _container_plan(
    path: Path,
    sha256: str,
    record: RunRecord,
    target: targets.Target | None,
    machine: Probe,
    run_args: list[str],
    notes: list[str],
    here: str | None,
    missing: str | None,
) -> Plan:
    env = record["environment"]
    image = str(env.get("image"))
    if target is None or target.kind != "docker":
        raise ReplayError(
            f"{path} ran in the image {image} of target {env.get('target')!r}, which is not a docker "
            "target of this kitbench",
            hint="replay it with the kitbench revision that wrote it (environment.git_revision)",
        )
    here, there = f"{machine.os}-{machine.arch}", f"{env['os']}-{env['arch']}"
    if here != there:
        raise ReplayError(
            f"the record ran in a {there} container, this is {here}", hint=f"replay it on a {there} host with Docker"
        )
    for name, pinned in (("torch", target.torch), ("torchvision", target.torchvision)):
        had = str(env.get(name) or "").partition("+")[0]
        if had != pinned.partition("+")[0]:
            raise ReplayError(
                f"target {target.name} pins {name} {pinned} now; the record's image had {had}: "
                "a rebuilt image would not be the record's",
                hint="replay it with the kitbench revision that wrote it (environment.git_revision), "
                "or on the machine that still has its image",
            )
    if env.get("manifest_sha256") not in (None, target.sha256):
        notes.append(
            f"target {target.name}'s manifest changed since the record (sha256 "
            f"{str(env.get('manifest_sha256'))[:12]} -> {target.sha256[:12]}): a rebuilt image follows "
            "today's, with the same torch and torchvision"
        )
    python = ".".join(env["python"].split(".")[:2])
    return Plan(
        path,
        sha256,
        record,
        python,
        [],
        True,
        target.index_for("linux"),
        target.name,
        run_args,
        notes,
        here,
        missing,
        image=image,
        image_id=env.get("image_id"),
    )
