"""The words of install-cmd's answer: its reason lines, notes and refusals, written from what was decided.

``selector`` decides (which release and build, which builds were passed over); what a user reads of
that, and why, is worded here, so the decision can change without rewording and the words without
deciding again. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from kitbench.advice import releases, vendors, wheels
from kitbench.advice.rejections import Note, Refused, Rejection, note
from kitbench.errors import SelectionError, UsageError
from kitbench.machine import builds, drivers
from kitbench.machine.builds import build
from kitbench.machine.probe import Probe, another_machine, no_driver_reason
from kitbench.machine.probe.amd import AmdGpu
from kitbench.machine.probe.intel import IntelGpu
from kitbench.machine.versions import arch_of_capability, parse_capability, serving_arch
from kitbench.records import manifest


def unavailable(
    rel: releases.Release,
    os: str,
    arch: str,
    package: str,
    compute: str,
    available: Sequence[str],
    conda: tuple[str, str | None],
    mac_x86_64: str,
    elsewhere: str | None,
) -> SelectionError:
    """The refusal of ``compute`` for ``rel`` here (``available``: the builds it has), from what the selector
    found: the last release with conda packages and the newest of them that installs here (``conda``), the
    last with macOS x86_64 wheels, and the newest other release with ``compute`` that installs here."""
    if package == "conda" and not rel.conda:
        return _refusal(
            f"torch {rel.version} has no conda packages: PyTorch published them up to {conda[0]}",
            note("conda_hint", newest=conda[1]),
        )
    if build(compute).kind == "xpu" and build(compute).known and package != "conda" and os != "macos":
        since = ", ".join(f"{o} from {v}" for o, v in vendors.load().xpu_since.items())
        return SelectionError(
            f"torch {rel.version} has no xpu build for {os} {arch}", hint=f"XPU wheels exist for x86_64 only: {since}"
        )
    if os == "macos" and build(compute).gpu:
        return SelectionError(
            f"there are no {compute} builds for macOS",
            hint="macOS gets cpu (Intel, up to 2.2.2) or mps (Apple Silicon)",
        )
    if os == "macos" and arch == "x86_64" and not available:
        return _refusal(
            f"torch {rel.version} has no macOS x86_64 wheels: the last is {mac_x86_64}",
            note("mac_x86_64_hint", last=mac_x86_64),
        )
    if os == "windows" and build(compute).kind == "rocm":
        return SelectionError("ROCm builds exist only for Linux", hint=f"Windows gets: {', '.join(available)}")
    if not build(compute).known:
        return SelectionError(
            f"unknown --compute {compute!r}",
            hint="auto, cpu, mps, xpu, cuXYZ (cu126) or rocmX.Y "
            f"(rocm6.4); torch {rel.version} has: {', '.join(available) or 'nothing'}",
        )
    return _refusal(
        f"torch {rel.version} has no {compute} build for {package} on {os} {arch}",
        note("builds_hint", available=available, compute=compute, elsewhere=elsewhere),
    )


def _refusal(message: str, fix: Note) -> Refused:
    """A refusal whose hint names a flag to give: the hint as values (``fix``), and install-cmd's words of it."""
    return Refused(message, words(fix), fix)


def _give(flag: str, value: str, member: str | None) -> str:
    """A flag a refusal's hint tells the asker to give, as install-cmd takes it on this host (``member`` None), else
    as a project takes it for its machine ``member``: the release is the project's own, the rest are the machine's."""
    if member is None:
        return f"{flag} {value}"
    if flag == "--release":
        return f"kitbench project --release {value}"
    # Only --python-arch reaches here; a machine given as a probe file has no flags to add to.
    return f"add {flag} {value} to --machine {member}='...' (or probe it again from an {value} Python)"


def conda_hint(newest: str | None, member: str | None = None) -> str:
    """Where a release has no conda packages: pip or uv, or the newest release with them that installs here."""
    return "use --package pip or uv" + (f" (or {_give('--release', newest, member)})" if newest else "")


def mac_x86_64_hint(last: str, member: str | None = None) -> str:
    """Where a release has no macOS x86_64 wheels: an arm64 Python, or the ``last`` release that has them."""
    return "use an arm64 Python on Apple Silicon, or " + _give("--release", last, member)


def builds_hint(available: Sequence[str], compute: str, elsewhere: str | None, member: str | None = None) -> str:
    """Where a release has no ``compute`` build here: those it has, and the newest other release with
    ``compute`` that installs here (``elsewhere``)."""
    return f"it has: {', '.join(available) or 'nothing'}" + (
        f"; torch {elsewhere} has {compute}: {_give('--release', elsewhere, member)}" if elsewhere else ""
    )


def xpu_note(rel: releases.Release, os: str) -> str:
    """Why an xpu command is unverified: the builds a release manifest records (and its unverified
    note speaks of) are pytorch.org's, which has no XPU command; the XPU build comes from envs/vendors.yaml."""
    who, matrix = (
        ("nightly's", "the nightly build matrix has")
        if rel.nightly
        else (f"torch {rel.version}'s", "PyTorch's build matrix has")
    )
    since = "" if rel.nightly else f" from {vendors.load().xpu_since[os]}"
    evidence = rel.provenance("xpu", f"{os}-x86_64")
    inferred = "" if rel.nightly else f"; that torch {rel.version} has them: {evidence.kind} ({evidence.source})"
    return (
        f"xpu command unverified: it is none of the builds {who} commands are recorded for "
        f"({', '.join(rel.wheels)}): it is the XPU index form, for the XPU wheels {matrix} for {os}{since} "
        f"(envs/vendors.yaml){inferred}"
    )


def unknown_macos(checked: str, arch: str, need: tuple[int, ...], older: tuple[int, ...], fits: str) -> str:
    """Which macOS the answer needs where the question left the Mac's version unknown: torch ``checked``'s wheels
    need ``need``; on ``older`` the newest release that installs is ``fits``."""
    shown = str(older[0]) if older[0] > 10 else ".".join(map(str, older))
    return (
        f"the macOS version was not given: torch {checked}'s macOS {arch} wheels need macOS "
        f"{'.'.join(map(str, need))} or newer; on macOS {shown} the newest release that installs is {fits}: "
        f"--os-version {shown}"
    )


def assumed_tags(rel: releases.Release, compute: str) -> str:
    """The line on an answer that rests on a build of PyTorch's index carrying its PyPI wheels' tags."""
    return (
        f"torch {rel.version}+{compute}'s Linux wheels are not on PyPI and no listing of them from PyTorch's "
        f"index is recorded (envs/index_tags.yaml): they are taken to carry torch {rel.version}'s PyPI tags, and "
        "that decided this answer; if pip finds no matching distribution, this build's own tags differ"
    )


def branch_floor(driver: str, cuda: int, floor: str) -> str:
    """Where a driver given as a bare branch misses a floor inside that branch: what the full version changes."""
    return (
        f"driver {driver} is read as {driver}.0.0, below CUDA {cuda}'s floor {floor}, so "
        f"the CUDA {cuda} builds were passed over; a released {driver} driver is {floor} or newer: "
        "give its full version (nvidia-smi's driver_version)"
    )


def cuda_reason(rel: releases.Release, machine: Probe, compute: str) -> str:
    cuda = build(compute).cuda
    assert cuda is not None and machine.driver is not None
    need = drivers.load().requirement(f"{cuda[0]}.{cuda[1]}", machine.os)
    text = f"{compute}: the newest CUDA build of {rel.version} that driver {machine.driver} runs (floor {need.floor})"
    if need.below_toolkit(machine.driver):
        text += (
            f"; note: below CUDA {need.cuda}'s own driver {need.toolkit}, so it runs by minor-version "
            "compatibility (no JIT of newer PTX)"
        )
    carried = releases.kernels(rel, machine, compute)
    if carried is None:
        bounds = drivers.load().arch_range(f"{cuda[0]}.{cuda[1]}")
        text += (
            "; kernel lists are recorded for x86_64 wheels only"
            if machine.arch != "x86_64"
            else "; this build's kernel list is not recorded"
        )
        text += (
            f", so GPU architectures were checked only against CUDA {cuda[0]}.{cuda[1]}'s "
            f"({arch_of_capability(bounds[0])} to {arch_of_capability(bounds[1])})"
            if bounds is not None and machine.capabilities
            else ", so GPU architectures were not checked"
        )
        earlier = (
            releases.earlier_kernels(rel.version, compute)
            if machine.arch == "x86_64"
            and any(parse_capability(c) < max(drivers.load().arches)[2] for c in machine.capabilities)
            else None
        )
        if earlier is not None:
            text += f" and against torch {earlier[0]}'s {compute} list (recorded), which had not dropped them"
    elif machine.capabilities:
        text += "; kernels for " + ", ".join(_served(parse_capability(c), carried) for c in machine.capabilities)
    return text


def _served(cc: tuple[int, int], kernels: tuple[str, ...]) -> str:
    """``sm_90``, or ``sm_121 (sm_120's, which run on it)`` where a build carries no kernels of the GPU's own."""
    own, serving = arch_of_capability(cc), serving_arch(cc, kernels)
    return own if serving in (own, None) else f"{own} ({serving}'s, which run on it)"


INTEL_SUPPORTED = "Arc A and B series, Data Center GPU Max and Flex, Core Ultra's Arc graphics"


def intel_label(gpu: IntelGpu) -> str:
    family = vendors.intel_gpus().family(gpu.device_id) if gpu.device_id else None
    return f"{gpu.label} ({family.name})" if family else gpu.label


def intel_source() -> str:
    facts = vendors.intel_gpus()
    return f"envs/intel_gpus.yaml, {facts.source}, read {facts.read}"


def because(why: Rejection) -> str:
    """Why a build was passed over, in the words the answer's ``rejected`` lines and warnings use."""
    arches = ", ".join(why.arches)
    if why.cause == "no driver":
        return "no NVIDIA driver"
    if why.cause == "driver floor":
        return f"driver {why.driver} < {why.floor} (CUDA {why.cuda[0]} family floor)"
    if why.cause == "gpu floor":
        return f"driver {why.driver} cannot drive {arches} ({why.detail}): update the driver to at least {why.floor}"
    if why.cause == "toolkit range":
        return (
            f"no kernels for {arches}: CUDA {why.cuda[0]}.{why.cuda[1]} compiles for {why.span[0]} to "
            f"{why.span[1]} only"
        )
    if why.cause == "dropped before":
        return (
            f"no kernels for {arches} in torch {why.earlier}'s {why.build} already (its list, recorded; "
            f"torch {why.release}'s is not)"
        )
    if why.cause == "install":
        return why.detail + (f" (as recorded: {why.listing})" if why.listing else "")
    if why.cause == "unrecorded":
        return (
            f"listed ({why.detail}) but not in envs/releases/; its kernel list is not on record, so it is "
            f"answered only when asked for (--release {why.release} --compute {why.build})"
        )
    return f"no kernels for {arches}" + (f" ({why.detail})" if why.detail else "")


_SHORT = 110  # characters: a line a terminal shows whole
# The notes that change what the user should run: first in the short answer.
_URGENT = (
    "cache_warning",
    "will_not_run",
    "will_not_install",
    "xpu_will_not_run",
    "inferred_build",
    "inferred_wheels",
    "unrecorded_kernels",
    "rosetta_line",
)


def _clause(text: str) -> str:
    """A line's first clause, short enough to read at a glance; the whole line is --explain's."""
    first = text.split("; ")[0]
    if len(first) <= _SHORT:
        return first
    cut = first.rfind(" (", 0, _SHORT)  # before a parenthesis of details, where there is one
    return first[:cut] if cut > _SHORT // 3 else first[: _SHORT - 3].rstrip(" ,(:") + "..."


def summary(reasons: Sequence[Note], notes: Sequence[Note]) -> list[str]:
    """At most two short lines of why, for the default answer: the build's reason, then the note that matters
    most, where a driver update is the remedy that remedy. A warning, an unconfirmed build and the arm64
    command of a Mac running an x86_64 Python come first: each changes what the user should run; all but an
    unconfirmed build's whole (its source and what would confirm it are --explain's). Last, what the answer
    took from this host for another machine: it changes what the answer means."""
    lines = [_clause(words(reasons[-1]))] if reasons else []
    urgent = [n for n in notes if n.kind in _URGENT]
    if urgent:
        lines.append(_short(urgent[0]))
    elif notes:
        lines.append(_update(notes[0]) or _clause(words(notes[0])))
    return lines + [words(n) for n in notes if n.kind == "assumed_host"]


def _short(urgent: Note) -> str:
    """An urgent note as the short answer says it: its sources (a listing's file names and digests, the page a
    build rests on) are --explain's."""
    if urgent.kind == "inferred_build":
        return _inferred_build_head(**urgent.figures) + " alone, not seen in an artifact (--explain: from what)"
    if urgent.kind == "inferred_wheels":
        return _inferred_wheels_head(**urgent.figures) + " alone, not seen in an artifact (--explain: from what)"
    if urgent.kind == "will_not_install" and urgent.figures["listing"]:
        return will_not_install(urgent.figures["compute"], urgent.figures["why"], "") + " (--explain: the listing)"
    return words(urgent)


def _update(held: Note) -> str | None:
    """Where the answer is held back from the newest release for want of a newer driver: that remedy, after
    what it holds back (``torch 2.9.1, not the newest release (2.14.1): update the driver to at least 580 ...``)."""
    if held.kind not in ("older_release", "cpu_fallback"):
        return None
    head = "the CPU build" if held.kind == "cpu_fallback" else _held_back(held.figures["rel"], held.figures["newest"])
    if held.figures["floor"]:
        return f"{head}: {_remedy(held.figures['newest'], held.figures['floor'])}"
    floors = [r.floor for r in held.figures["passed"] if r.cause == "gpu floor"]
    return f"{head}: update the driver to at least {floors[-1]}" if floors else None


def grouped(lines: list[str]) -> list[str]:
    """The answer's ``rejected`` lines with one reason given once: "cu132, cu130: no NVIDIA driver"."""
    builds: dict[str, list[str]] = {}
    for line in lines:
        build, _, why = line.partition(": ")
        builds.setdefault(why, []).append(build)
    return [f"{', '.join(names)}: {why}" for why, names in builds.items()]


def rejected(why: Rejection) -> str:
    """One line of the answer's ``rejected``: the build, then why."""
    return f"{why.build}: {because(why)}"


def wheel_facts(rel: releases.Release, text: str, host: wheels.Host, compute: str) -> dict[str, Any]:
    """What the answer says of the wheel facts it rests on: where read, when, and for which host."""
    facts = wheels.load()
    # Wheels from download.pytorch.org (and conda packages) cannot be read from here: PyPI's stand in,
    # unless the build's tags on PyTorch's index were recorded (envs/index_tags.yaml).
    recorded = "--index-url" in text and not rel.nightly and wheels.recorded(rel.version, compute)
    assumed = rel.nightly or "--index-url" in text or text.startswith("conda")
    found = {
        "source": facts.source,
        "read": facts.read,
        "assumed_from": "recorded index listing" if recorded else "pypi" if assumed else None,
        "python": ".".join(map(str, host.python)) if host.python else None,
        "libc": host.libc,
        "libc_version": ".".join(map(str, host.libc_version)) if host.libc_version else None,
        "macos": ".".join(map(str, host.macos)) if host.macos else None,
    }
    row = (
        wheels.source_of(rel.version, host, "torch", inferred=True)
        if not rel.nightly and wheels.index_only(rel.version, host)
        else None
    )
    if row is not None:
        # A platform only PyTorch's index serves: the answer rests on what it is recorded serving, not on PyPI.
        found.update(
            source=f"{row.source} (envs/index_tags.yaml)",
            read=row.read,
            assumed_from=None,
            kind="published" if row.published else "inferred",
        )
    return found


def machine_facts(machine: Probe) -> dict[str, Any]:
    """What the answer says of the machine it is for (its ``facts``), each where it was read. For another machine
    none of this host's own (its kernel, WSL, a container) is said of it: those are None unless given."""
    own = not another_machine(machine)

    def here(key: str, value: Any) -> Any:
        given = machine.sources.get(key, "")
        return value if own or given.startswith("--") or "not this host" in given else None

    return {
        "os": machine.os,
        "os_version": here("os_version", machine.os_version),
        "arch": machine.arch,
        "python_arch": machine.python_arch,
        "rosetta": machine.rosetta,
        "wsl": here("wsl", machine.wsl),
        "container": here("container", machine.container),
        "driver": machine.driver,
        "gpu_capabilities": [g.capability for g in machine.gpus if g.capability],  # one per GPU
        "rocm": machine.rocm,
        "amd_gpus": [g.gfx or f"AMD {g.device_id or 'GPU'} (gfx unknown)" for g in machine.amd_gpus],
        "intel_gpus": [g.label for g in machine.intel_gpus],
        "sources": machine.sources,
        "python_version": machine.python_version,
        "libc": machine.libc,
        "libc_version": machine.libc_version,
    }


def assumed_host(found: dict[str, str], os: str) -> str:
    """The line on another machine's answer that rests on this host's Python (and C library) because they were
    not given."""
    given = "--python-version and --glibc give their own" if os == "linux" else "--python-version gives its own"
    said = " and ".join(f"{name} {version}" for name, version in found.items())
    return f"assumed: {said}, this host's, as none was given for that machine ({given})"


_ROSETTA = "this is an Apple Silicon Mac running an x86_64 Python (Rosetta 2), which gets no MPS"


def rosetta_hint(native: str | None, command: str, member: str | None = None) -> str:
    """What an arm64 Python gets on the Mac: torch ``native`` (None: no release installs) and its ``command``; for
    a project's machine ``member``, the flag that describes its arm64 Python."""
    if member is not None:  # the project's release is its own, not the newest that ``native`` names
        return f"an arm64 Python gets MPS: {_give('--python-arch', 'arm64', member)}"
    gets = "the current release" if native is None else f"torch {native}"
    return f"an arm64 Python gets {gets} with MPS: {command or 'kitbench install-cmd --python-arch arm64'}"


def rosetta_line(native: str | None, command: str) -> str:
    """The note an x86_64 Python on Apple Silicon gets: what it is, then the arm64 Python's command."""
    return f"{_ROSETTA}; {rosetta_hint(native, command)}"


def rosetta_refusal(error: SelectionError, native: str | None, command: str) -> Refused:
    """A refusal for an x86_64 Python on Apple Silicon: why, what it is, and the arm64 Python's command."""
    return _refusal(f"{error.message}; {_ROSETTA}", note("rosetta_hint", native=native, command=command))


def nightly_unpinned() -> str:
    return "nightly has no pinned command; this is the Start Locally form"


def unpinned_release(rel: releases.Release) -> str:
    """Start Locally's command names no version: run today it installs today's release, not ``rel``."""
    return (
        f"the Start Locally form names no version: it is the command pytorch.org showed for torch "
        f"{rel.version}, and run today pip takes the newest torch it finds that installs here, "
        f"which may be newer; --format pinned installs {rel.version} itself"
    )


def unverified(rel: releases.Release, fmt: str, why: str) -> str:
    """Why ``rel``'s command in ``fmt`` is unverified (``why``: its manifest's note)."""
    return f"torch {rel.version}, {fmt} form unverified: {why}"


_KIND_WORDS = {"docs": "a page describing it", "inferred": "an inference"}


def inferred_build(rel: releases.Release, evidence: releases.Evidence) -> str:
    """The one line on a build asked for that rests on docs or an inference alone (never a default answer's)."""
    return f"{_inferred_build_head(rel, evidence)} alone ({evidence.source}); confirmed by {evidence.confirm}"


def _inferred_build_head(rel: releases.Release, evidence: releases.Evidence) -> str:
    return f"unconfirmed: torch {rel.version} {evidence.build} rests on {_KIND_WORDS[evidence.kind]}"


def unrecorded_kernels(compute: str, capabilities: Sequence[str]) -> str:
    """The line on a CUDA answer whose build's kernel list is not recorded: the GPU was checked against the
    toolkit's range only, an inference, so the user is told how to confirm it before relying on it."""
    sms = ", ".join(arch_of_capability(parse_capability(c)) for c in capabilities)
    cuda = build(compute).cuda
    toolkit = f"CUDA {cuda[0]}.{cuda[1]}'s" if cuda else "its CUDA's"
    return (
        f"unconfirmed: {compute}'s kernel list is not on record: {sms} was checked against {toolkit} range "
        "only; torch.cuda.get_arch_list() after installing confirms it"
    )


def inferred_gpu_floor(generation: drivers.Generation, capability: str, driver: str, os: str) -> str:
    """The note on a GPU whose generation's driver floor is only inferred, where the driver is below it."""
    return (
        f"{generation.name} GPUs (compute capability {capability}) may need driver >= {generation.floor(os)}, "
        f"not {driver} (inferred, from {generation.source}; confirmed by {generation.confirm})"
    )


def asked_reason(compute: str) -> str:
    return f"{compute}: asked for with --compute"


def will_not_run(compute: str, why: Rejection) -> str:
    """The warning for a build asked for with --compute that does not run here."""
    return f"warning: {compute} will not run on this machine: {because(why)}"


def will_not_install(compute: str, why: str, listing: str) -> str:
    """The warning for a build asked for with --compute whose wheels do not install here (``why``: wheels' words),
    and the recorded ``listing`` that says so, where one does."""
    return f"warning: {compute} will not install on this machine: {why}" + (
        f" (as recorded: {listing})" if listing else ""
    )


def xpu_will_not_run(gpus: Sequence[IntelGpu]) -> str:
    """The warning for xpu asked for on a machine whose Intel GPUs the XPU builds do not support."""
    return (
        f"warning: xpu will not run on this machine: {', '.join(g.label for g in gpus)} is none of the GPUs it supports"
    )


def mps_default() -> str:
    return "pytorch.org's Default (CPU) command: on Apple Silicon the same wheel also carries MPS"


def newer_gpu_release(rel: releases.Release, newest: releases.Release, compute: str) -> str:
    """Where ``rel`` runs only on the CPU here: the newest release with a build (``compute``) that runs on the GPU."""
    return (
        f"no build of torch {rel.version} runs on this GPU; the newest that does is "
        f"torch {newest.version} with {compute} (--release {newest.version})"
    )


def first_gpu_release(rel: releases.Release, first: releases.Release, compute: str) -> str:
    """Where every release that runs on the GPU is newer than ``rel``: the oldest of them, ``first``."""
    return (
        f"this GPU is newer than every build of torch {rel.version}: torch "
        f"{first.version} ({compute}) is the first release with its kernels"
    )


def unconfirmed_gpus(unsure: str) -> str:
    """Where the probe could not confirm the GPU list (``unsure``: why, in the probe's words)."""
    return (
        f"the GPU list is unconfirmed ({unsure}): this answer is for the GPUs listed; "
        "--driver and --gpu-cc (once per GPU) answer for the machine as you know it"
    )


def nightly_refusal(checked: str, why: str) -> str:
    """Why nightly's wheels do not install here: those of ``checked``, the newest PyPI release, stand in for them."""
    return f"nightly's wheels are taken to carry the tags of torch {checked}'s: {why}"


def stable_moved(why: str, newest: str) -> str:
    """Where the newest release does not install here (``why``: the wheels' words): ``newest`` does."""
    return f"{why}; {newest} is the newest release that installs here"


def not_installable(
    why: str, newest: str | None, oldest: str, latest: str, foreign: str | None, pythons: Sequence[wheels.Version] = ()
) -> SelectionError:
    """The refusal of a release that does not install here: the newest that does (``newest``), else the span of
    releases covered (``oldest`` to ``latest``), the Pythons some release installs on here (``pythons``) and the
    Python (``foreign`` arch) that runs here under emulation."""
    return _refusal(
        why, note("installs_hint", newest=newest, oldest=oldest, latest=latest, foreign=foreign, pythons=pythons)
    )


def installs_hint(
    newest: str | None,
    oldest: str,
    latest: str,
    foreign: str | None,
    pythons: Sequence[wheels.Version],
    member: str | None = None,
) -> str:
    """``not_installable``'s hint: the release that installs, else what might."""
    hint = (
        f"the newest release that installs here is {newest}: {_give('--release', newest, member)}"
        if newest
        else f"no release from {oldest} to {latest} installs here"
    )
    if newest is None and pythons:
        hint += f"; one does on Python {_span(pythons)}"
    if newest is None and foreign is not None:
        hint += f"; an {foreign} Python runs on {member or 'this machine'} under emulation: " + _give(
            "--python-arch", foreign, member
        )
    return hint


def _span(versions: Sequence[wheels.Version]) -> str:
    first, last = wheels.show(versions[0]), wheels.show(versions[-1])
    return first if first == last else f"{first} to {last}"


def index_command(host: wheels.Host) -> str:
    """Why the command for a platform only PyTorch's index serves is kitbench's own: pytorch.org has none."""
    return (
        f"pytorch.org has no {wheels.place(host)} command: this pinned one names the wheels PyTorch's index "
        "is recorded serving there (envs/index_tags.yaml)"
    )


def inferred_wheels(rel: releases.Release, host: wheels.Host, row: wheels.IndexWheels) -> str:
    """The one line on a release asked for whose wheels here are known only by inference."""
    return f"{_inferred_wheels_head(rel, host, row)} alone ({row.source}); confirmed by {row.confirm}"


def _inferred_wheels_head(rel: releases.Release, host: wheels.Host, row: wheels.IndexWheels) -> str:
    return (
        f"unconfirmed: torch {rel.version}'s {wheels.place(host)} wheels for Python "
        f"{wheels.show(host.python or ())} rest on an inference"
    )


def left_out(
    rel: releases.Release,
    host: wheels.Host,
    named: Sequence[str],
    missing: Sequence[str],
    inferred: Sequence[wheels.IndexWheels],
    having: str | None,
    foreign: str | None,
) -> str:
    """Why a command names only some of a release's packages (``named``, not ``missing``): no wheel of the others for
    this platform is on record, though one may be (``inferred``); the newest release that has them here
    (``having``), and the Python (``foreign`` arch) that gets them under emulation."""
    versions = {"torchvision": rel.torchvision, "torchaudio": rel.torchaudio}
    python = f" for Python {wheels.show(host.python)}" if host.python else ""
    text = (
        f"{' and '.join(named)} only: no {wheels.place(host)} wheel of "
        f"{' or '.join(f'{p} {versions[p]}' for p in missing)}{python} is on record (envs/index_tags.yaml)"
    )
    text += "".join(f"; one may be unrecorded, inferred from {row.source}" for row in inferred)
    others = " and ".join(missing)
    if having is not None:
        text += f"; torch {having} comes with {others} here: --release {having}"
    if foreign is not None:
        text += f"; an {foreign} Python under emulation gets {others} too: --python-arch {foreign}"
    return text


def no_gpu_build(passed: Sequence[Rejection], reason: Note) -> str:
    """Why a release runs only on the CPU here: the builds passed over, else its CPU reason line (``reason``).
    A machine without an NVIDIA driver is not told that its CUDA builds need one."""
    return "; ".join(rejected(r) for r in passed if r.cause != "no driver") or words(reason).removeprefix("cpu: ")


def _remedy(newest: releases.Release, floor: str) -> str:
    return f"update the driver to at least {floor} for torch {newest.version}'s CUDA builds"


def _driver_floor(newest: releases.Release, floor: str | None) -> str:
    return f"; {_remedy(newest, floor)}" if floor else ""


def _held_back(rel: releases.Release, newest: releases.Release) -> str:
    return f"torch {rel.version}, not the newest release ({newest.version})"


def older_release(
    rel: releases.Release, newest: releases.Release, passed: Sequence[Rejection], reason: Note, floor: str | None
) -> str:
    """Why the answer is ``rel``, not ``newest``: no build of ``newest`` runs on the GPU (the builds ``passed``
    over, else its cpu ``reason``), and the driver its CUDA builds need where that is all that keeps them off
    (``floor``)."""
    return (
        f"{_held_back(rel, newest)}: no build of {newest.version} runs on this GPU "
        f"({no_gpu_build(passed, reason)})" + _driver_floor(newest, floor)
    )


def no_build_here(
    newest: releases.Release, rel: releases.Release, package: str, host: wheels.Host, listing: str
) -> str:
    """Why the answer is ``rel``, not ``newest``: PyTorch's index (``listing``: where and when it was read) lists
    no build of ``newest`` that auto mode could name for this machine."""
    return (
        f"{_held_back(rel, newest)}: PyTorch's index lists no {newest.version} build for {package} on "
        f"{wheels.place(host)} ({listing})"
    )


def unnamed_build(rel: releases.Release, compute: str, source: str, recorded: bool) -> str:
    """The line on a build asked for that PyTorch's index lists and envs/releases/ does not name."""
    kernels = (
        "its kernel list is on record"
        if recorded
        else "its kernel list is not on record, so no default answer names it until it is"
    )
    return f"torch {rel.version} {compute} is not in envs/releases/: {source} lists it; {kernels}"


def skipped_unrecorded(rel: releases.Release, compute: str, source: str) -> str:
    """The line on an older release's build, skipped on the way back, that would have been tried had its kernel
    list been on record."""
    return (
        f"torch {rel.version} {compute} ({source} lists it; not in envs/releases/) was not tried: its kernel "
        f"list is not on record (--release {rel.version} --compute {compute} answers it)"
    )


def older_mac_release(
    rel: releases.Release, newest: releases.Release, passed: Sequence[Rejection], reason: Note
) -> str:
    """Why a Mac's answer is ``rel``, not ``newest``: ``newest``'s MPS needs a newer macOS (its ``reason``), said
    first so that the short answer keeps it."""
    return f"{_held_back(rel, newest)}: {no_gpu_build(passed, reason)}"


def cpu_fallback(
    newest: releases.Release,
    passed: Sequence[Rejection],
    reason: Note,
    floor: str | None,
    kernel_less: list[str],
    unserved: list[str],
) -> str:
    """Why the answer is ``newest``'s CPU build: as ``older_release``, and the NVIDIA architectures
    (``kernel_less``) and AMD gfx (``unserved``) that no release that installs here has kernels for."""
    return (
        "the CPU build: no release that installs here runs on this GPU "
        f"(torch {newest.version}: {no_gpu_build(passed, reason)})"
        + _driver_floor(newest, floor)
        + (f"; no release that installs here has kernels for {', '.join(kernel_less)}" if kernel_less else "")
        + (
            f"; no covered release has {', '.join(unserved)} kernels (ROCm builds before 6.0 have no recorded gfx list)"
            if unserved
            else ""
        )
    )


def rosetta_reason() -> str:
    return (
        "x86_64 Python under Rosetta on Apple Silicon: no MPS, and macOS x86_64 wheels "
        "stopped at 2.2.2; install an arm64 Python"
    )


def mac_reason(compute: str) -> str:
    """Why a Mac gets ``compute``: mps with an arm64 Python, else cpu."""
    return (
        "mps: Apple Silicon with an arm64 Python; the macOS wheels carry MPS"
        if compute == "mps"
        else "cpu: macOS on x86_64 has no GPU backend"
    )


def mps_too_old(rel: releases.Release, need: releases.MpsFloor, has: str) -> str:
    """Why an Apple Silicon Mac gets cpu: its macOS is older than the one MPS needs in ``rel``; where only docs
    say so, that the sources disagree."""
    if need.kind in manifest.ANSWERABLE:
        return f"cpu: MPS in torch {rel.version} needs macOS {need.macos} or newer; this Mac has macOS {has}"
    return (
        f"cpu: MPS in torch {rel.version} needs macOS {need.macos} or newer by {_KIND_WORDS[need.kind]} "
        f"({need.source}), and this Mac has macOS {has}; the sources disagree: {need.conflicts}"
    )


def cpu_reason(why: Literal["no cuda fits", "no gpu", "not given", "no driver"], machine: Probe) -> str:
    """Why auto mode picked cpu on a machine without an AMD or Intel GPU: none of the CUDA builds fits, --no-gpu
    said so, the question is of another machine and gave no GPU, or this one has no NVIDIA driver."""
    if why == "no cuda fits":
        return "cpu: no CUDA build of this release fits this machine"
    if why == "no gpu":
        return "cpu: no GPU, as --no-gpu says"
    if why == "not given":
        return "cpu: no GPU was given (--driver and --gpu-cc, --gpu-gfx or --intel-gpu describe one)"
    return "cpu: " + no_driver_reason(container=machine.container, wsl=machine.wsl)


def no_cuda_build(rel: releases.Release, where: str, gpu: bool) -> str:
    """Why auto mode picked cpu where the release has no CUDA build for the platform: with an NVIDIA GPU (``gpu``),
    that it goes unused; without, that cpu is the only build (not that no GPU was given: none would change it)."""
    if gpu:
        return f"cpu: torch {rel.version} has no CUDA build for {where}, so the NVIDIA GPU goes unused"
    return f"cpu: the only build torch {rel.version} has for {where}"


def amd_seen(machine: Probe) -> str:
    """The AMD GPUs found, as the ROCm lines name them: their gfx, else what little is known."""
    return ", ".join(machine.gfx) or ("an AMD GPU (gfx unknown)" if machine.amd_gpus else "no AMD GPU")


def no_rocm_build(rel: releases.Release, machine: Probe, arch: str, package: str, where: str) -> str:
    """Why an AMD GPU (found at ``where``) gets cpu where ``rel`` has no ROCm build for this OS or package."""
    inferred = [
        c
        for c in builds.newest_first(releases.computes(rel, machine.os, arch, package), "rocm")
        if not rel.answerable(c, f"{machine.os}-{arch}")
    ]
    why = (
        "ROCm builds exist only for Linux"
        if machine.os != "linux"
        else (
            "PyTorch's conda packages have no ROCm build"
            if package == "conda"
            else f"torch {rel.version}'s ROCm builds rest on no artifact or code ({', '.join(inferred)}: --compute "
            f"{inferred[0]} names one)"
            if inferred
            else f"torch {rel.version} has no ROCm build for {machine.os} {arch}"
        )
    )
    return f"cpu: {amd_seen(machine)} [{where}], but {why}"


def rocm_reason(rel: releases.Release, machine: Probe, compute: str, where: str, left: Sequence[AmdGpu]) -> str:
    """Why auto mode picked ``compute``, a ROCm build, for the AMD GPUs found at ``where`` (less those it
    leaves out, ``left``): what its gfx list was checked against, or why it was not."""
    facts = vendors.load()
    text = f"{compute}: the newest ROCm build of {rel.version} "
    if not machine.gfx:
        text += f"(ROCm {machine.rocm} found at /opt/rocm" if machine.rocm else f"({amd_seen(machine)} [{where}]"
        return text + "; GPU architectures were not checked: the kernel did not name them)"
    if facts.rocm_arches(compute) is None:
        return text + (
            f"(for {amd_seen(machine)} [{where}]; this build's gfx list is not recorded, so it was not checked)"
        )
    deciding = ", ".join(dict.fromkeys(g.gfx for g in machine.amd_gpus if g.gfx and g not in left))
    return text + f"with kernels for {deciding} [{where}] ({facts.rocm_sources[compute]})"


def no_rocm_kernels(rel: releases.Release, machine: Probe, where: str) -> str:
    return f"cpu: no ROCm build of torch {rel.version} carries kernels for {amd_seen(machine)} [{where}]"


def rocm_hint(hint: str) -> str:
    """The override an AMD GPU without kernels in a build may run it with (``vendors``' words)."""
    return f"hint: {hint}"


def hidden_gpus(gpus: Sequence[AmdGpu], left: Sequence[AmdGpu], compute: str) -> str:
    """The integrated GPUs ``left`` out of choosing ``compute``, and how to hide them (``vendors``' words)."""
    return vendors.load().hidden_note(gpus, left, compute)


def cache_warning(text: str) -> str:
    """A fact cache partly unreadable (``facts``' words): which facts answered changes."""
    return f"warning: {text}"


def stale(text: str) -> str:
    """The wheel facts are old (``facts``' words)."""
    return text


def other_rocm_release(version: str, compute: str, machine: Probe) -> str:
    """Where ``compute`` of another release, ``version``, has kernels for every AMD GPU found."""
    return f"torch {version} has {compute} with kernels for {amd_seen(machine)}: --release {version}"


def intel_unsupported(unserved: Sequence[IntelGpu], where: str) -> str:
    """Why Intel GPUs (found at ``where``) that the XPU builds do not support get cpu."""
    return (
        f"cpu: {', '.join(g.label for g in unserved)} [{where}] is none of the GPUs PyTorch's XPU "
        f"builds support ({INTEL_SUPPORTED}; {intel_source()}): UHD, Iris Xe and older Intel graphics "
        "run the CPU build"
    )


def intel_left_out(unserved: Sequence[IntelGpu], served: Sequence[IntelGpu]) -> str:
    """The Intel GPUs the XPU builds do not support, beside ``served`` ones that they do."""
    return (
        f"{', '.join(g.label for g in unserved)}: none of the GPUs the XPU builds support, left "
        f"out ({intel_source()}); the xpu build is for {', '.join(intel_label(g) for g in served)}"
    )


def xpu_reason(rel: releases.Release, machine: Probe, arch: str, served: Sequence[IntelGpu], where: str) -> str:
    """Why auto mode picked xpu for the Intel GPUs (``served``, found at ``where``)."""
    unchecked = (
        (
            "; its device id is not known, so it was not checked against the GPUs the XPU builds "
            "support (--intel-gpu DEVICE_ID checks it)"
        )
        if any(g.device_id is None for g in served)
        else ""
    )
    return (
        f"xpu: {', '.join(intel_label(g) for g in served)} [{where}]; torch {rel.version} has an XPU build for "
        f"{machine.os} {arch} ({vendors.load().xpu_source}){unchecked}"
    )


def no_xpu_build(
    rel: releases.Release, machine: Probe, arch: str, package: str, served: Sequence[IntelGpu], where: str
) -> str:
    """Why supported Intel GPUs (``served``, found at ``where``) get cpu: ``rel`` has no XPU build here."""
    since = ", ".join(f"{o} from {v}" for o, v in vendors.load().xpu_since.items())
    return (
        f"cpu: {', '.join(intel_label(g) for g in served)} [{where}], but torch {rel.version} has no XPU build "
        f"for {machine.os} {arch}" + (" with conda" if package == "conda" else "") + f" (XPU wheels: x86_64, {since})"
    )


def xpu_unconfirmed(rel: releases.Release, served: Sequence[IntelGpu], where: str) -> str:
    """Why supported Intel GPUs get cpu: ``rel``'s XPU build rests on docs or an inference alone."""
    return (
        f"cpu: {', '.join(intel_label(g) for g in served)} [{where}], but torch {rel.version}'s XPU build rests on "
        "no artifact or code (--compute xpu names it)"
    )


def unknown_choice(name: str, value: str, choices: tuple[str, ...]) -> UsageError:
    return UsageError(f"unknown {name} {value!r}", hint=f"choose one of: {', '.join(choices)}")


def no_uv_selector() -> UsageError:
    return UsageError(
        "--format selector reproduces pytorch.org, which has no uv command",
        hint="use --format pinned with --package uv",
    )


_WORDS: dict[str, Callable[..., str]] = {
    f.__name__: f
    for f in (
        # reasons: why the build
        asked_reason,
        cpu_reason,
        cuda_reason,
        intel_unsupported,
        mac_reason,
        mps_too_old,
        no_cuda_build,
        no_rocm_build,
        no_rocm_kernels,
        no_xpu_build,
        rocm_reason,
        rosetta_reason,
        xpu_reason,
        xpu_unconfirmed,
        # notes
        assumed_host,
        assumed_tags,
        branch_floor,
        cache_warning,
        cpu_fallback,
        first_gpu_release,
        hidden_gpus,
        index_command,
        inferred_build,
        inferred_gpu_floor,
        inferred_wheels,
        intel_left_out,
        left_out,
        mps_default,
        newer_gpu_release,
        nightly_unpinned,
        no_build_here,
        older_mac_release,
        older_release,
        other_rocm_release,
        rocm_hint,
        rosetta_line,
        skipped_unrecorded,
        stable_moved,
        stale,
        unconfirmed_gpus,
        unknown_macos,
        unnamed_build,
        unpinned_release,
        unrecorded_kernels,
        unverified,
        will_not_install,
        will_not_run,
        xpu_note,
        xpu_will_not_run,
        # refusals' hints that name a flag to give
        builds_hint,
        conda_hint,
        installs_hint,
        mac_x86_64_hint,
        rosetta_hint,
    )
}


def words(said: Note) -> str:
    """The sentence a reason or note is read as: made here, from its figures, and never read back."""
    return _WORDS[said.kind](**said.figures)


def value(figure: Any) -> Any:
    """A decision's value as ``--json`` gives it: a reason or note as its kind and figures, a release by its
    version, a named tuple (a rejection, a GPU, a host) by its fields less the empty ones; a machine's facts are
    the answer's own ``facts``, not repeated in each note."""
    if isinstance(figure, Note):
        return {"kind": figure.kind, **{k: value(v) for k, v in figure.figures.items() if not isinstance(v, Probe)}}
    if isinstance(figure, releases.Release):
        return figure.version
    if hasattr(figure, "_asdict"):
        return {k: value(v) for k, v in figure._asdict().items() if v not in ("", (), (0, 0), ("", ""))}
    if isinstance(figure, (list, tuple)):
        return [value(v) for v in figure]
    if isinstance(figure, dict):
        return {str(k): value(v) for k, v in figure.items()}
    return figure
