from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kitbench.errors import UsageError
from kitbench.machine import probe


def test_nvidia_smi_several_gpus(resources: Path) -> None:
    driver, gpus = probe.parse_nvidia_smi((resources / "nvidia-smi/four-gpus.csv").read_text())[:2]
    assert driver == "535.104.05"
    assert [g.capability for g in gpus] == ["8.0", "8.0", "8.6", "6.0"]
    assert gpus[2].name == "NVIDIA GeForce RTX 3090" and gpus[2].memory_mib == 24576


def test_nvidia_smi_old_driver_without_compute_cap(resources: Path) -> None:
    driver, gpus = probe.parse_nvidia_smi((resources / "nvidia-smi/old-driver-no-cc.csv").read_text())[:2]
    assert driver == "450.80.02"
    assert gpus[0].capability is None


def test_nvidia_smi_failure_text_gives_nothing(resources: Path) -> None:
    assert probe.parse_nvidia_smi((resources / "nvidia-smi/failed.txt").read_text())[:2] == (None, ())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-version-proprietary.txt", "535.104.05"),
        ("nvidia-version-open.txt", "550.54.14"),
        ("nvidia-version-aarch64.txt", "580.65.06"),
        ("nvidia-version-h100.txt", "580.159.04"),
    ],
)
def test_proc_driver_version(resources: Path, name: str, expected: str) -> None:
    assert probe.parse_proc_driver((resources / "proc" / name).read_text()) == expected


def test_proc_driver_garbage() -> None:
    assert probe.parse_proc_driver("no driver here") is None


def test_sys_module_driver_version(resources: Path) -> None:
    # Recorded on the H100 machine whose /proc/driver/nvidia/version is nvidia-version-h100.txt.
    assert probe.parse_sys_driver((resources / "sys" / "nvidia-module-version.txt").read_text()) == "580.159.04"
    assert probe.parse_sys_driver("") is None
    assert probe.parse_sys_driver("580.159.04 extra") is None


@pytest.mark.parametrize(
    ("name", "arm64", "translated"),
    [("m2-native.txt", "1", "0"), ("m2-rosetta.txt", "1", "1"), ("intel-mac.txt", "0", None)],
)
def test_sysctl(resources: Path, name: str, arm64: str, translated: str | None) -> None:
    facts = probe.parse_sysctl((resources / "sysctl" / name).read_text())
    assert facts["hw.optional.arm64"] == arm64
    assert facts.get("sysctl.proc_translated") == translated


def test_arch_names_follow_the_os() -> None:
    assert probe.normalize_arch("AMD64", "windows") == "x86_64"
    assert probe.normalize_arch("arm64", "linux") == "aarch64"
    assert probe.normalize_arch("aarch64", "macos") == "arm64"


def test_a_windows_on_arm_machine_probed_with_its_native_python_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    """platform.machine() says ARM64 there: the probe reads aarch64 for the machine and its Python, and nothing
    downstream refuses it (its answer is the win_arm64 wheels PyTorch's index is recorded serving)."""
    import platform

    from kitbench.advice import selector

    monkeypatch.setattr(probe, "_os_name", lambda: "windows")
    monkeypatch.delattr(os, "uname")  # Windows has none: the probe asks platform there
    monkeypatch.setattr(platform, "machine", lambda: "ARM64")
    monkeypatch.setattr(platform, "version", lambda: "10.0.26100")
    monkeypatch.delenv("PROCESSOR_ARCHITEW6432", raising=False)
    monkeypatch.delenv(probe.CUDA_DRIVER_VARIABLE, raising=False)
    monkeypatch.setattr(probe.shutil, "which", lambda name: None)
    monkeypatch.setattr(probe, "read_small", lambda path, *args, **kwargs: None)
    monkeypatch.setattr(probe, "_rocm_version", lambda: None)
    monkeypatch.setattr(probe.intel, "detect_windows", lambda: ((), None))
    here = probe.probe()
    assert (here.os, here.arch, here.python_arch, here.driver) == ("windows", "aarch64", "aarch64", None)
    chosen = selector.select(here._replace(python_version="3.12.10"))
    assert chosen.command == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def test_probe_here_is_fast_and_torch_free() -> None:
    import subprocess
    import sys

    code = (
        "import sys, time; t = time.perf_counter(); from kitbench.machine.probe import probe; p = probe(); "
        "assert 'torch' not in sys.modules; print(p.os, time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] in ("linux", "macos", "windows")
    assert float(out.split()[1]) < 1.0


def _base() -> probe.Probe:
    return probe.Probe(
        os="linux",
        os_version="6.1",
        arch="x86_64",
        python_arch="x86_64",
        python_version="3.11.7",
        rosetta=False,
        wsl=False,
        container=False,
        driver=None,
        gpus=(),
        rocm=None,
        sources={},
    )


def test_override_answers_for_a_rosetta_mac() -> None:
    mac = probe.override(_base(), os="macos", arch="arm64", python_arch="x86_64")
    assert (mac.os, mac.arch, mac.python_arch, mac.rosetta) == ("macos", "arm64", "x86_64", True)
    assert mac.sources["python_arch"] == "--python-arch"


def test_override_gpus_and_driver() -> None:
    box = probe.override(_base(), driver="535.104.05", gpu_capabilities=["8.6", "sm_61"])
    assert box.driver == "535.104.05"
    assert box.capabilities == ("8.6", "6.1")
    assert probe.override(box, no_gpu=True).gpus == ()


def test_a_gpu_without_a_driver_is_refused_not_answered_with_the_cpu_build() -> None:
    """--gpu-cc alone cannot say which CUDA builds run; the CPU build with a note would read as a GPU answer."""
    with pytest.raises(UsageError, match="--gpu-cc describes an NVIDIA GPU, but no NVIDIA driver was given") as no:
        probe.override(_base(), os="windows", gpu_capabilities=["9.0"])
    assert no.value.hint is not None and "--driver" in no.value.hint
    assert probe.override(_base(), os="windows", driver="572.16", gpu_capabilities=["9.0"]).capabilities == ("9.0",)


def test_a_malformed_driver_is_refused_naming_where_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """UV_CUDA_DRIVER_VERSION=abc was never typed as --driver: the error says which it was; blanks around
    a sound version are dropped, not echoed into every note."""
    monkeypatch.setenv(probe.CUDA_DRIVER_VARIABLE, "abc")
    with pytest.raises(UsageError, match=r"malformed NVIDIA driver version 'abc' \(UV_CUDA_DRIVER_VERSION\)"):
        probe.probe()
    monkeypatch.setenv(probe.CUDA_DRIVER_VARIABLE, " 580.65.06 ")
    assert probe.probe().driver == "580.65.06"
    with pytest.raises(UsageError, match=r"'99999\.1' \(--driver\)") as refused:
        probe.override(_base(), driver="99999.1")
    assert refused.value.hint is not None and "at most 4 digits" in refused.value.hint
    assert probe.override(_base(), driver=" 570.86.10\n").driver == "570.86.10"


def test_override_refuses_malformed_values() -> None:
    with pytest.raises(UsageError):
        probe.override(_base(), driver="five hundred")
    with pytest.raises(UsageError):
        probe.override(_base(), gpu_capabilities=["8.66"])


def _driverless(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, proc_version: str) -> None:
    """This machine as one whose driver is visible only where a test puts it."""
    real_read = probe.read_small

    def read(path: Path) -> str | None:
        return proc_version if path == Path("/proc/version") else real_read(path)

    monkeypatch.setattr(probe, "read_small", read)
    monkeypatch.setattr(probe, "_PROC_DRIVER", tmp_path / "no-proc-driver")
    monkeypatch.setattr(probe, "_SYS_DRIVER", tmp_path / "no-sys-driver")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))


def test_probe_reads_the_driver_from_sysfs_when_procfs_hides_it(
    resources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driverless(monkeypatch, tmp_path, "Linux version 6.1.0")
    monkeypatch.setattr(probe, "_SYS_DRIVER", resources / "sys" / "nvidia-module-version.txt")
    found = probe.probe()
    assert (found.driver, found.sources["driver"]) == ("580.159.04", str(probe._SYS_DRIVER))


def test_probe_finds_wsl_nvidia_smi_off_path(resources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in that prints the recorded H100 answer; PATH will be empty, so it names cat by path.
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nexec {shutil.which('cat')} {resources / 'nvidia-smi' / 'h100-sxm.csv'}\n")
    _driverless(monkeypatch, tmp_path, "Linux version 5.15.153.1-microsoft-standard-WSL2")
    smi.chmod(0o755)
    monkeypatch.setattr(probe, "_WSL_SMI", str(smi))
    found = probe.probe()
    assert found.wsl and found.capabilities == ("9.0",)
    assert (found.driver, found.sources["driver"]) == ("580.159.04", str(smi))


def test_no_driver_reason_names_the_usual_fix() -> None:
    assert probe.no_driver_reason(container=False, wsl=False) == "no NVIDIA driver found"
    assert "docker run --gpus all" in probe.no_driver_reason(container=True, wsl=False)
    assert "install it on Windows" in probe.no_driver_reason(container=False, wsl=True)


@settings(max_examples=300)
@given(st.text(max_size=400))
def test_parsers_never_crash_on_arbitrary_text(text: str) -> None:
    probe.parse_proc_driver(text)
    probe.parse_sys_driver(text)
    probe.parse_sysctl(text)
    driver, gpus = probe.parse_nvidia_smi(text)[:2]
    assert driver is None or driver[0].isdigit()
    assert all(g.capability is None or "." in g.capability for g in gpus)


def test_nvidia_smi_with_pcie_link(resources: Path) -> None:
    _, gpus = probe.parse_nvidia_smi((resources / "nvidia-smi/with-pcie.csv").read_text())[:2]
    assert [g.link for g in gpus] == ["PCIe 5 x16", "PCIe 4 x8"]


def test_recorded_h100(resources: Path) -> None:
    # Recorded on a real H100 machine (tests/resources/nvidia-smi/h100-sxm.txt holds the whole capture).
    driver, gpus = probe.parse_nvidia_smi((resources / "nvidia-smi/h100-sxm.csv").read_text())[:2]
    assert driver == "580.159.04"
    assert [(g.name, g.capability, g.memory_mib, g.pcie_gen, g.pcie_width) for g in gpus] == [
        ("NVIDIA H100 80GB HBM3", "9.0", 81559, 5, 16)
    ]


def test_musl_loader_banner(resources: Path) -> None:
    # Recorded from /lib/ld-musl-x86_64.so.1 of Debian's musl 1.2.3 package (the loader Alpine ships).
    assert probe.python.parse_musl((resources / "musl/ld-musl-x86_64-1.2.3.txt").read_text()) == "1.2.3"
    assert probe.python.parse_musl("not a loader") is None


def test_musl_loader_is_run_for_its_banner(resources: Path, tmp_path: Path) -> None:
    # The loader prints its banner on stderr and exits 1; one that cannot run reads as no version.
    loader = tmp_path / "ld-musl-x86_64.so.1"
    loader.write_text(f"#!/bin/sh\ncat {resources / 'musl/ld-musl-x86_64-1.2.3.txt'} >&2\nexit 1\n")
    loader.chmod(0o755)
    assert probe.python._musl_version(str(loader)) == "1.2.3"
    assert probe.python._musl_version(str(tmp_path / "absent")) is None


def test_libc_of_this_machine_is_read_from_the_c_library_itself() -> None:
    import platform

    name, version, source = probe.python.libc()
    assert (name, version) == ("glibc", platform.libc_ver()[1])
    assert source == "os.confstr(CS_GNU_LIBC_VERSION)"
    found = probe.probe()
    assert (found.libc, found.libc_version, found.sources["libc"]) == (name, version, source)


def test_musl_is_found_by_its_loader_when_there_is_no_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    loader = "/lib/ld-musl-x86_64.so.1"
    if not Path(loader).exists():
        pytest.skip("no musl loader on this machine (Debian: apt-get install musl)")
    monkeypatch.setattr(probe.python.os, "confstr", lambda name: None)
    assert probe.python.libc() == ("musl", probe.python._musl_version(loader), loader)
    assert probe.python.libc()[1] is not None


def test_another_interpreter_is_asked_in_a_subprocess() -> None:
    import sys

    version, machine, (libc, _) = probe.python.interpreter(sys.executable)
    assert version == probe.python.running() and machine and libc == "glibc"
    found = probe.override(probe.probe(), python_path=sys.executable)
    assert found.sources["python_version"] == f"--python {sys.executable}"
    with pytest.raises(UsageError, match="cannot run --python"):
        probe.python.interpreter("/nonexistent/python")
    with pytest.raises(UsageError, match="did not answer as a Python"):
        probe.python.interpreter(shutil.which("true") or "/bin/true")


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("echo garbage; echo '{{{'", "did not answer as a Python interpreter"),
        ("head -c 10000000 /dev/zero", "did not answer as a Python interpreter"),
        ("exec sleep 60", "did not answer within 0.5 s"),
    ],
)
def test_a_python_that_is_none_is_refused_in_words(
    script: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its garbage is not taken for a version and an arch; a hang ends at the timeout, in one line."""
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(probe.python, "ASK_TIMEOUT_S", 0.5)
    with pytest.raises(UsageError, match=said) as refused:
        probe.python.interpreter(str(fake))
    assert "\n" not in refused.value.message and len(refused.value.message) < 200
    with pytest.raises(UsageError, match="--python is empty"):
        probe.python.interpreter("")


def test_a_free_threaded_interpreter_is_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import sysconfig

    plain = probe.python.running()
    assert not plain.endswith("t")
    monkeypatch.setattr(sys, "abiflags", "t", raising=False)
    assert probe.python.running() == plain + "t"
    # Where there are no ABI flags (Windows before 3.14), the build's own table says so.
    monkeypatch.delattr(sys, "abiflags")
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else None)
    assert probe.python.running() == plain + "t"
    # The interpreter asked in a subprocess reads the same variable.
    assert "Py_GIL_DISABLED" in probe.python._ASK


def test_a_virtual_environments_directory_is_taken_for_its_interpreter(tmp_path: Path) -> None:
    import sys

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    assert probe.python.interpreter(str(tmp_path))[0] == probe.python.running()
    with pytest.raises(UsageError, match="is a directory with no bin/python"):
        probe.python.interpreter(str(tmp_path / "bin"))


def test_python_glibc_and_macos_version_overrides() -> None:
    base = probe.probe()
    other = probe.override(base, os="linux", python_version="3.10", glibc="2.17")
    assert (other.python_version, other.libc, other.libc_version) == ("3.10", "glibc", "2.17")
    assert other.sources["python_version"] == "--python-version" and other.sources["libc"] == "--glibc"
    mac = probe.override(base, os="macos", os_version="13.6")
    assert (mac.os_version, mac.python_version, mac.libc) == ("13.6", "", None)
    with pytest.raises(UsageError, match="--glibc answers for a Linux machine"):
        probe.override(base, os="macos", glibc="2.35")
    with pytest.raises(UsageError, match="--os-version answers for a macOS machine"):
        probe.override(base, os="linux", os_version="13")
    with pytest.raises(UsageError, match="is not a version"):
        probe.override(base, python_version="three")
    with pytest.raises(UsageError, match="contradicts"):
        probe.override(base, python_path="python3", python_version="3.10")


@pytest.mark.parametrize(
    ("flags", "fact"),
    [
        ({"os": "macos", "os_version": "13"}, ("os_version", "13.0")),  # macOS is named by its major version
        ({"os": "macos", "os_version": "14.5"}, ("os_version", "14.5")),
        ({"python_version": "3.10.4"}, ("python_version", "3.10.4")),
        ({"python_version": "3.13t"}, ("python_version", "3.13t")),  # a free-threaded build
    ],
)
def test_versions_are_taken_as_people_write_them(flags: dict[str, str], fact: tuple[str, str]) -> None:
    assert getattr(probe.override(probe.probe(), **flags), fact[0]) == fact[1]


@pytest.mark.parametrize(
    ("flags", "example"),
    [
        ({"glibc": "abc"}, "--glibc 2.35"),
        ({"os": "macos", "os_version": "x"}, "--os-version 14.5"),
        ({"python_version": "3"}, "--python-version 3.12"),
    ],
)
def test_a_version_that_is_none_gets_an_example_of_its_own_kind(flags: dict[str, str], example: str) -> None:
    with pytest.raises(UsageError) as refused:
        probe.override(probe.probe(), **flags)
    assert refused.value.hint == f"e.g. {example}"


def test_a_hung_nvidia_smi_is_ended_where_there_are_no_process_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows has no os.killpg: a program that never answers is still ended at the timeout, and the
    probe goes on without it (its stand-in execs sleep, so ending the program ends all it started)."""
    import os
    import time

    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 60\n")
    smi.chmod(0o755)
    monkeypatch.delattr(os, "killpg")
    started = time.monotonic()
    assert probe._run([str(smi)], timeout=0.5) is None
    assert time.monotonic() - started < 10


GOOD_SMI = "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.159.04, 5, 16"


@pytest.mark.parametrize(
    ("lines", "code", "capabilities", "doubt"),
    [
        # Garbage beside a good line: the line is kept, the garbage said (it was dropped in silence).
        (
            [GOOD_SMI, "garbage here", "1, bogus, abc, 1, zzz", "\x1b[31mred"],
            0,
            ["9.0"],
            "3 line(s) of nvidia-smi's answer are no GPU's, e.g. 'garbage here'; 1 GPU line(s) kept",
        ),
        # A GPU lost beside a good one: nvidia-smi exits non-zero and still lists the other (it gave "none").
        (
            [GOOD_SMI, "Unable to determine the device handle for GPU 0000:41:00.0: Unknown Error"],
            15,
            ["9.0"],
            "nvidia-smi exited 15: 'Unable to determine the device handle for GPU 0000:41:00.0: Unknown Error'; "
            "1 GPU line(s) kept",
        ),
        # Nothing sound at all: none, with the reason.
        (
            ["0, x, y", "lots of noise"],
            0,
            [],
            "2 line(s) of nvidia-smi's answer are no GPU's, e.g. '0, x, y'; no GPU line in it",
        ),
        ([], 0, [], "nvidia-smi listed no GPU"),
        ([GOOD_SMI, "1, NVIDIA RTX A4000, 8.6, 16376, 580.159.04, 4, 8"], 0, ["9.0", "8.6"], None),
    ],
)
def test_a_fake_nvidia_smi_answer_is_kept_where_sound_and_its_faults_said(
    lines: list[str],
    code: int,
    capabilities: list[str],
    doubt: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from kitbench._cli import main

    _driverless(monkeypatch, tmp_path, "Linux version 6.1.0")
    (tmp_path / "empty-path").mkdir()
    smi = tmp_path / "empty-path" / "nvidia-smi"
    printed = "".join(f"printf '%s\\n' '{line}'\n" for line in lines)
    smi.write_text(f"#!/bin/sh\n{printed}exit {code}\n")
    smi.chmod(0o755)
    assert main(["probe"]) == 0
    shown = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("gpus "))
    assert shown.endswith("[nvidia-smi --query-gpu" + (f"; unconfirmed: {doubt}]" if doubt else "]")), shown
    assert main(["install-cmd", "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert chosen["facts"]["gpu_capabilities"] == capabilities
    unconfirmed = [n for n in chosen["notes"] if n.startswith("the GPU list is unconfirmed")]
    assert unconfirmed == (
        [
            f"the GPU list is unconfirmed ({doubt}): this answer is for the GPUs listed; "
            "--driver and --gpu-cc (once per GPU) answer for the machine as you know it"
        ]
        if doubt
        else []
    )
    if capabilities:
        assert chosen["facts"]["driver"] == "580.159.04" and chosen["compute"].startswith("cu")
    # GPUs given by hand answer for the machine as its owner knows it: no doubt is left to say.
    assert main(["install-cmd", "--driver", "580.159.04", "--gpu-cc", "9.0", "--json"]) == 0
    assert not [n for n in json.loads(capsys.readouterr().out)["notes"] if "unconfirmed (" in n]


def test_the_parser_names_every_line_that_is_no_gpu(resources: Path) -> None:
    text = (resources / "nvidia-smi/four-gpus.csv").read_text()
    assert probe.parse_nvidia_smi(text)[2] == ()
    assert probe.parse_nvidia_smi((resources / "nvidia-smi/old-driver-no-cc.csv").read_text())[2] == ()
    failed = (resources / "nvidia-smi/failed.txt").read_text()
    assert probe.parse_nvidia_smi(failed) == (None, (), (failed.strip(),))
    # A capability that is no number is no GPU's line, not a GPU "of unknown capability".
    assert probe.parse_nvidia_smi("1, bogus, abc, 1, 550.54.15\n")[1:] == ((), ("1, bogus, abc, 1, 550.54.15",))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("echo abc; echo x86_64; echo", "did not answer as a Python interpreter"),  # not a version
        ("yes 3.11.0", "did not answer as a Python interpreter"),  # endless: cut at 4 KB
        ("printf '3.11.0\\377\\nx86_64\\n\\n'", "did not answer as a Python interpreter"),  # not UTF-8
        ("printf '3.11.0\\nx86_64\\n\\033[2J 1\\n'", "did not answer as a Python interpreter"),
    ],
    ids=["abc", "yes", "not-utf8", "escape"],
)
def test_install_cmd_python_takes_only_a_python_s_answer(
    body: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from kitbench._cli import main

    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    started = time.monotonic()
    assert main(["install-cmd", "--python", str(fake)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"ERROR: --python {fake} {words}") and "Traceback" not in err
    assert time.monotonic() - started < 15
