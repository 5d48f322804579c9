"""Which PyTorch install command fits a machine: the decision (which release and build, and which builds were
passed over and why), over the releases ``releases`` covers; every sentence of its answer (reasons, notes,
refusals) is written by ``wording``, from the facts decided here.

Nothing here imports torch.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from kitbench.advice import facts, vendors, wheels
from kitbench.advice.rejections import Rejection
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
    unrecorded,
    xpu_builds,
)
from kitbench.advice.wording import (
    asked_reason,
    assumed_host,
    assumed_tags,
    branch_floor,
    cpu_fallback,
    cpu_reason,
    cuda_reason,
    first_gpu_release,
    index_command,
    inferred_build,
    inferred_gpu_floor,
    inferred_wheels,
    intel_left_out,
    intel_unsupported,
    left_out,
    mac_reason,
    machine_facts,
    mps_default,
    mps_too_old,
    newer_gpu_release,
    nightly_refusal,
    nightly_unpinned,
    no_build_here,
    no_cuda_build,
    no_gpu_build,
    no_rocm_build,
    no_rocm_kernels,
    no_uv_selector,
    no_xpu_build,
    not_installable,
    older_mac_release,
    older_release,
    other_rocm_release,
    rejected,
    rocm_hints,
    rocm_reason,
    rosetta_line,
    rosetta_note,
    rosetta_reason,
    rosetta_refusal,
    skipped_unrecorded,
    stable_moved,
    unavailable,
    unconfirmed_gpus,
    unknown_choice,
    unknown_macos,
    unnamed_build,
    unpinned_release,
    unrecorded_kernels,
    unverified,
    wheel_facts,
    will_not_install,
    will_not_run,
    xpu_note,
    xpu_reason,
    xpu_unconfirmed,
    xpu_will_not_run,
)
from kitbench.errors import SelectionError
from kitbench.machine import builds, drivers
from kitbench.machine.builds import build
from kitbench.machine.probe import EMULATES, Probe, another_machine, assumed_from_here, doubt
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


class Selection(NamedTuple):
    """install-cmd's answer. A named tuple, not a dataclass: far cheaper to define, which install-cmd's start-up
    pays; its lists and facts are filled in place while it is decided, its other fields replaced."""

    command: str
    compute: str
    release: str
    os: str
    arch: str
    package: str
    format: str
    verified: bool
    reasons: list[str]
    rejected: list[str]
    notes: list[str]
    facts: dict[str, Any]


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise unknown_choice(name, value, choices)


def select(
    machine: Probe, *, release_spec: str = "stable", package: str = "pip", compute: str = "auto", fmt: str = "pinned"
) -> Selection:
    """The command for ``machine``; with ``compute='auto'`` the best platform it can run, explained."""
    for name, value, choices in (
        ("OS", machine.os, OSES),
        ("architecture", machine.arch, ARCHES),
        ("package", package, PACKAGES),
        ("format", fmt, FORMATS),
    ):
        check_choice(name, value, choices)
    rel = release(release_spec)
    if fmt == "selector" and package == "uv":
        raise no_uv_selector()
    arch = machine.python_arch  # the interpreter's arch picks the wheel (Rosetta 2, Windows' x64 emulation)
    host = wheels.host_of(machine, arch)
    notes: list[str] = []
    asked = rel
    rosetta = rosetta_note(machine, arch, package, fmt)
    try:
        rel = _installable(rel, release_spec, host, notes)
    except SelectionError as error:
        if rosetta is None:
            raise
        raise rosetta_refusal(error, rosetta) from None
    moved = rel is not asked  # by the wheel facts (Python, C library, OS), not by the GPU below
    if rosetta is not None:
        notes.append(rosetta_line(rosetta))
    if release_spec == "stable" and compute == "auto":
        rel = _with_a_build(rel, machine, arch, package, host, notes)
    if release_spec == "stable" and compute == "auto" and _gpu_picks_release(machine):
        rel = _accelerated_release(rel, machine, arch, package, host, notes)
    chosen = Selection(
        command="",
        compute="",
        release=rel.version,
        os=machine.os,
        arch=arch,
        package=package,
        format=fmt,
        verified=True,
        reasons=[],
        rejected=[],
        notes=notes,
        facts=machine_facts(machine),
    )
    only = None if rel.nightly else wheels.named(rel.version, host)
    if only is not None:
        # pytorch.org has no command for a platform only PyTorch's index serves: its pinned form, from that index.
        chosen = chosen._replace(format="pinned", verified=False)
        chosen.notes.append(index_command(host))
        missing = [p for p in wheels.load().releases[rel.version] if p not in only]
        if missing:
            # First: what the command leaves out is what its user most needs to know.
            inferred = [row for p in missing for row in [wheels.source_of(rel.version, host, p, inferred=True)] if row]
            chosen.notes.insert(
                0,
                left_out(
                    rel,
                    host,
                    only,
                    missing,
                    inferred,
                    wheels.newest(host, tuple(missing)),
                    EMULATES.get((host.os, host.arch)),
                ),
            )
    if rel.nightly and fmt == "pinned":
        # A nightly has no pinned form: its version changes every day.
        chosen = chosen._replace(format="selector")
        chosen.notes.append(nightly_unpinned())
    if chosen.format == "selector" and not rel.nightly and rel.key != release("stable").key:
        # Start Locally's command names no version: run today it installs today's release, not this one.
        chosen.notes.append(unpinned_release(rel))
    why = unverified(rel, chosen.format, machine.os) if only is None else None  # pytorch.org's text: not this one
    if why:
        chosen = chosen._replace(verified=False)
        chosen.notes.append(why)
    if compute == "auto":
        passed: list[Rejection] = []
        picked = _auto(rel, machine, arch, package, chosen, passed)  # fills passed
        chosen = chosen._replace(compute=picked, rejected=[rejected(r) for r in passed])
    else:
        if compute not in computes(rel, machine.os, arch, package) and compute not in xpu_builds(
            rel, machine.os, arch, package
        ):
            raise unavailable(rel, machine.os, arch, package, compute, host)
        chosen = chosen._replace(compute=compute)
        chosen.reasons.append(asked_reason(compute))
        evidence = rel.provenance(compute, f"{machine.os}-{arch}")
        if evidence.kind not in manifest.ANSWERABLE:
            chosen.notes.append(inferred_build(rel, evidence))
        if compute in dict(rel.unnamed):
            chosen.notes.append(unnamed_build(rel, compute, evidence.source, not unrecorded(rel, compute)))
        if build(compute).kind == "cuda" and machine.driver is not None:
            runs = _cuda_rejection(rel, machine, compute)
            if runs:
                chosen.notes.append(will_not_run(compute, runs))
        installs = wheels.build_refusal(rel.version, compute, host)
        if installs:
            chosen.notes.append(will_not_install(compute, installs))
        if build(compute).kind == "xpu" and machine.intel_gpus and not _intel_served(machine)[0]:
            chosen.notes.append(xpu_will_not_run(machine.intel_gpus))
        missing = _rocm_missing(machine, compute) if build(compute).kind == "rocm" else []
        if missing:
            chosen.notes.append(will_not_run(compute, Rejection(compute, "no kernels", arches=tuple(missing))))
    if machine.os == "macos" and chosen.compute == "cpu" and arch == "arm64" and compute != "auto":
        chosen.notes.append(mps_default())
    if (
        compute == "auto"
        and chosen.compute == "cpu"
        and machine.driver
        and any(build(c).kind == "cuda" for c in computes(rel, machine.os, arch, package))
    ):
        found = _gpu_releases(machine, arch, package, host)
        gpu = next(found, None)
        if gpu:
            chosen.notes.append(newer_gpu_release(rel, *gpu))
            # The oldest such release, where all of them are newer than this one (read no further back).
            first: tuple[Release, str] | None = gpu
            for older in found:
                first = older if older[0].key > rel.key else None
                if first is None:
                    break
            if first is not None and first[0].key > rel.key:
                chosen.notes.append(first_gpu_release(rel, *first))
    if build(chosen.compute).kind == "xpu":
        chosen = chosen._replace(verified=False)  # no command kitbench checked against pytorch.org's text names xpu
        chosen.notes.append(xpu_note(rel, machine.os))
    if machine.driver is not None:
        for cc in machine.capabilities:
            generation = drivers.load().generation(cc)
            if (
                generation is not None
                and not generation.published
                and not generation.allows(machine.driver, machine.os)
            ):
                chosen.notes.append(inferred_gpu_floor(generation, cc, machine.driver, machine.os))
    if build(chosen.compute).kind == "cuda" and machine.capabilities and kernels(rel, machine, chosen.compute) is None:
        chosen.notes.append(unrecorded_kernels(chosen.compute, machine.capabilities))
    unsure = doubt(machine)
    if unsure:
        chosen.notes.append(unconfirmed_gpus(unsure))
    macos = unknown_macos(rel, host)
    if macos:
        chosen.notes.append(macos)
    wheel_compute = "cpu" if chosen.compute == "mps" else chosen.compute
    chosen = chosen._replace(command=command(rel, machine.os, package, wheel_compute, chosen.format, only or ()))
    chosen.facts["wheels"] = wheel_facts(rel, chosen.command, host, wheel_compute)
    evidence = rel.provenance(wheel_compute, f"{machine.os}-{arch}")
    chosen.facts["build"] = {
        "kind": evidence.kind,
        "source": evidence.source,
        **({"confirm": evidence.confirm} if evidence.confirm else {}),
    }
    assumed = assumed_tags(rel, wheel_compute, chosen.command, host, moved=moved)
    if assumed:
        chosen.notes.append(assumed)
    here = assumed_from_here(machine)
    if here:
        chosen.notes.append(assumed_host(here, machine.os))
    return chosen


def _with_a_build(
    newest: Release, machine: Probe, arch: str, package: str, host: wheels.Host, notes: list[str]
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
        for rel in newest_first():
            if rel.key >= newest.key or wheels.refusal(rel.version, host) is not None:
                continue
            try:
                _accelerated(rel, machine, arch, package)
            except SelectionError:
                continue
            notes.append(no_build_here(newest, rel, package, host, facts.listing().where))
            return rel
        raise


def _installable(rel: Release, spec: str, host: wheels.Host, notes: list[str]) -> Release:
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
        notes.append(inferred_wheels(rel, host, inferred))
        return rel
    newest = wheels.newest(host)
    if rel.nightly:
        why = nightly_refusal(checked, why)
    if spec == "stable" and newest is not None:
        notes.append(stable_moved(why, newest))
        return release(newest)
    raise not_installable(
        why,
        newest,
        next(iter(facts.releases)),
        list(facts.releases)[-1],
        EMULATES.get((host.os, host.arch)),
        wheels.other_pythons(host) if newest is None and host.python else [],
    )


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


def _accelerated(rel: Release, machine: Probe, arch: str, package: str) -> tuple[Selection, list[Rejection]]:
    """What auto mode makes of ``rel`` on ``machine``, worked out aside: its compute and reasons, and the
    builds it passed over."""
    trial = Selection(
        command="",
        compute="cpu",
        release=rel.version,
        os=machine.os,
        arch=arch,
        package=package,
        format="pinned",
        verified=True,
        reasons=[],
        rejected=[],
        notes=[],
        facts={},
    )
    passed: list[Rejection] = []
    return trial._replace(compute=_auto(rel, machine, arch, package, trial, passed)), passed


def _accelerated_release(
    newest: Release, machine: Probe, arch: str, package: str, host: wheels.Host, notes: list[str]
) -> Release:
    """For ``stable``: the newest release that installs here and runs on the machine's GPU; where none
    does, ``newest`` (its CPU build), with a note saying why. Walks back only as far as it must."""
    first, passed = _accelerated(newest, machine, arch, package)
    if first.compute != "cpu":
        return newest
    why = no_gpu_build(passed, first.reasons[-1])
    need = _driver_need(newest, machine, arch, package)
    skipped: list[str] = []  # builds on the way back that would have been tried, were their kernels on record
    for rel in newest_first():
        if rel.key >= newest.key or wheels.refusal(rel.version, host) is not None:
            continue
        try:
            trial, tried = _accelerated(rel, machine, arch, package)
        except SelectionError:
            continue  # nothing of this release for this package here (no conda packages, say)
        # Falling back is worth it only for a build known to run: ROCm builds without a recorded gfx list are not.
        if trial.compute != "cpu" and not (
            build(trial.compute).kind == "rocm" and machine.gfx and vendors.load().rocm_arches(trial.compute) is None
        ):
            notes.append(
                older_mac_release(rel, newest, why) if machine.os == "macos" else older_release(rel, newest, why, need)
            )
            notes.extend(skipped)
            return rel
        skipped += [skipped_unrecorded(rel, r.build, r.detail) for r in tried if r.cause == "unrecorded"]
    kernel_less = _kernel_less(machine, arch, package, host)
    unserved = [g for g in machine.gfx if not any(g in a for a in vendors.load().rocm.values())]
    notes.append(cpu_fallback(newest, why, need, kernel_less, unserved))
    notes.extend(skipped)
    return newest


def _kernel_less(machine: Probe, arch: str, package: str, host: wheels.Host) -> list[str]:
    """The NVIDIA GPUs' architectures that no CUDA build of a release that installs here has kernels
    for, whatever the driver."""
    found = []
    for cc in machine.capabilities:
        alone = machine._replace(driver="9999", gpus=tuple(g for g in machine.gpus if g.capability == cc))
        if not any(
            build(compute).kind == "cuda" and _cuda_rejection(rel, alone, compute) is None
            for rel in newest_first()
            if wheels.refusal(rel.version, host) is None
            for compute in answerable(rel, computes(rel, machine.os, arch, package), machine.os, arch)
        ):
            found.append(arch_of_capability(parse_capability(cc)))
    return found


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
    """Each release that installs here and has a CUDA build this GPU and driver run (with that build),
    newest first, each series read only when reached."""
    for rel in newest_first():
        if wheels.refusal(rel.version, host) is not None:
            continue
        # The build that release's own answer would name: its newest CUDA that runs here and whose index
        # tags (where recorded) install here.
        compute = next(
            (
                c
                for c in _cudas(answerable(rel, computes(rel, machine.os, arch, package), machine.os, arch))
                if _cuda_rejection(rel, machine, c) is None and wheels.build_refusal(rel.version, c, host) is None
            ),
            None,
        )
        if compute is not None:
            yield rel, compute


def _auto(rel: Release, machine: Probe, arch: str, package: str, out: Selection, passed: list[Rejection]) -> str:
    """The build auto mode picks, its reason in ``out``; the builds passed over on the way in ``passed``.
    Only published builds: a build known by inference is answered only when asked for."""
    every = computes(rel, machine.os, arch, package)
    available = answerable(rel, every, machine.os, arch)
    if machine.driver:  # a listed build left out of the default answer only for want of its kernel list
        passed.extend(
            Rejection(c, "unrecorded", release=rel.version, detail=rel.provenance(c).source)
            for c in _cudas(every)
            if unrecorded(rel, c) and _cuda_rejection(rel, machine, c) is None
        )
    if machine.os == "macos":
        if machine.rosetta or (machine.arch == "arm64" and machine.python_arch == "x86_64"):
            out.reasons.append(rosetta_reason())
        if not available:
            raise unavailable(rel, machine.os, arch, package, "cpu", wheels.host_of(machine, arch))
        need = mps_macos(rel) if available[0] == "mps" else None
        if need and machine.os_version and version_tuple(machine.os_version) < version_tuple(need.macos):
            out.reasons.append(mps_too_old(rel, need, machine.os_version))
            return "cpu"
        out.reasons.append(mac_reason(available[0]))
        return available[0]
    cudas = _cudas(available)
    for candidate in cudas:
        # A build whose index tags are recorded is checked against them (2.6.0's cu126 needs glibc 2.28).
        why = _cuda_rejection(rel, machine, candidate) or _install_rejection(
            rel, candidate, wheels.host_of(machine, arch)
        )
        if why:
            passed.append(why)
            branch = branch_floor(machine, candidate)
            if branch and branch not in out.notes:
                out.notes.append(branch)
            continue
        out.reasons.append(cuda_reason(rel, machine, candidate))
        return candidate
    vendor = _vendor_auto(rel, machine, arch, package, available, out, passed)
    if vendor is not None and build(vendor).kind in ("rocm", "xpu"):
        return vendor
    if "cpu" not in available:
        raise unavailable(rel, machine.os, arch, package, "cpu", wheels.host_of(machine, arch))
    if vendor is not None:
        out.reasons.append(vendor)
    elif cudas and machine.driver:
        out.reasons.append(cpu_reason("no cuda fits", machine))
    elif machine.driver or (available == ["cpu"] and machine.sources.get("driver") != "--no-gpu"):
        # This release has no GPU build here at all (Windows on Arm, Linux aarch64 before 2.6): no driver or GPU
        # given would change the answer, and one given goes unused.
        out.reasons.append(no_cuda_build(rel, wheels.place(wheels.host_of(machine, arch)), bool(machine.driver)))
    elif machine.sources.get("driver") == "--no-gpu":
        out.reasons.append(cpu_reason("no gpu", machine))
    elif another_machine(machine):
        # The probe's findings (a container without GPUs, WSL) are this host's, not the machine asked about.
        out.reasons.append(cpu_reason("not given", machine))
    else:
        out.reasons.append(cpu_reason("no driver", machine))
    return "cpu"


def _cudas(available: list[str]) -> list[str]:
    """The CUDA builds among ``available``, newest CUDA first: the order auto mode tries them in."""
    return builds.newest_first(available, "cuda")


def _install_rejection(rel: Release, compute: str, host: wheels.Host) -> Rejection | None:
    why = wheels.build_refusal(rel.version, compute, host)
    return Rejection(compute, "install", detail=why) if why else None


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
    for cc in machine.capabilities:
        generation = drivers.load().generation(cc)
        if generation is not None and generation.published and not generation.allows(machine.driver, machine.os):
            return Rejection(
                compute,
                "gpu floor",
                arches=_sm([cc]),
                driver=machine.driver,
                floor=str(generation.floor(machine.os)),
                detail=generation.name,
            )
    need = drivers.load().requirement(f"{cuda[0]}.{cuda[1]}", machine.os)
    if not need.allows(machine.driver):
        return Rejection(compute, "driver floor", driver=machine.driver, floor=str(need.floor), cuda=cuda)
    return None


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
    rel: Release, machine: Probe, arch: str, package: str, available: list[str], out: Selection, passed: list[Rejection]
) -> str | None:
    """An AMD or Intel GPU's build (its compute), or why it gets none (a "cpu: ..." reason), or None."""
    facts = vendors.load()
    if machine.amd_gpus or machine.rocm:
        where = machine.sources.get("amd_gpus", "/opt/rocm/.info/version")
        rocms = builds.newest_first(available, "rocm")
        if machine.os != "linux" or package == "conda" or not rocms:
            if machine.os == "linux":
                _other_rocm_release(rel, machine, arch, out)
            return no_rocm_build(rel, machine, arch, package, where)
        for candidate in rocms:
            missing = _rocm_missing(machine, candidate)
            if missing:
                passed.append(
                    Rejection(candidate, "no kernels", arches=tuple(missing), detail=facts.rocm_sources[candidate])
                )
                continue
            # As for CUDA: a build whose index tags are recorded is checked against them.
            installs = _install_rejection(rel, candidate, wheels.host_of(machine, arch))
            if installs:
                passed.append(installs)
                continue
            left = facts.rocm_missing(machine.amd_gpus, candidate)[1]
            if left:
                out.notes.append(facts.hidden_note(machine.amd_gpus, left, candidate))
            out.reasons.append(rocm_reason(rel, machine, candidate, where, left))
            return candidate
        _other_rocm_release(rel, machine, arch, out)
        out.notes.extend(rocm_hints(machine, rocms[0]))
        return no_rocm_kernels(rel, machine, where)
    if machine.intel_gpus:
        where = machine.sources.get("intel_gpus", "probe")
        served, unserved = _intel_served(machine)
        if not served:
            return intel_unsupported(unserved, where)
        if unserved:
            out.notes.append(intel_left_out(unserved, served))
        if not xpu_builds(rel, machine.os, arch, package):
            return no_xpu_build(rel, machine, arch, package, served, where)
        if not rel.answerable("xpu", f"{machine.os}-{arch}"):
            return xpu_unconfirmed(rel, served, where)
        out.reasons.append(xpu_reason(rel, machine, arch, served, where))
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
            for r in newest_first()
            if r.version != rel.version
            and wheels.refusal(r.version, host) is None  # one that installs here, not just any
            for c in reversed(answerable(r, computes(r, machine.os, arch, "pip"), machine.os, arch))
            if build(c).kind == "rocm" and facts.rocm_arches(c) is not None and not _rocm_missing(machine, c)
        ),
        None,
    )
    if found:
        out.notes.append(other_rocm_release(*found, machine))
