"""What this machine is, read without torch: OS, chip, Python arch, NVIDIA
driver and GPUs, AMD GPUs (``amd``), Intel GPUs (``intel``), ROCm, WSL, containers.

Each fact carries the source it was read from, so ``install-cmd --explain``
can say where an answer came from. The parsers are pure functions over the
text of ``/proc/driver/nvidia/version``, ``nvidia-smi`` and ``sysctl`` so
they are tested on recorded outputs (``tests/resources/``).
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kitbench._files import read_small
from kitbench._numbers import is_whole
from kitbench.errors import UsageError
from kitbench.machine.probe import amd, intel, python
from kitbench.machine.probe.amd import AmdGpu
from kitbench.machine.probe.intel import IntelGpu
from kitbench.machine.versions import format_capability, parse_capability, parse_driver

_PROC_DRIVER = Path("/proc/driver/nvidia/version")
# Where /proc/driver/nvidia is hidden (some container runtimes) the module still names its version here.
_SYS_DRIVER = Path("/sys/module/nvidia/version")
# WSL 2 has no NVIDIA kernel module: the Windows driver exposes its nvidia-smi here, not always on PATH.
_WSL_SMI = "/usr/lib/wsl/lib/nvidia-smi"
# A pattern, compiled by re when first searched: only a machine with NVIDIA's kernel module has the file it reads.
_NVRM = r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)\s"
_ARCH_ALIASES = {
    "amd64": "x86_64",
    "x64": "x86_64",
    "i386": "x86",
    "i686": "x86",
    "arm64": "arm64",
    "aarch64": "aarch64",
}
_SMI_FIELDS = "index,name,compute_cap,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max"


class Gpu(NamedTuple):  # not a dataclass: see Probe
    index: int  # type: ignore[assignment]  # tuple.index: never asked of a GPU
    name: str
    capability: str | None  # "8.6"; None when the driver cannot say (pre-510 nvidia-smi)
    memory_mib: int | None
    pcie_gen: int | None = None  # the link's maximum, not its idle (down-clocked) state
    pcie_width: int | None = None

    @property
    def link(self) -> str | None:
        return f"PCIe {self.pcie_gen} x{self.pcie_width}" if self.pcie_gen and self.pcie_width else None


class Probe(NamedTuple):
    """The machine facts; ``sources`` maps a field name to where it was read (a named tuple, as its GPUs are:
    "Start-up" in docs/architecture.md)."""

    os: str  # linux | macos | windows
    os_version: str
    arch: str  # the machine's: x86_64 | aarch64 | arm64
    python_arch: str  # the interpreter's (differs under Rosetta)
    python_version: str
    rosetta: bool
    wsl: bool
    container: bool
    driver: str | None
    gpus: tuple[Gpu, ...]
    rocm: str | None
    sources: dict[str, str]
    amd_gpus: tuple[AmdGpu, ...] = ()
    intel_gpus: tuple[IntelGpu, ...] = ()
    libc: str | None = None  # glibc | musl (Linux); None where unknown
    libc_version: str | None = None
    gpu_doubt: str | None = None  # why the GPU list is unconfirmed (its source was not all sound), if it is

    @property
    def capabilities(self) -> tuple[str, ...]:
        """The NVIDIA GPUs' compute capabilities, each once (eight H100s are one sm_90 to a wheel)."""
        return tuple(dict.fromkeys(g.capability for g in self.gpus if g.capability))

    @property
    def gfx(self) -> tuple[str, ...]:
        """The AMD GPUs' architectures, each once (a gfx the kernel could not name is left out)."""
        return tuple(dict.fromkeys(g.gfx for g in self.amd_gpus if g.gfx))


def as_dict(machine: Probe) -> dict[str, Any]:
    """The facts as `kitbench probe --json` writes them: each GPU an object of its own fields."""
    return {
        **machine._asdict(),
        "gpus": [g._asdict() for g in machine.gpus],
        "sources": dict(machine.sources),
        "amd_gpus": [g._asdict() for g in machine.amd_gpus],
        "intel_gpus": [g._asdict() for g in machine.intel_gpus],
    }


def normalize_arch(name: str, os_name: str) -> str:
    arch = _ARCH_ALIASES.get(name.lower(), name.lower())
    # Linux calls 64-bit Arm aarch64, macOS calls it arm64; keep each OS's word. Windows says ARM64 and its
    # wheels win_arm64: kitbench calls it aarch64 there (wheels.platform reads win_arm64 so).
    if arch in ("arm64", "aarch64"):
        return "arm64" if os_name == "macos" else "aarch64"
    return arch


def parse_proc_driver(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version``, if any."""
    match = re.search(_NVRM, text)
    return match.group(1) if match else None


def parse_sys_driver(text: str) -> str | None:
    """The driver version in ``/sys/module/nvidia/version`` (the bare version string), if any."""
    version = text.strip()
    return version if re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", version) else None


def no_driver_reason(*, container: bool, wsl: bool) -> str:
    """Why no NVIDIA driver is visible, in the words that point at the usual fix."""
    if container:
        return "no NVIDIA driver found (inside a container started without GPUs: docker run --gpus all)"
    if wsl:
        return (
            "no NVIDIA driver found (WSL 2 uses the Windows NVIDIA driver: install it on Windows, "
            f"never inside WSL; its nvidia-smi is {_WSL_SMI})"
        )
    return "no NVIDIA driver found"


def parse_nvidia_smi(text: str) -> tuple[str | None, tuple[Gpu, ...], tuple[str, ...]]:
    """Parse ``nvidia-smi --query-gpu=<_SMI_FIELDS> --format=csv,noheader,nounits`` (also the five-field
    form without the PCIe link): the driver, the GPUs, and the lines that are no GPU's. A line is kept
    only when each field is what nvidia-smi puts there (``[N/A]`` where it cannot say: older drivers'
    compute_cap)."""
    gpus: list[Gpu] = []
    driver: str | None = None
    strange: list[str] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        gpu = _smi_gpu(parts) if len(parts) in (5, 7) else None
        if gpu is None:
            if line.strip():
                strange.append(line.strip())
            continue
        gpus.append(gpu)
        driver = driver or parts[4]
    return driver, tuple(gpus), tuple(strange)


def _smi_gpu(parts: list[str]) -> Gpu | None:
    index, name, cap, memory, drv = parts[:5]
    if (
        not is_whole(index)
        or not name
        or not re.fullmatch(r"[0-9]+(\.[0-9]+)*", drv)
        or not (is_whole(memory) or memory.startswith("["))
    ):
        return None
    capability = None
    if not cap.startswith("["):
        try:
            capability = format_capability(parse_capability(cap))
        except UsageError:
            return None
    gen, width = (int(p) if is_whole(p) else None for p in (parts[5:] or ["", ""]))
    return Gpu(int(index), name, capability, int(memory) if is_whole(memory) else None, gen, width)


# What a GPU list's source says when nvidia-smi's answer was not all sound (its words; the value is gpu_doubt).
UNCONFIRMED = "; unconfirmed: "
_NO_GPU = "--no-gpu"  # the source of every GPU fact where the question said there is none


def _smi_doubt(returncode: int, stderr: str, gpus: tuple[Gpu, ...], strange: tuple[str, ...]) -> str | None:
    """Why nvidia-smi's GPU list cannot be taken as the whole truth, or None when it can."""

    def shown(line: str) -> str:
        return repr(line[:80] + ("..." if len(line) > 80 else ""))

    said = next((line.strip() for line in stderr.splitlines() if line.strip()), None) or (
        strange[0] if strange else None
    )
    if returncode != 0:
        return (
            f"nvidia-smi exited {returncode}"
            + (f": {shown(said)}" if said else "")
            + (f"; {len(gpus)} GPU line(s) kept" if gpus else "")
        )
    if strange:
        return f"{len(strange)} line(s) of nvidia-smi's answer are no GPU's, e.g. {shown(strange[0])}" + (
            f"; {len(gpus)} GPU line(s) kept" if gpus else "; no GPU line in it"
        )
    return None if gpus else "nvidia-smi listed no GPU"


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl key1 key2`` output (``key: value`` lines) as a dict."""
    result = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            result[key.strip()] = value.strip()
    return result


def _run(argv: Sequence[str], timeout: float = 5.0) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    # Imported here: most machines have no program to ask, and install-cmd's start-up is spared both.
    import subprocess

    from kitbench import _proc

    try:
        done = _proc.run(argv, timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _run_any(argv: Sequence[str], timeout: float = 5.0) -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) of a program that may fail and still say something; None if it cannot run."""
    import subprocess

    from kitbench import _proc

    try:
        done = _proc.run(argv, timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode, done.stdout, done.stderr


def _os_name() -> str:
    return {"darwin": "macos", "win32": "windows"}.get(sys.platform, "linux")


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    cgroup = read_small(Path("/proc/1/cgroup")) or ""
    return any(word in cgroup for word in ("docker", "containerd", "kubepods", "libpod"))


def _rocm_version() -> str | None:
    text = read_small(Path("/opt/rocm/.info/version"))
    return text.strip().split("-")[0] if text else None


# uv's override of the NVIDIA driver version (crates/uv-static UV_CUDA_DRIVER_VERSION), honoured the same way.
CUDA_DRIVER_VARIABLE = "UV_CUDA_DRIVER_VERSION"


def probe() -> Probe:
    """Read this machine. Fast: no torch, and ``nvidia-smi`` only when a driver is loaded."""
    os_name = _os_name()
    sources: dict[str, str] = {
        "os": "sys.platform",
        "arch": "platform.machine()",
        "python_arch": "sysconfig platform of the interpreter",
    }
    if hasattr(os, "uname"):
        # What platform.machine() and platform.release() return here, without platform's import (it compiles
        # a dozen patterns), which install-cmd's start-up would pay. Windows has no uname.
        machine, os_version = os.uname().machine, os.uname().release
    else:
        import platform

        machine, os_version = platform.machine(), platform.release()
    python_arch = normalize_arch(machine, os_name)
    arch = python_arch
    rosetta = False
    if os_name == "macos":
        import platform

        os_version = platform.mac_ver()[0] or os_version
        sysctl = parse_sysctl(_run(["sysctl", "hw.optional.arm64", "sysctl.proc_translated"]) or "")
        rosetta = sysctl.get("sysctl.proc_translated") == "1"
        if sysctl.get("hw.optional.arm64") == "1":
            arch = "arm64"
            sources["arch"] = "sysctl hw.optional.arm64"
    elif os_name == "windows":
        import platform

        os_version = platform.version()
        arch = normalize_arch(os.environ.get("PROCESSOR_ARCHITEW6432") or machine, os_name)
    version_text = read_small(Path("/proc/version")) or ""
    wsl = "microsoft" in version_text.lower()

    driver = None
    for path, parse in ((_PROC_DRIVER, parse_proc_driver), (_SYS_DRIVER, parse_sys_driver)):
        text = read_small(path)
        driver = parse(text) if text else None  # most machines have neither file: no pattern to compile
        if driver:
            sources["driver"] = str(path)
            break
    gpus: tuple[Gpu, ...] = ()
    gpu_doubt = None
    smi_path = shutil.which("nvidia-smi") or (_WSL_SMI if wsl and Path(_WSL_SMI).is_file() else None)
    smi = _run_any([smi_path, f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"]) if smi_path else None
    if smi is not None:
        # Lines that are a GPU's are kept even beside garbage or a failure (nvidia-smi exits non-zero
        # when one GPU of several is lost); what was not sound is said, never dropped in silence.
        smi_driver, gpus, strange = parse_nvidia_smi(smi[1])
        if smi_driver and not driver:
            driver = smi_driver
            sources["driver"] = smi_path if smi_path == _WSL_SMI else "nvidia-smi"
        gpu_doubt = _smi_doubt(smi[0], smi[2], gpus, strange)
        sources["gpus"] = "nvidia-smi --query-gpu" + (UNCONFIRMED + gpu_doubt if gpu_doubt else "")
    driver_override = os.environ.get(CUDA_DRIVER_VARIABLE, "").strip()
    if driver_override:
        parse_driver(driver_override, CUDA_DRIVER_VARIABLE)  # a malformed value is refused, not ignored
        driver = driver_override
        sources["driver"] = CUDA_DRIVER_VARIABLE
    # The host's ROCm install only; a ROCm-in-wheel (torch's bundled HIP runtime) is no host fact.
    rocm = _rocm_version()
    if rocm:
        sources["rocm"] = "/opt/rocm/.info/version"
    sources["python_version"] = f"the running interpreter ({sys.executable})"
    sources["os_version"] = "platform.mac_ver()" if os_name == "macos" else "platform"
    libc, libc_version = None, None
    if os_name == "linux":
        libc, libc_version, sources["libc"] = python.libc()
    amd_gpus: tuple[AmdGpu, ...] = ()
    intel_gpus: tuple[IntelGpu, ...] = ()
    if os_name == "linux":
        amd_gpus, where = amd.detect(env=dict(os.environ), run=_run)
        if where:
            sources["amd_gpus"] = where
        intel_gpus, where = intel.detect()
        if where:
            sources["intel_gpus"] = where
    elif os_name == "windows":
        # The XPU build runs on Windows too; uv reads its display adapters the same way.
        intel_gpus, where = intel.detect_windows()
        if where:
            sources["intel_gpus"] = where
    return Probe(
        os=os_name,
        os_version=os_version,
        arch=arch,
        python_arch=python_arch,
        python_version=python.running(),
        rosetta=rosetta,
        wsl=wsl,
        container=_in_container(),
        driver=driver,
        gpus=gpus,
        rocm=rocm,
        sources=sources,
        amd_gpus=amd_gpus,
        intel_gpus=intel_gpus,
        libc=libc,
        libc_version=libc_version,
        gpu_doubt=gpu_doubt,
    )


# What a machine is taken to have when the question names another OS than this host's
# and says nothing more: the most common machine each OS's wheels are built for.
DEFAULT_ARCH = {"linux": "x86_64", "windows": "x86_64", "macos": "arm64"}


# The foreign interpreters an OS runs on a machine: Rosetta 2 on Apple silicon, Windows 11's x64
# emulation on Arm. Elsewhere (Linux without qemu-user, Intel Macs) only the machine's own arch runs.
EMULATES = {("macos", "arm64"): "x86_64", ("windows", "aarch64"): "x86_64"}

# A GPU flag on macOS describes a machine no PyTorch build is for: (the OSes it answers for, the
# build macOS lacks, why). Sources: NVIDIA's CUDA 10.2 release notes (its last macOS release);
# envs/vendors.yaml (ROCm: Linux only; XPU: Linux and Windows).
_NVIDIA_ON_MAC = ("Linux or Windows", "CUDA", "NVIDIA's drivers for macOS ended with CUDA 10.2 (macOS 10.13)")
_GPU_OSES = {
    "--driver": _NVIDIA_ON_MAC,
    "--gpu-cc": _NVIDIA_ON_MAC,
    "--gpu-gfx": ("Linux", "ROCm", "PyTorch's ROCm builds are for Linux only"),
    "--intel-gpu": ("Linux or Windows", "XPU", "PyTorch's XPU builds are for Linux and Windows only"),
}


def _shipped(capability: tuple[int, int]) -> tuple[int, int]:
    """A compute capability given by hand must be one that a GPU has (envs/drivers.yaml)."""
    from kitbench.machine import drivers

    known = drivers.load().capabilities
    if capability not in known:
        near = [format_capability(c) for c in known if c[0] == capability[0]]
        raise UsageError(
            f"no NVIDIA GPU has compute capability {format_capability(capability)}",
            hint=(f"those of {capability[0]}.x are {', '.join(near)}; " if near else "")
            + "nvidia-smi --query-gpu=name,compute_cap shows a GPU's (NVIDIA's list: "
            "https://developer.nvidia.com/cuda-gpus)",
        )
    return capability


def another_machine(machine: Probe) -> bool:
    """Whether ``machine`` describes another machine than this host: its OS, C library, chip or OS version given
    (kitbench install-cmd's flags), so what the probe found here is not its."""
    return any(where in ("--os", "--glibc", "--arch", "--os-version") for where in machine.sources.values())


def said_no_gpu(machine: Probe) -> bool:
    """Whether the question said the machine has no GPU (``--no-gpu``), rather than none being found or given."""
    return machine.sources.get("driver") == _NO_GPU


def assumed_from_here(machine: Probe) -> dict[str, str]:
    """For another machine, what was taken from this host because it was not given: its Python's version and
    (Linux) its C library, as ``{fact: value}``; empty for this host itself. Another OS takes neither: its
    Python is unknown (empty) and constrains nothing, so nothing of this host's is assumed for it."""
    if not another_machine(machine):
        return {}
    found = {}
    if machine.python_version and not machine.sources.get("python_version", "").startswith("--"):
        found["Python"] = machine.python_version
    if (
        machine.os == "linux"
        and machine.libc
        and machine.libc_version
        and not machine.sources.get("libc", "").startswith("--")
    ):
        found[machine.libc] = machine.libc_version
    return found


def override(
    base: Probe,
    *,
    os: str | None = None,
    arch: str | None = None,
    python_arch: str | None = None,
    driver: str | None = None,
    gpu_capabilities: Sequence[str] = (),
    no_gpu: bool = False,
    gpu_gfx: Sequence[str] = (),
    intel_gpu: bool | str | Sequence[bool | str] = False,
    python_path: str | None = None,
    python_version: str | None = None,
    glibc: str | None = None,
    os_version: str | None = None,
) -> Probe:
    """Answer for another machine: replace probed facts with given ones.

    Naming another OS than the host's answers for another machine altogether: none
    of this host's facts (arch, driver, GPUs, ROCm, WSL, container) carry over; each
    takes that OS's default unless given, and ``sources`` says which is which.
    """
    # --intel-gpu once per GPU: True for one whose device id is not known, else its id.
    intels = [g for g in ([intel_gpu] if isinstance(intel_gpu, (bool, str)) else intel_gpu) if g is not False]
    flags = [
        flag
        for flag, value in (
            ("--driver", driver is not None),
            ("--gpu-cc", gpu_capabilities),
            ("--gpu-gfx", gpu_gfx),
            ("--intel-gpu", intels),
        )
        if value
    ]
    given = flags[0] if flags else None
    if no_gpu and given:
        raise UsageError("--no-gpu contradicts " + given, hint="give either --no-gpu or the GPU's facts, not both")
    if (os or base.os) == "macos" and given:
        # A machine PyTorch builds nothing for: its answer would be mps or cpu with the GPU ignored in silence.
        oses, build, why = _GPU_OSES[given]
        raise UsageError(
            f"{given} answers for a {oses} machine: PyTorch has no {build} build for macOS",
            hint=f"{why}; a Mac gets mps (Apple silicon) or cpu: drop {' and '.join(flags)}, or answer "
            f"for --os {oses.split()[0].lower()}",
        )
    sources = dict(base.sources)
    changes: dict[str, object] = {}
    target_os = os or base.os
    if os is not None:
        changes["os"] = os
        sources["os"] = "--os"
        if os != base.os:
            default = f"default for {os} (not this host)"
            changes.update(
                os_version="",
                arch=DEFAULT_ARCH[os],
                python_arch=DEFAULT_ARCH[os],
                driver=None,
                gpus=(),
                rocm=None,
                wsl=False,
                container=False,
                amd_gpus=(),
                intel_gpus=(),
            )
            sources.update(
                {
                    key: default
                    for key in (
                        "os_version",
                        "arch",
                        "python_arch",
                        "driver",
                        "gpus",
                        "rocm",
                        "wsl",
                        "container",
                        "amd_gpus",
                        "intel_gpus",
                    )
                }
            )
            # That machine's Python and C library are unknown: they constrain nothing unless given.
            changes.update(python_version="", libc=None, libc_version=None)
            sources.update(
                python_version="unknown for that machine (give --python-version)",
                libc="unknown for that machine (give --glibc)",
            )
    if arch is not None:
        changes["arch"] = normalize_arch(arch, target_os)
        sources["arch"] = "--arch"
        if python_arch is None:
            changes["python_arch"] = changes["arch"]
            sources["python_arch"] = "--arch"
    if python_arch is not None:
        changes["python_arch"] = normalize_arch(python_arch, target_os)
        sources["python_arch"] = "--python-arch"
    if os is not None or arch is not None or python_arch is not None:
        final_arch = str(changes.get("arch", base.arch))
        final_py = str(changes.get("python_arch", base.python_arch))
        if final_py != final_arch and EMULATES.get((target_os, final_arch)) != final_py:
            raise UsageError(
                f"an {final_py} Python cannot run on {target_os} {final_arch}",
                hint="the only foreign Pythons that run are x86_64 ones on arm64 macOS (Rosetta 2) "
                "and on arm64 Windows (its x64 emulation); leave --python-arch out for a "
                "native one",
            )
        changes["rosetta"] = target_os == "macos" and final_arch == "arm64" and final_py == "x86_64"
    if no_gpu:
        changes.update(driver=None, gpus=(), rocm=None, amd_gpus=(), intel_gpus=())
        sources["driver"] = sources["gpus"] = sources["amd_gpus"] = sources["intel_gpus"] = _NO_GPU
    if driver is not None:
        driver = driver.strip()
        parse_driver(driver, "--driver")
        changes["driver"] = driver
        sources["driver"] = "--driver"
    if gpu_capabilities:
        caps = [format_capability(_shipped(parse_capability(c))) for c in gpu_capabilities]
        changes["gpus"] = tuple(Gpu(i, "(given)", c, None) for i, c in enumerate(caps))
        sources["gpus"] = "--gpu-cc"
        if changes.get("driver", base.driver) is None:
            # Which CUDA builds run is the driver's to say: without one the answer could only be the CPU build.
            raise UsageError(
                "--gpu-cc describes an NVIDIA GPU, but no NVIDIA driver was "
                + ("found here" if "driver" not in sources else "given"),
                hint="add that machine's driver as nvidia-smi shows it, e.g. --driver 570.86.10",
            )
    if gpu_gfx:
        names = [name for given in gpu_gfx for name in amd.parse_gfx_list(given, "--gpu-gfx")]
        changes["amd_gpus"] = tuple(AmdGpu(i, name, None) for i, name in enumerate(names))
        sources["amd_gpus"] = "--gpu-gfx"
    if intels:
        # --intel-gpu alone: an Intel GPU whose device id is not known; with an id, that GPU.
        changes["intel_gpus"] = tuple(
            IntelGpu("(given)", intel.parse_device_id(g) if isinstance(g, str) and g else None) for g in intels
        )
        sources["intel_gpus"] = "--intel-gpu"
    _interpreter(
        changes,
        sources,
        target_os,
        python_path=python_path,
        python_version=python_version,
        glibc=glibc,
        os_version=os_version,
    )
    if sources.get("gpus") != base.sources.get("gpus"):
        changes["gpu_doubt"] = None  # the GPUs given (or none) replace the list the doubt was about
    return base._replace(sources=sources, **changes)  # type: ignore[arg-type]


def _interpreter(
    changes: dict[str, object],
    sources: dict[str, str],
    target_os: str,
    *,
    python_path: str | None,
    python_version: str | None,
    glibc: str | None,
    os_version: str | None,
) -> None:
    """The Python, C library and macOS version overrides of ``override``."""
    if python_path is not None and python_version is not None:
        raise UsageError("--python contradicts --python-version", hint="give the interpreter or its version")
    if python_path is not None:
        version, machine, (libc_name, libc_version) = python.interpreter(python_path)
        changes["python_version"] = version
        changes["python_arch"] = normalize_arch(machine, target_os)
        sources["python_version"] = sources["python_arch"] = f"--python {python_path}"
        if libc_name == "glibc" and glibc is None:
            changes.update(libc="glibc", libc_version=libc_version)
            sources["libc"] = f"--python {python_path} (platform.libc_ver())"
    # macOS is named by its major version alone ("macOS 14"); Python and glibc by major.minor.
    for flag, value, pattern, example in (
        ("--python-version", python_version, r"[0-9]+\.[0-9]+(\.[0-9]+)?t?", "3.12"),
        ("--glibc", glibc, r"[0-9]+\.[0-9]+(\.[0-9]+)?", "2.35"),
        ("--os-version", os_version, r"[0-9]+(\.[0-9]+){0,2}", "14.5"),
    ):
        if value is not None and not re.fullmatch(pattern, value):
            raise UsageError(f"{flag} {value!r} is not a version", hint=f"e.g. {flag} {example}")
    if os_version is not None and "." not in os_version:
        os_version += ".0"
    if python_version is not None:
        changes["python_version"] = python_version
        sources["python_version"] = "--python-version"
    if glibc is not None:
        if target_os != "linux":
            raise UsageError("--glibc answers for a Linux machine", hint="add --os linux")
        changes.update(libc="glibc", libc_version=glibc)
        sources["libc"] = "--glibc"
    if os_version is not None:
        if target_os != "macos":
            # Only macOS's version decides which wheels install; elsewhere it would be ignored in silence.
            raise UsageError("--os-version answers for a macOS machine", hint="add --os macos")
        changes["os_version"] = os_version
        sources["os_version"] = "--os-version"
