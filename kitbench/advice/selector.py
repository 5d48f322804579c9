"""Which PyTorch install command fits a machine: the decision (which release and build, and which builds were
passed over and why), over the releases ``releases`` covers; every sentence of its answer (reasons, notes,
refusals) is written by ``wording``, from the facts decided here.

Nothing here imports torch.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
from collections.abc import Iterator
from typing import Any

from kitbench.advice import facts, vendors, wheels
from kitbench.advice.rejections import Note, Rejection, note
from kitbench.advice.releases import (
    Release,
    answerable,
    command,
    computes,
    earlier_kernels,
    kernels,
    mps_macos,
    newest_first,
    release,
    releases,
    unrecorded,
    xpu_builds,
)
from kitbench.advice.wording import (
    machine_facts,
    nightly_refusal,
    no_uv_selector,
    not_installable,
    rejected,
    rosetta_refusal,
    unavailable,
    unknown_choice,
    value,
    wheel_facts,
    words,
)
from kitbench.errors import SelectionError
from kitbench.machine import builds, drivers
from kitbench.machine.builds import build
from kitbench.machine.probe import EMULATES, Probe, another_machine, assumed_from_here, said_no_gpu
from kitbench.machine.probe.intel import IntelGpu
from kitbench.machine.versions import (
    arch_of_capability,
    capability_supported,
    parse_capability,
    version_tuple,
)
from kitbench.records import manifest

OSES = ("linux", "macos", "windows")
ARCHES = ("x86_64", "aarch64", "arm64")
PACKAGES = ("pip", "conda", "uv")
FORMATS = ("selector", "pinned")


class Selection:
    """install-cmd's answer as decided: the command (its text, and the pins and index it installs from), the
    release and build, and why, as values: ``because`` (the build's reasons), ``noted`` (the notes) and
    ``passed`` (the builds passed over). ``reasons``, ``notes`` and ``rejected`` are their words, made by
    ``wording`` when read. A plain class with slots, filled in while it is decided ("Start-up" in
    docs/architecture.md: no dataclass on this path)."""

    __slots__ = (
        "arch",
        "because",
        "command",
        "compute",
        "facts",
        "format",
        "index",
        "noted",
        "os",
        "package",
        "passed",
        "pins",
        "release",
        "verified",
    )

    def __init__(self, release: str, os: str, arch: str, package: str, fmt: str, facts: dict[str, Any]) -> None:
        self.release, self.os, self.arch, self.package, self.format = release, os, arch, package, fmt
        self.command, self.compute, self.verified = "", "cpu", True
        self.pins: tuple[tuple[str, str], ...] = ()  # (package, version) as the command pins them
        self.index: str | None = None  # the index it installs from; None: PyPI, or conda's channels
        self.because: list[Note] = []
        self.noted: list[Note] = []
        self.passed: list[Rejection] = []
        self.facts = facts

    @property
    def reasons(self) -> list[str]:
        return [words(n) for n in self.because]

    @property
    def notes(self) -> list[str]:
        return [words(n) for n in self.noted]

    @property
    def rejected(self) -> list[str]:
        return [rejected(r) for r in self.passed]

    def as_dict(self) -> dict[str, Any]:
        """What ``--json`` prints: the answer's fields and words, and the decision as values."""
        shown = ("command", "compute", "release", "os", "arch", "package", "format", "verified")
        return {
            **{name: getattr(self, name) for name in (*shown, "reasons", "rejected", "notes", "facts")},
            "decision": {
                "pins": dict(self.pins),
                "index": self.index,
                "reasons": value(self.because),
                "notes": value(self.noted),
                "rejected": value(self.passed),
            },
        }


# The notes that say why an answer is not the newest release: what holds a team back (``project``).
HELD_BACK = ("stable_moved", "no_build_here", "older_release", "older_mac_release", "newer_gpu_release")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise unknown_choice(name, value, choices)


def select(
    machine: Probe, *, release_spec: str = "stable", package: str = "pip", compute: str = "auto", fmt: str = "pinned"
) -> Selection:
    """The command for ``machine``; with ``compute='auto'`` the best platform it can run, explained. The steps a
    person would take: the release whose wheels install here, moved back where no build of it runs on the GPU;
    the form of its command; the build (auto mode's pick, or the one asked for, checked); then what the answer
    rests on."""
    for name, given, choices in (
        ("OS", machine.os, OSES),
        ("architecture", machine.arch, ARCHES),
        ("package", package, PACKAGES),
        ("format", fmt, FORMATS),
    ):
        check_choice(name, given, choices)
    if fmt == "selector" and package == "uv":
        raise no_uv_selector()
    arch = machine.python_arch  # the interpreter's arch picks the wheel (Rosetta 2, Windows' x64 emulation)
    host = wheels.host_of(machine, arch)
    noted: list[Note] = []
    rel, moved = _release(machine, arch, release_spec, package, compute, fmt, host, noted)
    chosen = Selection(rel.version, machine.os, arch, package, fmt, machine_facts(machine))
    chosen.noted = noted
    only = _form(chosen, rel, host)
    if compute == "auto":
        chosen.compute = _auto(rel, machine, arch, package, chosen)
    else:
        _asked(chosen, rel, machine, compute, host)
    _gpu_notes(chosen, rel, machine, compute, host)
    wheel_compute = "cpu" if chosen.compute == "mps" else chosen.compute
    chosen.command, chosen.pins, chosen.index = command(
        rel, machine.os, package, wheel_compute, chosen.format, only or ()
    )
    _sources(chosen, rel, machine, wheel_compute, host, moved)
    return chosen


def _release(
    machine: Probe,
    arch: str,
    spec: str,
    package: str,
    compute: str,
    fmt: str,
    host: wheels.Host,
    noted: list[Note],
) -> tuple[Release, bool]:
    """The release to answer with, and whether the wheel facts (Python, C library, OS) moved it: the one asked
    for, or for ``stable`` the newest that installs here and, in auto mode, runs on the GPU."""
    asked = release(spec)
    rosetta = _rosetta(machine, arch, package, fmt)
    try:
        rel = _installable(asked, spec, host, noted)
    except SelectionError as error:
        if rosetta is None:
            raise
        raise rosetta_refusal(error, *rosetta) from None
    moved = rel is not asked  # by the wheel facts, not by the GPU below
    if rosetta is not None:
        noted.append(note("rosetta_line", native=rosetta[0], command=rosetta[1]))
    if spec == "stable" and compute == "auto":
        rel = _with_a_build(rel, machine, arch, package, host, noted)
        if _gpu_picks_release(machine):
            rel = _accelerated_release(rel, machine, arch, package, host, noted)
    return rel, moved


def _form(chosen: Selection, rel: Release, host: wheels.Host) -> tuple[str, ...] | None:
    """The command's form, and whether it is verified against pytorch.org's text: the packages a platform only
    PyTorch's index serves has wheels of (None: pytorch.org has a command for it)."""
    only = None if rel.nightly else wheels.named(rel.version, host)
    if only is not None:
        # pytorch.org has no command for a platform only PyTorch's index serves: its pinned form, from that index.
        chosen.format, chosen.verified = "pinned", False
        chosen.noted.append(note("index_command", host=host))
        missing = [p for p in wheels.load().releases[rel.version] if p not in only]
        if missing:
            # First: what the command leaves out is what its user most needs to know.
            inferred = [row for p in missing for row in [wheels.source_of(rel.version, host, p, inferred=True)] if row]
            chosen.noted.insert(
                0,
                note(
                    "left_out",
                    rel=rel,
                    host=host,
                    named=only,
                    missing=missing,
                    inferred=inferred,
                    having=wheels.newest(host, tuple(missing)),
                    foreign=EMULATES.get((host.os, host.arch)),
                ),
            )
    if rel.nightly and chosen.format == "pinned":
        # A nightly has no pinned form: its version changes every day.
        chosen.format = "selector"
        chosen.noted.append(note("nightly_unpinned"))
    if chosen.format == "selector" and not rel.nightly and rel.key != release("stable").key:
        # Start Locally's command names no version: run today it installs today's release, not this one.
        chosen.noted.append(note("unpinned_release", rel=rel))
    why = rel.unverified.get(chosen.format) if only is None else None  # pytorch.org's text: not this one
    if why:
        if chosen.os == "macos" and not rel.nightly:
            why = why.split(";")[0]  # a release's note goes on about its Linux and Windows builds
        chosen.verified = False
        chosen.noted.append(note("unverified", rel=rel, fmt=chosen.format, why=why))
    return only


def _asked(chosen: Selection, rel: Release, machine: Probe, compute: str, host: wheels.Host) -> None:
    """The build asked for with --compute: refused where ``rel`` has none here, else taken, with a warning
    where it will not install or run."""
    arch = chosen.arch
    if compute not in computes(rel, machine.os, arch, chosen.package) and compute not in xpu_builds(
        rel, machine.os, arch, chosen.package
    ):
        raise _unavailable(rel, machine.os, arch, chosen.package, compute, host)
    chosen.compute = compute
    chosen.because.append(note("asked_reason", compute=compute))
    evidence = rel.provenance(compute, f"{machine.os}-{arch}")
    if evidence.kind not in manifest.ANSWERABLE:
        chosen.noted.append(note("inferred_build", rel=rel, evidence=evidence))
    if compute in dict(rel.unnamed):
        chosen.noted.append(
            note(
                "unnamed_build", rel=rel, compute=compute, source=evidence.source, recorded=not unrecorded(rel, compute)
            )
        )
    if build(compute).kind == "cuda" and machine.driver is not None:
        runs = _cuda_rejection(rel, machine, compute)
        if runs:
            chosen.noted.append(note("will_not_run", compute=compute, why=runs))
    installs = wheels.build_refusal(rel.version, compute, host)
    if installs:
        chosen.noted.append(note("will_not_install", compute=compute, why=installs[0], listing=installs[1]))
    if build(compute).kind == "xpu" and machine.intel_gpus and not _intel_served(machine)[0]:
        chosen.noted.append(note("xpu_will_not_run", gpus=machine.intel_gpus))
    missing = _rocm_missing(machine, compute) if build(compute).kind == "rocm" else []
    if missing:
        chosen.noted.append(
            note("will_not_run", compute=compute, why=Rejection(compute, "no kernels", arches=tuple(missing)))
        )
    if machine.os == "macos" and compute == "cpu" and arch == "arm64":
        chosen.noted.append(note("mps_default"))


def _gpu_notes(chosen: Selection, rel: Release, machine: Probe, compute: str, host: wheels.Host) -> None:
    """What the answer says of the GPUs beyond its build: the release whose build would run on an NVIDIA GPU a
    CPU answer leaves unused, an unverified XPU command, driver floors that are only inferred, kernel lists not
    on record, and a GPU list the probe could not confirm."""
    if (
        compute == "auto"
        and chosen.compute == "cpu"
        and machine.driver
        and _cudas(computes(rel, machine.os, chosen.arch, chosen.package))
    ):
        found = _gpu_releases(machine, chosen.arch, chosen.package, host)
        gpu = next(found, None)
        if gpu:
            chosen.noted.append(note("newer_gpu_release", rel=rel, newest=gpu[0], compute=gpu[1]))
            # The oldest such release, where all of them are newer than this one (read no further back).
            first: tuple[Release, str] | None = gpu
            for older in found:
                first = older if older[0].key > rel.key else None
                if first is None:
                    break
            if first is not None and first[0].key > rel.key:
                chosen.noted.append(note("first_gpu_release", rel=rel, first=first[0], compute=first[1]))
    if build(chosen.compute).kind == "xpu":
        chosen.verified = False  # no command kitbench checked against pytorch.org's text names xpu
        chosen.noted.append(note("xpu_note", rel=rel, os=machine.os))
    if machine.driver is not None:
        for cc in machine.capabilities:
            generation = drivers.load().generation(cc)
            if (
                generation is not None
                and not generation.published
                and not generation.allows(machine.driver, machine.os)
            ):
                chosen.noted.append(
                    note(
                        "inferred_gpu_floor", generation=generation, capability=cc, driver=machine.driver, os=machine.os
                    )
                )
    if build(chosen.compute).kind == "cuda" and machine.capabilities and kernels(rel, machine, chosen.compute) is None:
        chosen.noted.append(note("unrecorded_kernels", compute=chosen.compute, capabilities=machine.capabilities))
    if machine.gpu_doubt:
        chosen.noted.append(note("unconfirmed_gpus", unsure=machine.gpu_doubt))
    macos = _unknown_macos(rel, host)
    if macos:
        chosen.noted.append(macos)


def _sources(
    chosen: Selection, rel: Release, machine: Probe, wheel_compute: str, host: wheels.Host, moved: bool
) -> None:
    """Where the answer's facts came from: the wheels and the build (its source's kind), the index tags it
    assumed, and what it took from this host for another machine."""
    chosen.facts["wheels"] = wheel_facts(rel, chosen.command, host, wheel_compute)
    evidence = rel.provenance(wheel_compute, f"{machine.os}-{chosen.arch}")
    chosen.facts["build"] = {
        "kind": evidence.kind,
        "source": evidence.source,
        **({"confirm": evidence.confirm} if evidence.confirm else {}),
    }
    if _assumes_tags(rel, wheel_compute, chosen.index, host, moved):
        chosen.noted.append(note("assumed_tags", rel=rel, compute=wheel_compute))
    here = assumed_from_here(machine)
    if here:
        chosen.noted.append(note("assumed_host", found=here, os=machine.os))


def _unavailable(rel: Release, os: str, arch: str, package: str, compute: str, host: wheels.Host) -> SelectionError:
    """The refusal of ``compute`` for ``rel`` here, with the releases its hint names: the last with conda
    packages and the newest of them that installs here (Python 3.14 has no 2.5.1 wheel), the last with macOS
    x86_64 wheels, and the newest other release with that build that installs here (what someone asking for
    cu128 wants)."""
    every = releases().values()
    conda = [r for r in every if r.conda]
    fits = [r for r in conda if wheels.refusal(r.version, host) is None]
    elsewhere = (
        next(
            (
                r.version
                for r in _installing(host)
                if r.version != rel.version
                and compute in computes(r, os, arch, package) + xpu_builds(r, os, arch, package)
            ),
            None,
        )
        if not rel.nightly and build(compute).known
        else None
    )
    return unavailable(
        rel,
        os,
        arch,
        package,
        compute,
        computes(rel, os, arch, package) + xpu_builds(rel, os, arch, package),
        (max(conda, key=lambda r: r.key).version, max(fits, key=lambda r: r.key).version if fits else None),
        max((r for r in every if r.macos_x86_64), key=lambda r: r.key).version,
        elsewhere,
    )


def _rosetta(machine: Probe, arch: str, package: str, fmt: str) -> tuple[str | None, str] | None:
    """For an x86_64 Python on an Apple Silicon Mac: the release an arm64 Python gets (None: none installs), and
    its command; None elsewhere."""
    if machine.os != "macos" or arch != "x86_64" or not (machine.rosetta or machine.arch == "arm64"):
        return None
    native = wheels.newest(wheels.host_of(machine, arch)._replace(arch="arm64"))
    if native is None:
        return None, ""
    form = "selector" if fmt == "selector" and package != "uv" else "pinned"
    return native, command(release(native), "macos", package, "cpu", form).text


def _unknown_macos(rel: Release, host: wheels.Host) -> Note | None:
    """Which macOS the answer needs, where the question left the Mac's version unknown (``--os macos`` from
    another machine): an unknown fact constrains nothing, so the answer may need a newer macOS than the Mac has.
    None where no Mac of this arch that any release installs on is older than that."""
    if host.os != "macos" or host.macos is not None:
        return None
    facts = wheels.load()
    checked = list(facts.releases)[-1] if rel.nightly else rel.version
    lowest = [
        min(floors)
        for wheels_ in facts.releases.get(checked, {}).values()
        for floors in [[p.floor for p in wheels_.tags if p.os == "macos" and host.arch in p.arches and p.floor]]
        if floors
    ]
    if not lowest:
        return None
    need = max(lowest)  # torch's and torchvision's wheels must both install
    older = (need[0] - 1, 0) if need[0] > 11 else (need[0], need[1] - 1) if need[1] else None
    fits = wheels.newest(host._replace(macos=older)) if older else None
    if older is None or fits is None:
        return None
    return note("unknown_macos", checked=checked, arch=host.arch, need=need, older=older, fits=fits)


def _assumes_tags(rel: Release, compute: str, index: str | None, host: wheels.Host, moved: bool) -> bool:
    """Whether the answer rests on a build of PyTorch's index carrying its PyPI wheels' tags and that decided it:
    the wheel facts moved the release, or this Linux's glibc is older than the newest floor a recorded index
    build has (where an index build's own tag may well differ from PyPI's)."""
    if host.os != "linux" or index is None or rel.nightly or wheels.recorded(rel.version, compute):
        return False
    floors = [wheels.platform(tag).floor or () for tag, _ in wheels.index_tags().builds.values()]
    older = host.libc_version is not None and bool(floors) and host.libc_version < max(floors)
    return moved or older


def _with_a_build(
    newest: Release, machine: Probe, arch: str, package: str, host: wheels.Host, notes: list[Note]
) -> Release:
    """For ``stable``: ``newest`` where auto mode finds a build of it for this machine; where PyTorch's index
    lists none of its builds for it, the newest release that installs here and has one, as for any release
    without a fitting build (a listing that drops a release's builds makes that release unusable here, not
    every answer). Other refusals stand (no conda packages: the hint names the release that has them)."""
    if newest.listed is None or (package == "conda" and not newest.conda):
        return newest  # its refusal, if any, is said where the answer is made
    try:
        _accelerated(newest, machine, arch, package)
        return newest
    except SelectionError:
        for rel in _installing(host, below=newest):
            try:
                _accelerated(rel, machine, arch, package)
            except SelectionError:
                continue
            notes.append(
                note("no_build_here", newest=newest, rel=rel, package=package, host=host, listing=facts.listing().where)
            )
            return rel
        raise


def _installable(rel: Release, spec: str, host: wheels.Host, notes: list[Note]) -> Release:
    """``rel`` if its wheels install on ``host``; for ``stable``, the newest release whose wheels do."""
    facts = wheels.load()
    # Nightly's wheels live on download.pytorch.org only: the newest PyPI release's stand in for them.
    checked = list(facts.releases)[-1] if rel.nightly else rel.version
    why = wheels.refusal(checked, host)
    if why is None:
        return rel
    inferred = (
        wheels.source_of(checked, host, "torch", inferred=True)
        if spec == rel.version and wheels.index_only(checked, host)
        else None
    )
    if inferred is not None:
        # Asked by name, a release whose wheels here are known only by inference is answered, and says so.
        notes.append(note("inferred_wheels", rel=rel, host=host, row=inferred))
        return rel
    newest = wheels.newest(host)
    if rel.nightly:
        why = nightly_refusal(checked, why)
    if spec == "stable" and newest is not None:
        notes.append(note("stable_moved", why=why, newest=newest))
        return release(newest)
    raise not_installable(
        why,
        newest,
        next(iter(facts.releases)),
        list(facts.releases)[-1],
        EMULATES.get((host.os, host.arch)),
        wheels.other_pythons(host) if newest is None and host.python else [],
    )


def _installing(host: wheels.Host, below: Release | None = None) -> Iterator[Release]:
    """The one release search: the releases whose wheels install on ``host`` (older than ``below``, where given),
    newest first, each series read only when reached. Every walk for another release goes through it: stable's
    fallbacks, the newer-release note, the other ROCm release, the release a refusal's hint names."""
    for rel in newest_first():
        if (below is None or rel.key < below.key) and wheels.refusal(rel.version, host) is None:
            yield rel


def _gpu_picks_release(machine: Probe) -> bool:
    """Whether an older release may run on this machine's GPU where the newest does not: an NVIDIA GPU
    (driver floors and kernels differ by release), an AMD one on Linux (gfx lists do), an Intel one (the newest
    release's XPU build may rest on a nightly matrix alone, or be missing from PyPI's index's listing), or Apple
    Silicon of a known macOS (MPS's macOS floor rose twice). Not ROCm elsewhere."""
    return (
        (machine.os != "macos" and bool(machine.driver or machine.capabilities or machine.intel_gpus))
        or (machine.os == "linux" and bool(machine.amd_gpus or machine.rocm))
        or (
            machine.os == "macos"
            and machine.arch == "arm64"
            and not machine.rosetta
            and machine.python_arch != "x86_64"
            and bool(machine.os_version)
        )
    )


def _accelerated(rel: Release, machine: Probe, arch: str, package: str) -> Selection:
    """What auto mode makes of ``rel`` on ``machine``, worked out aside: its compute and reasons, and the
    builds it passed over."""
    trial = Selection(rel.version, machine.os, arch, package, "pinned", {})
    trial.compute = _auto(rel, machine, arch, package, trial)
    return trial


def _accelerated_release(
    newest: Release, machine: Probe, arch: str, package: str, host: wheels.Host, notes: list[Note]
) -> Release:
    """For ``stable``: the newest release that installs here and runs on the machine's GPU; where none
    does, ``newest`` (its CPU build), with a note saying why. Walks back only as far as it must."""
    first = _accelerated(newest, machine, arch, package)
    if first.compute != "cpu":
        return newest
    why = {"passed": first.passed, "reason": first.because[-1]}  # why no build of ``newest`` runs on the GPU
    need = _driver_need(newest, machine, arch, package)
    skipped: list[Note] = []  # builds on the way back that would have been tried, were their kernels on record
    for rel in _installing(host, below=newest):
        try:
            trial = _accelerated(rel, machine, arch, package)
        except SelectionError:
            continue  # nothing of this release for this package here (no conda packages, say)
        # Falling back is worth it only for a build known to run: ROCm builds without a recorded gfx list are not.
        if trial.compute != "cpu" and not (
            build(trial.compute).kind == "rocm" and machine.gfx and vendors.load().rocm_arches(trial.compute) is None
        ):
            notes.append(
                note("older_mac_release", rel=rel, newest=newest, **why)
                if machine.os == "macos"
                else note("older_release", rel=rel, newest=newest, floor=need, **why)
            )
            notes.extend(skipped)
            return rel
        skipped += [
            note("skipped_unrecorded", rel=rel, compute=r.build, source=r.detail)
            for r in trial.passed
            if r.cause == "unrecorded"
        ]
    kernel_less = _kernel_less(machine, arch, package, host)
    unserved = [g for g in machine.gfx if not any(g in a for a in vendors.load().rocm.values())]
    notes.append(note("cpu_fallback", newest=newest, floor=need, kernel_less=kernel_less, unserved=unserved, **why))
    notes.extend(skipped)
    return newest


def _kernel_less(machine: Probe, arch: str, package: str, host: wheels.Host) -> list[str]:
    """The NVIDIA GPUs' architectures that no CUDA build of a release that installs here has kernels
    for, whatever the driver; none where no such release has a CUDA build here at all (Windows on Arm), which
    is the reason then, not the kernels."""

    def cuda() -> Iterator[tuple[Release, str]]:
        for rel in _installing(host):
            for compute in answerable(rel, computes(rel, machine.os, arch, package), machine.os, arch):
                if build(compute).kind == "cuda":
                    yield rel, compute

    found = []
    for cc in machine.capabilities:
        alone = machine._replace(driver="9999", gpus=tuple(g for g in machine.gpus if g.capability == cc))
        if not any(_cuda_rejection(rel, alone, compute) is None for rel, compute in cuda()):
            found.append(arch_of_capability(parse_capability(cc)))
    return found if found and any(cuda()) else []


def _driver_need(rel: Release, machine: Probe, arch: str, package: str) -> str | None:
    """The driver version the oldest-driver CUDA build of ``rel`` with kernels for the GPU asks for, where
    the driver is all that keeps it off this machine."""
    if machine.driver is None:
        return None
    floors = []
    for compute in answerable(rel, computes(rel, machine.os, arch, package), machine.os, arch):
        cuda = build(compute).cuda
        if cuda is None:
            continue
        need = drivers.load().requirement(f"{cuda[0]}.{cuda[1]}", machine.os)
        if need.floor is not None and _cuda_rejection(rel, machine._replace(driver=need.floor), compute) is None:
            floors.append(need.floor)
    return min(floors, key=version_tuple) if floors else None


def _gpu_releases(machine: Probe, arch: str, package: str, host: wheels.Host) -> Iterator[tuple[Release, str]]:
    """Each release that installs here and has a CUDA build this GPU and driver run (with the build its own
    answer would name), newest first, each series read only when reached."""
    for rel in _installing(host):
        compute = _cuda_pick(
            rel, machine, answerable(rel, computes(rel, machine.os, arch, package), machine.os, arch), host
        )[0]
        if compute is not None:
            yield rel, compute


def _cuda_pick(
    rel: Release, machine: Probe, available: list[str], host: wheels.Host
) -> tuple[str | None, list[Rejection]]:
    """The CUDA build auto mode picks among ``available``: the newest CUDA that runs on the machine's GPU and
    driver and whose index tags (where recorded: 2.6.0's cu126 needs glibc 2.28) install here; None where none
    does. And the builds passed over on the way."""
    passed: list[Rejection] = []
    for candidate in _cudas(available):
        why = _cuda_rejection(rel, machine, candidate) or _install_rejection(rel, candidate, host)
        if why is None:
            return candidate, passed
        passed.append(why)
    return None, passed


def _auto(rel: Release, machine: Probe, arch: str, package: str, out: Selection) -> str:
    """The build auto mode picks, its reason in ``out``, and the builds passed over on the way. Only published
    builds: a build known by inference is answered only when asked for."""
    every = computes(rel, machine.os, arch, package)
    available = answerable(rel, every, machine.os, arch)
    host = wheels.host_of(machine, arch)
    if machine.driver:  # a listed build left out of the default answer only for want of its kernel list
        out.passed.extend(
            Rejection(c, "unrecorded", release=rel.version, detail=rel.provenance(c).source)
            for c in _cudas(every)
            if unrecorded(rel, c) and _cuda_rejection(rel, machine, c) is None
        )
    if machine.os == "macos":
        if machine.rosetta or (machine.arch == "arm64" and machine.python_arch == "x86_64"):
            out.because.append(note("rosetta_reason"))
        if not available:
            raise _unavailable(rel, machine.os, arch, package, "cpu", host)
        need = mps_macos(rel) if available[0] == "mps" else None
        if need and machine.os_version and version_tuple(machine.os_version) < version_tuple(need.macos):
            out.because.append(note("mps_too_old", rel=rel, need=need, has=machine.os_version))
            return "cpu"
        out.because.append(note("mac_reason", compute=available[0]))
        return available[0]
    cuda, passed = _cuda_pick(rel, machine, available, host)
    out.passed.extend(passed)
    for why in passed:
        branch = _branch_floor(machine, why.build)
        if branch and branch not in out.noted:
            out.noted.append(branch)
    if cuda is not None:
        out.because.append(note("cuda_reason", rel=rel, machine=machine, compute=cuda))
        return cuda
    vendor = _vendor_auto(rel, machine, arch, package, available, out)
    if isinstance(vendor, str):
        return vendor
    if "cpu" not in available:
        raise _unavailable(rel, machine.os, arch, package, "cpu", host)
    if vendor is not None:
        out.because.append(vendor)
    elif _cudas(available) and machine.driver:
        out.because.append(note("cpu_reason", why="no cuda fits", machine=machine))
    elif machine.driver or (available == ["cpu"] and not said_no_gpu(machine)):
        # This release has no GPU build here at all (Windows on Arm, Linux aarch64 before 2.6): no driver or GPU
        # given would change the answer, and one given goes unused.
        out.because.append(note("no_cuda_build", rel=rel, where=wheels.place(host), gpu=bool(machine.driver)))
    elif said_no_gpu(machine):
        out.because.append(note("cpu_reason", why="no gpu", machine=machine))
    elif another_machine(machine):
        # The probe's findings (a container without GPUs, WSL) are this host's, not the machine asked about.
        out.because.append(note("cpu_reason", why="not given", machine=machine))
    else:
        out.because.append(note("cpu_reason", why="no driver", machine=machine))
    return "cpu"


def _branch_floor(machine: Probe, compute: str) -> Note | None:
    """Where a driver given as a bare branch ("580", read 580.0.0) misses a floor inside that branch
    (580.65.06) that every driver of the branch released meets: what the full version would change."""
    cuda = build(compute).cuda
    if machine.driver is None or "." in machine.driver or cuda is None:
        return None
    floor = drivers.load().requirement(f"{cuda[0]}.{cuda[1]}", machine.os).floor
    if floor is None or floor.split(".")[0] != machine.driver or not any(version_tuple(floor)[1:]):
        return None
    return note("branch_floor", driver=machine.driver, cuda=cuda[0], floor=floor)


def _cudas(available: list[str]) -> list[str]:
    """The CUDA builds among ``available``, newest CUDA first: the order auto mode tries them in."""
    return builds.newest_first(available, "cuda")


def _install_rejection(rel: Release, compute: str, host: wheels.Host) -> Rejection | None:
    why = wheels.build_refusal(rel.version, compute, host)
    return Rejection(compute, "install", detail=why[0], listing=why[1]) if why else None


def _sm(capabilities: list[str]) -> tuple[str, ...]:
    return tuple(arch_of_capability(parse_capability(c)) for c in capabilities)


def _cuda_rejection(rel: Release, machine: Probe, compute: str) -> Rejection | None:
    """Why ``compute``, a CUDA build of ``rel``, does not run on ``machine``; None where it does."""
    cuda = build(compute).cuda
    assert cuda is not None
    if machine.driver is None:
        return Rejection(compute, "no driver")
    # Kernels first: where the build has none for the GPU, no driver would make it run (a Pascal and CUDA 13).
    kernel_less = _kernel_rejection(rel, machine, compute, cuda)
    if kernel_less is not None:
        return kernel_less
    need = drivers.load().requirement(f"{cuda[0]}.{cuda[1]}", machine.os)
    toolkit = None
    if not need.allows(machine.driver):
        toolkit = Rejection(compute, "driver floor", driver=machine.driver, floor=str(need.floor), cuda=cuda)
    for cc in machine.capabilities:
        generation = drivers.load().generation(cc)
        if generation is not None and generation.published and not generation.allows(machine.driver, machine.os):
            gpu_floor = str(generation.floor(machine.os))
            # The higher floor is the one to name: the toolkit's drives the GPU too (an H100 on 470 needs 580
            # for CUDA 13, not Hopper's 520.61.05, after which cu130 would still not run).
            if toolkit is not None and need.floor is not None and version_tuple(need.floor) >= version_tuple(gpu_floor):
                return toolkit
            return Rejection(
                compute, "gpu floor", arches=_sm([cc]), driver=machine.driver, floor=gpu_floor, detail=generation.name
            )
    return toolkit


def _kernel_rejection(rel: Release, machine: Probe, compute: str, cuda: tuple[int, int]) -> Rejection | None:
    """Why ``compute`` has no kernels for the machine's GPUs, whatever the driver; None where it has them (or
    may: nothing on record says otherwise)."""
    arches = kernels(rel, machine, compute)
    if arches is not None:
        missing = [c for c in machine.capabilities if not capability_supported(parse_capability(c), arches)]
        return Rejection(compute, "no kernels", arches=_sm(missing)) if missing else None
    # The build's own list is not recorded: no build can hold kernels its toolkit cannot compile, older
    # or newer (a cubin runs on later minors of its own major only: CUDA 12.6's sm_90 is no Blackwell's).
    bounds = drivers.load().arch_range(f"{cuda[0]}.{cuda[1]}")
    if bounds is not None:
        oldest, newest = bounds
        beyond = [c for c in machine.capabilities if parse_capability(c) < oldest or parse_capability(c)[0] > newest[0]]
        if beyond:
            return Rejection(
                compute,
                "toolkit range",
                arches=_sm(beyond),
                cuda=cuda,
                span=(arch_of_capability(oldest), arch_of_capability(newest)),
            )
    # Nor, probably, kernels an older release's build of the same CUDA had already dropped: PyTorch
    # drops old architectures per CUDA version (cu128 lost sm_50 to sm_61 in 2.8) and has not added one back.
    # Asked only for the architectures the newest CUDA has dropped, the ones PyTorch's builds shed (so a
    # newer GPU's answer reads no older release).
    ageing = [c for c in machine.capabilities if parse_capability(c) < max(drivers.load().arches)[2]]
    earlier = earlier_kernels(rel.version, compute) if machine.arch == "x86_64" and ageing else None
    if earlier is not None:
        kept = [parse_capability(a) for a in earlier[1] if re.fullmatch(r"sm_[0-9]{2,3}", a)]
        dropped = [c for c in ageing if kept and parse_capability(c) < min(kept)]
        if dropped:
            return Rejection(compute, "dropped before", arches=_sm(dropped), earlier=earlier[0], release=rel.version)
    return None


def _rocm_missing(machine: Probe, compute: str) -> list[str]:
    return vendors.load().rocm_missing(machine.amd_gpus, compute)[0]


def _vendor_auto(
    rel: Release, machine: Probe, arch: str, package: str, available: list[str], out: Selection
) -> str | Note | None:
    """An AMD or Intel GPU's build (its compute), or why it gets none (the cpu reason), or None where the
    machine has neither."""
    facts = vendors.load()
    if machine.amd_gpus or machine.rocm:
        where = machine.sources.get("amd_gpus", "/opt/rocm/.info/version")
        rocms = builds.newest_first(available, "rocm")
        if machine.os != "linux" or package == "conda" or not rocms:
            if machine.os == "linux":
                _other_rocm_release(rel, machine, arch, out)
            return note("no_rocm_build", rel=rel, machine=machine, arch=arch, package=package, where=where)
        for candidate in rocms:
            missing = _rocm_missing(machine, candidate)
            if missing:
                out.passed.append(
                    Rejection(candidate, "no kernels", arches=tuple(missing), detail=facts.rocm_sources[candidate])
                )
                continue
            # As for CUDA: a build whose index tags are recorded is checked against them.
            installs = _install_rejection(rel, candidate, wheels.host_of(machine, arch))
            if installs:
                out.passed.append(installs)
                continue
            left = facts.rocm_missing(machine.amd_gpus, candidate)[1]
            if left:
                out.noted.append(note("hidden_gpus", gpus=machine.amd_gpus, left=left, compute=candidate))
            out.because.append(note("rocm_reason", rel=rel, machine=machine, compute=candidate, where=where, left=left))
            return candidate
        _other_rocm_release(rel, machine, arch, out)
        arches = facts.rocm_arches(rocms[0]) or ()
        out.noted.extend(
            note("rocm_hint", hint=hint) for g in machine.gfx for hint in [facts.override_hint(g, arches)] if hint
        )
        return note("no_rocm_kernels", rel=rel, machine=machine, where=where)
    if machine.intel_gpus:
        where = machine.sources.get("intel_gpus", "probe")
        served, unserved = _intel_served(machine)
        if not served:
            return note("intel_unsupported", unserved=unserved, where=where)
        if unserved:
            out.noted.append(note("intel_left_out", unserved=unserved, served=served))
        if not xpu_builds(rel, machine.os, arch, package):
            return note(
                "no_xpu_build", rel=rel, machine=machine, arch=arch, package=package, served=served, where=where
            )
        if not rel.answerable("xpu", f"{machine.os}-{arch}"):
            return note("xpu_unconfirmed", rel=rel, served=served, where=where)
        out.because.append(note("xpu_reason", rel=rel, machine=machine, arch=arch, served=served, where=where))
        return "xpu"
    return None


def _intel_served(machine: Probe) -> tuple[list[IntelGpu], list[IntelGpu]]:
    """The Intel GPUs the XPU builds support (or whose device id is unknown: not checked), and the others.
    envs/intel_gpus.yaml is read only here, when a device id is to be checked."""
    served = [g for g in machine.intel_gpus if g.device_id is None or vendors.intel_gpus().family(g.device_id)]
    return served, [g for g in machine.intel_gpus if g not in served]


def _other_rocm_release(rel: Release, machine: Probe, arch: str, out: Selection) -> None:
    """Name the newest other release with a ROCm build that has kernels for every GPU found."""
    facts = vendors.load()
    host = wheels.host_of(machine, arch)
    found = next(
        (
            (r.version, c)
            for r in _installing(host)  # one that installs here, not just any
            if r.version != rel.version
            for c in reversed(answerable(r, computes(r, machine.os, arch, "pip"), machine.os, arch))
            if build(c).kind == "rocm" and facts.rocm_arches(c) is not None and not _rocm_missing(machine, c)
        ),
        None,
    )
    if found:
        out.noted.append(note("other_rocm_release", version=found[0], compute=found[1], machine=machine))
