"""install-cmd: golden commands from pytorch.org's pages, and the auto-mode decisions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kitbench.advice import releases, selector, wording
from kitbench.advice.rejections import Note, Refused, Rejection
from kitbench.errors import SelectionError, UsageError
from kitbench.machine import probe
from kitbench.machine.probe import Gpu, Probe

RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "published"
LINUX = Probe(
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
MAC = LINUX._replace(os="macos", os_version="14.5", arch="arm64", python_arch="arm64")


def _rows(name: str) -> list[list[str]]:
    lines = (RESOURCES / name).read_text().splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


def _compute(label: str) -> str:
    if label.startswith("ROCM"):
        return "rocm" + label.split()[1]
    if label.startswith("CUDA"):
        return "cu" + label.split()[1].replace(".", "")
    return "cpu"


def _machine(os: str) -> Probe:
    return MAC if os == "macos" else LINUX._replace(os=os)


PINNED = _rows("previous-versions.tsv")


@pytest.mark.parametrize("row", PINNED, ids=[f"{r[0]}-{r[1]}-{r[2]}-{r[3] or 'osx'}" for r in PINNED])
def test_pinned_format_equals_the_previous_versions_page(row: list[str]) -> None:
    version, package, section, label, published = row
    if section == "osx":
        cells = [("macos", "mps")]
    else:
        compute = _compute(label)
        cells = [("linux", compute)] + ([] if compute.startswith("rocm") else [("windows", compute)])
    for os, compute in cells:
        chosen = selector.select(_machine(os), release_spec=version, package=package, compute=compute, fmt="pinned")
        assert chosen.command == published, (os, compute)


def test_every_release_checked_against_pytorch_org_has_golden_data() -> None:
    known = releases.releases().items()
    pinned = {v for v, rel in known if "pinned" not in rel.unverified}
    assert pinned <= {row[0] for row in PINNED}
    assert pinned >= {"2.0.0", "2.4.0", "2.9.1", "2.10.0", "2.11.0"}
    chosen = {v for v, rel in known if "selector" not in rel.unverified}
    assert chosen <= {row[0] for row in GENERATED + SELECTOR}


def test_unchecked_releases_say_so() -> None:
    chosen = selector.select(LINUX, release_spec="2.14.1", compute="cu130")
    assert chosen.command == (
        "pip install torch==2.14.1 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cu130"
    )
    assert not chosen.verified
    unverified = chosen.noted[0]
    assert (unverified.kind, unverified.figures["rel"].version, unverified.figures["fmt"]) == (
        "unverified",
        "2.14.1",
        "pinned",
    )
    assert unverified.figures["why"].startswith("no copy of pytorch.org's 2.14 commands")
    assert selector.select(LINUX, release_spec="2.11.0").verified
    assert not selector.select(LINUX, release_spec="2.13.0", fmt="pinned").verified
    assert selector.select(LINUX, release_spec="2.13.0", fmt="selector").verified


def test_no_torchaudio_after_2_11() -> None:
    # PyPI's last torchaudio is 2.11.0; the Start Locally page dropped it from 2.8 on.
    assert selector.select(LINUX, release_spec="2.12.1", compute="cpu").command == (
        "pip install torch==2.12.1 torchvision==0.27.1 --index-url https://download.pytorch.org/whl/cpu"
    )
    assert selector.select(LINUX, release_spec="2.13.0", compute="cu130", fmt="selector").command == (
        "pip3 install torch torchvision"
    )
    assert selector.select(LINUX, release_spec="2.7.1", compute="cu126", fmt="selector").command == (
        "pip3 install torch torchvision torchaudio"
    )


PYPI = _rows("pypi-builds.tsv")[1:]


@pytest.mark.parametrize("row", PYPI, ids=[r[0] for r in PYPI])
def test_pypi_build_and_its_kernels_match_the_wheel(row: list[str]) -> None:
    version, runtime, _, arch_flags = row
    rel = releases.releases()[version]
    major, minor = runtime.split(".")[:2]
    assert rel.pypi_linux == f"cu{major}{minor}"
    assert rel.kernels[rel.pypi_linux] == tuple(arch_flags.split())


def test_every_release_is_in_the_pypi_table() -> None:
    assert {row[0] for row in PYPI} == set(releases.releases())


SELECTOR = _rows("selector.tsv")


@pytest.mark.parametrize("row", SELECTOR, ids=["-".join(r[:4]) for r in SELECTOR])
def test_selector_format_equals_start_locally(row: list[str]) -> None:
    version, os, package, compute, published = row
    chosen = selector.select(_machine(os), release_spec=version, package=package, compute=compute, fmt="selector")
    assert chosen.command == published


GENERATED = _rows("selector-generated.tsv")


@pytest.mark.parametrize("row", GENERATED, ids=["-".join(r[:4]) for r in GENERATED])
def test_selector_format_equals_the_generator_of_start_locally(row: list[str]) -> None:
    version, os, package, compute, published, _ = row
    chosen = selector.select(_machine(os), release_spec=version, package=package, compute=compute, fmt="selector")
    assert chosen.command == published


def test_the_generator_table_covers_2_0_to_2_13() -> None:
    assert {row[0] for row in GENERATED} == {v for v, rel in releases.releases().items() if rel.key < (2, 14)}


def test_uv_variant() -> None:
    chosen = selector.select(LINUX, release_spec="2.7.1", package="uv", compute="cu118")
    assert chosen.command == (
        "uv pip install torch==2.7.1 torchvision==0.22.1 torchaudio==2.7.1 "
        "--index-url https://download.pytorch.org/whl/cu118"
    )


def _box(driver: str | None, *caps: str) -> Probe:
    return LINUX._replace(driver=driver, gpus=tuple(Gpu(i, "gpu", c, None) for i, c in enumerate(caps)))


def test_auto_takes_the_newest_cuda_the_driver_runs() -> None:
    chosen = selector.select(_box("535.104.05", "8.6"), release_spec="2.9.1")
    assert chosen.compute == "cu128"
    assert [(r.build, r.cause, r.driver, r.floor) for r in chosen.passed] == [
        ("cu130", "driver floor", "535.104.05", "580")
    ]
    assert chosen.rejected == ["cu130: driver 535.104.05 < 580 (CUDA 13 family floor)"]  # the words, once
    assert "below CUDA 12.8's own driver 570.26" in chosen.reasons[0]
    assert chosen.command.endswith("/whl/cu128")


def test_auto_skips_builds_without_kernels_for_the_gpu() -> None:
    chosen = selector.select(_box("580.65.06", "6.1"), release_spec="2.9.1")
    assert chosen.compute == "cu126"
    assert [(r.build, r.cause, r.arches) for r in chosen.passed] == [
        ("cu130", "no kernels", ("sm_61",)),
        ("cu128", "no kernels", ("sm_61",)),
    ]


def test_auto_blackwell_needs_a_build_with_sm_120() -> None:
    chosen = selector.select(_box("575.64.03", "12.0"), release_spec="2.9.1")
    assert chosen.compute == "cu128"
    assert ("cu130", "driver floor", "580") in [(r.build, r.cause, r.floor) for r in chosen.passed]


def test_auto_without_driver_is_cpu() -> None:
    chosen = selector.select(_box(None), release_spec="2.9.1")
    assert (chosen.compute, chosen.reasons) == ("cpu", ["cpu: no NVIDIA driver found"])
    assert [(n.kind, n.figures["why"]) for n in chosen.because] == [("cpu_reason", "no driver")]


def test_no_gpu_is_the_reason_when_asked_for_even_in_a_container() -> None:
    asked = probe.override(_box("580.65.06", "9.0")._replace(container=True), no_gpu=True)
    chosen = selector.select(asked, release_spec="2.9.1")
    assert [(n.kind, n.figures["why"]) for n in chosen.because] == [("cpu_reason", "no gpu")]


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ({"container": True}, "inside a container started without GPUs"),
        ({"wsl": True}, "install it on Windows, never inside WSL"),
    ],
)
def test_auto_without_driver_says_where_the_driver_went(where: dict[str, bool], words: str) -> None:
    chosen = selector.select(_box(None)._replace(**where), release_spec="2.9.1")  # type: ignore[arg-type]
    assert chosen.compute == "cpu"
    assert [(n.kind, n.figures["why"]) for n in chosen.because] == [("cpu_reason", "no driver")]
    assert words in chosen.reasons[0]  # the words: where the driver went is the probe's to say


def test_auto_old_driver_falls_back_to_the_cuda_11_build() -> None:
    chosen = selector.select(_box("470.57.02", "7.0"), release_spec="2.7.1")
    assert chosen.compute == "cu118"


def test_auto_on_apple_silicon_is_mps_and_rosetta_is_called_out() -> None:
    chosen = selector.select(MAC, release_spec="2.9.1")
    assert (chosen.compute, chosen.command) == ("mps", "pip install torch==2.9.1 torchvision==0.24.1 torchaudio==2.9.1")
    rosetta = MAC._replace(python_arch="x86_64", rosetta=True)
    with pytest.raises(SelectionError, match=r"no macOS x86_64 wheels: the last is torch 2\.2\.2"):
        selector.select(rosetta, release_spec="2.9.1")
    old = selector.select(rosetta, release_spec="2.2.2")
    assert old.compute == "cpu"
    assert [n.kind for n in old.because] == ["rosetta_reason", "mac_reason"]


def test_auto_rocm() -> None:
    chosen = selector.select(LINUX._replace(rocm="6.4.1"), release_spec="2.9.1")
    assert chosen.compute == "rocm6.4"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"compute": "cu118", "machine": MAC}, "no cu118 builds for macOS"),
        ({"compute": "rocm6.4", "machine": LINUX._replace(os="windows")}, "ROCm builds exist only for Linux"),
        ({"package": "conda", "release_spec": "2.6.0"}, "no conda packages: PyTorch published them up to 2.5.1"),
        ({"compute": "cu118", "release_spec": "2.8.0"}, "has no cu118 build"),
        ({"release_spec": "1.13.1"}, "unknown release '1.13.1'"),
    ],
)
def test_combinations_that_do_not_exist(kwargs: dict, words: str) -> None:
    machine = kwargs.pop("machine", LINUX)
    with pytest.raises(SelectionError, match=words):
        selector.select(machine, **kwargs)


def test_bad_choices() -> None:
    with pytest.raises(UsageError, match="unknown package 'brew'"):
        selector.select(LINUX, package="brew")
    with pytest.raises(UsageError, match="no uv command"):
        selector.select(LINUX, package="uv", fmt="selector")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    # torch made unimportable: install-cmd must never need it.
    code = (
        "import sys, runpy; sys.modules['torch'] = None; sys.argv = ['kitbench', *sys.argv[1:]]; "
        "runpy.run_module('kitbench', run_name='__main__')"
    )
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)


def test_cli_stdout_is_only_the_command_and_runs_without_torch() -> None:
    done = _cli("install-cmd", "--release", "2.4.0", "--driver", "550.54.14", "--gpu-cc", "8.9", "--explain")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "pip install torch==2.4.0 torchvision==0.19.0 torchaudio==2.4.0 "
        "--index-url https://download.pytorch.org/whl/cu124\n"
    )
    assert "# driver: 550.54.14  [--driver]" in done.stderr


def test_cli_json_has_the_promised_fields() -> None:
    done = _cli("install-cmd", "--json", "--no-gpu", "--os", "linux", "--arch", "x86_64")
    data = json.loads(done.stdout)
    assert {"command", "compute", "release", "os", "arch", "package", "reasons", "verified"} <= set(data)
    assert data["compute"] == "cpu"


def test_cli_notes_an_unchecked_release_on_stderr_only() -> None:
    done = _cli("install-cmd", "--release", "2.15.0", "--no-gpu", "--os", "linux", "--arch", "x86_64")
    assert (
        done.stdout
        == "pip install torch==2.15.0 torchvision==0.29.2 --index-url https://download.pytorch.org/whl/cpu\n"
    )
    assert "# torch 2.15.0, pinned form unverified: " in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--os", "beos"], "unknown --os 'beos'"),
        (["--compute", "cu999"], "has no cu999 build"),
        (["--driver", "five"], "malformed NVIDIA driver version"),
        (["--gpu-cc", "x.y"], "malformed compute capability"),
        (["--release", "9.9.9"], "unknown release"),
    ],
)
def test_cli_bad_input(args: list[str], words: str) -> None:
    done = _cli("install-cmd", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("ERROR: ") and words in done.stderr.splitlines()[0]
    assert "Traceback" not in done.stderr


def test_manifest_errors_reach_the_cli_with_file_and_line(envs_copy: Path) -> None:
    import os

    path = envs_copy / "releases" / "2.9.yaml"
    path.write_text(path.read_text().replace("macos_x86_64: false", "macos_x86_64: false\nwindows_arm: true"))

    def install_cmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kitbench", "install-cmd", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "KITBENCH_ENVS": str(envs_copy)},
            check=False,
        )

    done = install_cmd("--release", "2.9.1")
    assert done.returncode == 1
    assert done.stderr.startswith(f"ERROR: {path}:")
    assert "unknown key 'windows_arm'" in done.stderr
    # install-cmd reads only the series its answer needs: the newest release's answer never opens 2.9's file,
    # nor does a GPU's that a newer release runs on (an H100 on driver 570: 2.15.0; an RTX 5090 on it: 2.11.0).
    assert install_cmd("--release", "stable").returncode == 0
    assert install_cmd("--os", "linux", "--driver", "570.86.10", "--gpu-cc", "9.0").returncode == 0
    assert install_cmd("--os", "linux", "--driver", "570.86.10", "--gpu-cc", "12.0").returncode == 0
    # A GPU no release runs on is looked for in every release.
    assert install_cmd("--os", "linux", "--gpu-gfx", "gfx803").returncode == 1


def test_kernel_lists_apply_to_x86_64_only() -> None:
    arm = _box("580.65.06", "9.0")._replace(arch="aarch64", python_arch="aarch64")
    chosen = selector.select(arm, release_spec="2.9.1")
    assert chosen.compute == "cu130"
    # No list checked: the aarch64 wheels' kernels are not on record, so the answer rests on CUDA 13.0's range.
    assert [(n.kind, n.figures["compute"], n.figures["capabilities"]) for n in chosen.noted] == [
        ("unrecorded_kernels", "cu130", ("9.0",))
    ]
    assert not selector.select(arm._replace(arch="x86_64", python_arch="x86_64"), release_spec="2.9.1").noted
    # Unrecorded lists are still bounded by the toolkit: CUDA 13 cannot hold Pascal, on any arch.
    pascal = _box("580.65.06", "6.1")._replace(arch="aarch64", python_arch="aarch64")
    assert not selector.select(pascal, release_spec="2.9.1").compute.startswith("cu13")


def test_recorded_h100_machine(resources: Path) -> None:
    from kitbench.machine import probe

    driver, gpus = probe.parse_nvidia_smi((resources / "nvidia-smi/h100-sxm.csv").read_text())[:2]
    h100 = LINUX._replace(driver=driver, gpus=gpus)
    chosen = selector.select(h100, release_spec="2.11.0")
    assert chosen.compute == "cu130"
    assert chosen.reasons == [
        "cu130: the newest CUDA build of 2.11.0 that driver 580.159.04 runs (floor 580); kernels for sm_90"
    ]
    # 2.0.1's only recorded list (the CUDA 11.7 wheel's) stops at sm_86.
    passed = selector._cuda_rejection(releases.release("2.0.1"), h100, "cu117")
    assert passed == Rejection("cu117", "no kernels", arches=("sm_90",))
    assert wording.because(passed) == "no kernels for sm_90"


NIGHTLY = [
    ("linux", "cu132"),
    ("linux", "rocm7.2"),
    ("linux", "cpu"),
    ("windows", "cu126"),
    ("windows", "cpu"),
    ("macos", "mps"),
]


@pytest.mark.parametrize(("os", "compute"), NIGHTLY)
def test_nightly_is_the_dated_start_locally_form(os: str, compute: str) -> None:
    # As pytorch/test-infra@61a77570's generator prints it (envs/pytorch.yaml).
    wheel = "cpu" if compute == "mps" else compute
    chosen = selector.select(_machine(os), release_spec="nightly", compute=compute)
    assert chosen.command == (
        f"pip3 install --pre torch torchvision --index-url https://download.pytorch.org/whl/nightly/{wheel}"
    )
    assert (chosen.format, chosen.verified) == ("selector", False)
    assert chosen.noted[0] == Note("nightly_unpinned", {})
    assert chosen.noted[1].kind == "unverified" and "as of 2026-08-21" in chosen.noted[1].figures["why"]


def test_nightly_is_ahead_of_every_release_in_time() -> None:
    """Release.key raised ValueError on nightly ("nightly" is no dotted number): nightly sorts after every
    release, as pip orders its .dev versions, so "the newest release before nightly with a kernel list" is the
    newest release with one."""
    every = list(releases.releases().values())
    assert max([*every, releases.nightly()], key=lambda r: r.key).nightly
    listed = max((r for r in every if "cu126" in r.kernels), key=lambda r: r.key)
    assert releases.earlier_kernels("nightly", "cu126") == (listed.version, listed.kernels["cu126"])


def test_nightly_refuses_what_it_lacks() -> None:
    with pytest.raises(SelectionError, match="nightly has no cu118 build"):
        selector.select(LINUX, release_spec="nightly", compute="cu118")
    with pytest.raises(SelectionError, match="no conda packages"):
        selector.select(LINUX, release_spec="nightly", package="conda")
    auto = selector.select(_box("580.65.06", "9.0"), release_spec="nightly", package="uv")
    assert (
        auto.command
        == "uv pip install --pre torch torchvision --index-url https://download.pytorch.org/whl/nightly/cu132"
    )


OSX = [row for row in PINNED if row[2] == "osx"]
# A Linux host with a GPU and a driver, inside a container: nothing of it may leak into advice for a Mac.
GPU_HOST = LINUX._replace(driver="580.95.05", container=True, gpus=(Gpu(0, "NVIDIA H100", "9.0", "PCIe 5 x16"),))


@pytest.mark.parametrize("row", OSX, ids=[f"{r[0]}-{r[1]}" for r in OSX])
def test_macos_advice_from_a_linux_host_needs_no_arch(row: list[str]) -> None:
    version, package, _, _, published = row
    machine = probe.override(GPU_HOST, os="macos")
    chosen = selector.select(machine, release_spec=version, package=package, fmt="pinned")
    assert chosen.command == published
    assert (chosen.compute, chosen.arch) == ("mps", "arm64")


def test_another_os_inherits_nothing_from_this_host() -> None:
    machine = probe.override(GPU_HOST, os="windows")
    assert (machine.arch, machine.driver, machine.gpus, machine.container) == ("x86_64", None, (), False)
    assert machine.sources["driver"] == "default for windows (not this host)"
    assert selector.select(machine, release_spec="2.5.1").compute == "cpu"
    with_gpu = probe.override(GPU_HOST, os="windows", driver="560.94", gpu_capabilities=["8.9"])
    assert selector.select(with_gpu, release_spec="2.5.1").compute.startswith("cu")


def test_explain_labels_each_fact_by_its_true_source(capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "macos", "--release", "2.5.1", "--explain"]) == 0
    err = capsys.readouterr().err
    assert "# os: macos  [--os]" in err
    assert "# arch: arm64  [default for macos (not this host)]" in err
    assert "# driver: none  [default for macos (not this host)]" in err
    assert "# container: False  [default for macos (not this host)]" in err
    assert main(["install-cmd", "--arch", "aarch64", "--no-gpu", "--explain"]) == 0
    err = capsys.readouterr().err
    assert "# python_arch: aarch64  [--arch]" in err and "# driver: none  [--no-gpu]" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--no-gpu", "--driver", "550.54.14"], "--no-gpu contradicts --driver"),
        (["--no-gpu", "--gpu-cc", "8.0"], "--no-gpu contradicts --gpu-cc"),
        # Impossible machines: capabilities no GPU has, Pythons that cannot run there.
        (["--gpu-cc", "99.0", "--driver", "580.65.06"], "no NVIDIA GPU has compute capability 99.0"),
        (["--gpu-cc", "4.0"], "no NVIDIA GPU has compute capability 4.0"),
        (["--gpu-cc", "8.6", "--gpu-cc", "sm_88"], "no NVIDIA GPU has compute capability 8.8"),
        (["--python-arch", "aarch64"], "an aarch64 Python cannot run on linux x86_64"),
        (
            ["--os", "linux", "--arch", "aarch64", "--python-arch", "x86_64"],
            "an x86_64 Python cannot run on linux aarch64",
        ),
        (["--os", "macos", "--arch", "x86_64", "--python-arch", "arm64"], "an arm64 Python cannot run on macos x86_64"),
        (["--os", "windows", "--python-arch", "arm64"], "an aarch64 Python cannot run on windows x86_64"),
    ],
)
def test_conflicting_machine_flags_are_refused(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    assert main(["install-cmd", *args]) == 2
    assert capsys.readouterr().err.startswith(f"ERROR: {words}")


@pytest.mark.parametrize(
    ("compute", "error", "hint"),
    [
        (
            "cu128",
            "torch 2.15.0 has no cu128 build for pip on linux x86_64",
            "; torch 2.11.0 has cu128: --release 2.11.0",
        ),
        ("rocm6.4", "torch 2.15.0 has no rocm6.4 build", "; torch 2.9.1 has rocm6.4: --release 2.9.1"),
        ("CU126", "unknown --compute 'CU126'", "torch 2.15.0 has: rocm7.14, rocm10.0, cu130, cu132, cpu, xpu"),
        ("", "unknown --compute ''", "auto, cpu, mps, xpu, cuXYZ (cu126) or rocmX.Y (rocm6.4);"),
    ],
)
def test_a_compute_the_release_lacks_names_the_release_that_has_it(
    compute: str, error: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    assert (
        main(["install-cmd", "--os", "linux", "--python-version", "3.12", "--glibc", "2.35", "--compute", compute]) == 2
    )
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"ERROR: {error}") and hint in err[1] and len(err) == 2


def test_the_interpreters_arch_picks_the_wheel_where_the_os_emulates_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Windows on Arm runs x64 Pythons: their wheels are win_amd64 ones, PyPI's, torchvision's too; a native
    Python gets the win_arm64 wheels only PyTorch's index has, and one that none of them is for is told of its
    x64 emulation."""
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "windows", "--arch", "arm64", "--python-arch", "x86_64", "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert chosen["arch"] == "x86_64" and chosen["command"].startswith("pip install torch==")
    assert "torchvision==" in chosen["command"]
    assert main(["install-cmd", "--os", "windows", "--arch", "arm64", "--python-version", "3.12", "--json"]) == 0
    native = json.loads(capsys.readouterr().out)
    assert native["arch"] == "aarch64" and "torchvision" not in native["command"]
    assert main(["install-cmd", "--os", "windows", "--arch", "arm64", "--python-version", "3.14"]) == 2
    assert capsys.readouterr().err.endswith(
        "an x86_64 Python runs on this machine under emulation: --python-arch x86_64\n"
    )


WOA = LINUX._replace(os="windows", os_version="10", arch="aarch64", python_arch="aarch64", python_version="3.12.10")


def test_windows_on_arm_gets_the_pinned_cpu_command_of_pytorchs_index_naming_what_it_has() -> None:
    """A native Python: the newest release with published win_arm64 wheels for it, torch alone where its torchvision
    is not on record there, as pip and uv; pytorch.org has no such cell, so the selector form is the pinned one."""
    chosen = selector.select(WOA)
    assert (chosen.release, chosen.compute, chosen.format) == ("2.13.0", "cpu", "pinned") and not chosen.verified
    assert chosen.command == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    left = chosen.noted[0]  # first: what the command leaves out
    assert left.kind == "left_out" and left.figures["rel"].version == "2.13.0"
    assert (left.figures["named"], left.figures["missing"], left.figures["host"].python) == (
        ("torch",),
        ["torchvision"],
        (3, 12),
    )
    assert [row.pythons for row in left.figures["inferred"]] == [{"torchvision": ("cp311", "cp312", "cp313")}]
    assert (left.figures["having"], left.figures["foreign"]) == ("2.10.0", "x86_64")
    assert (
        "; torch 2.10.0 comes with torchvision here: --release 2.10.0; an x86_64 Python under emulation gets "
        "torchvision too: --python-arch x86_64" in chosen.notes[0]
    )  # the words, once
    kinds = [n.kind for n in chosen.noted]
    assert "index_command" in kinds
    assert "unverified" not in kinds  # pytorch.org's text is not this one
    assert chosen.facts["wheels"]["kind"] == "published" and "asanderson/llm-redact" in chosen.facts["wheels"]["source"]
    assert selector.select(WOA, package="uv").command == (
        "uv pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    )
    assert selector.select(WOA, fmt="selector").command == chosen.command
    both = selector.select(WOA, release_spec="2.10.0")
    assert both.command == (
        "pip install torch==2.10.0 torchvision==0.25.0 --index-url https://download.pytorch.org/whl/cpu"
    )
    assert both.noted[0].kind == "left_out" and both.noted[0].figures["rel"].version == "2.10.0"
    assert (both.noted[0].figures["named"], both.noted[0].figures["missing"]) == (
        ("torch", "torchvision"),
        ["torchaudio"],
    )
    # Known only by inference: answered when asked by name, with one line on what would confirm it.
    inferred = selector.select(WOA, release_spec="2.9.1")
    assert inferred.command == "pip install torch==2.9.1 --index-url https://download.pytorch.org/whl/cpu"
    unconfirmed = [n for n in inferred.noted if n.kind == "inferred_wheels"]
    assert [(n.figures["rel"].version, n.figures["host"].python) for n in unconfirmed] == [("2.9.1", (3, 12))]
    assert not unconfirmed[0].figures["row"].published
    assert unconfirmed[0].figures["row"].confirm.startswith("torch-2.9.1+cpu-cp312-cp312-win_arm64.whl")
    assert inferred.facts["wheels"]["kind"] == "inferred"
    with pytest.raises(SelectionError) as caught:
        selector.select(WOA, release_spec="2.15.0")
    assert caught.value.hint == "the newest release that installs here is 2.13.0: --release 2.13.0"
    assert isinstance(caught.value, Refused) and caught.value.fix.figures["newest"] == "2.13.0"
    # An x86_64 Python on the same machine: PyPI's win_amd64 wheels, as before.
    emulated = selector.select(WOA._replace(python_arch="x86_64"))
    assert emulated.command == (
        "pip install torch==2.15.0 torchvision==0.29.2 --index-url https://download.pytorch.org/whl/cpu"
    )


def test_a_platform_with_no_gpu_build_says_so_not_that_no_gpu_was_given() -> None:
    """Windows on Arm (and Linux aarch64 before 2.6) has cpu builds only: an NVIDIA GPU given goes unused, and a
    machine given without one is not told that a GPU would change the answer."""
    given = selector.select(WOA._replace(driver="580.65.06", gpus=(Gpu(0, "NVIDIA H100", "9.0", None),)))
    assert given.compute == "cpu"
    assert _no_cuda_build(given) == ("no_cuda_build", "2.13.0", "Windows arm64", True)
    assert given.reasons[-1] == "cpu: torch 2.13.0 has no CUDA build for Windows arm64, so the NVIDIA GPU goes unused"
    # No kernels are missing where no build exists: the fallback named sm_90 as kernel-less, which it is not.
    fallback = next(n for n in given.noted if n.kind == "cpu_fallback")
    assert fallback.figures["kernel_less"] == []
    assert _no_cuda_build(selector.select(WOA)) == ("no_cuda_build", "2.13.0", "Windows arm64", False)
    assert selector.select(WOA).reasons[-1] == "cpu: the only build torch 2.13.0 has for Windows arm64"
    old = selector.select(
        LINUX._replace(
            arch="aarch64", python_arch="aarch64", driver="580.65.06", gpus=(Gpu(0, "NVIDIA H100", "9.0", None),)
        ),
        release_spec="2.5.1",
    )
    assert _no_cuda_build(old) == ("no_cuda_build", "2.5.1", "Linux aarch64", True)


def _no_cuda_build(chosen: selector.Selection) -> tuple[str, str, str, bool]:
    """The reason's kind and figures: which release, where, and whether an NVIDIA GPU goes unused."""
    said = chosen.because[-1]
    return said.kind, said.figures["rel"].version, said.figures["where"], said.figures["gpu"]


def test_every_capability_a_gpu_has_is_accepted() -> None:
    from kitbench.machine import drivers, probe

    base = probe.override(probe.probe(), os="linux", arch="x86_64", driver="580.65.06")
    for capability in drivers.load().capabilities:
        text = f"{capability[0]}.{capability[1]}"
        assert probe.override(base, gpu_capabilities=[text]).capabilities == (text,)


def test_an_explicit_cuda_build_too_new_for_the_driver_is_warned_about(capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    assert main(["install-cmd", "--release", "2.9.1", "--compute", "cu128", "--driver", "470.82.01"]) == 0
    err = capsys.readouterr().err
    assert "# warning: cu128 will not run on this machine: driver 470.82.01 < 525.60.13 (CUDA 12 family floor)" in err
    assert main(["install-cmd", "--release", "2.9.1", "--compute", "cu128", "--driver", "570.86.10"]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("cc", ["3.7", "5.2", "6.1", "7.0", "7.2", "7.5", "9.0", "10.0", "12.0"])
@pytest.mark.parametrize("version", sorted(releases.releases(), key=lambda v: releases.releases()[v].key))
def test_no_advice_names_a_build_whose_toolkit_cannot_hold_the_gpu(version: str, cc: str) -> None:
    from kitbench.machine import drivers
    from kitbench.machine.builds import build
    from kitbench.machine.versions import parse_capability

    machine = LINUX._replace(driver="595.45.04", gpus=(Gpu(0, "a GPU", cc, None),))
    chosen = selector.select(machine, release_spec=version)
    cuda = build(chosen.compute).cuda
    if cuda is not None:
        bounds = drivers.load().arch_range(f"{cuda[0]}.{cuda[1]}")
        assert bounds is not None and bounds[0] <= parse_capability(cc), chosen.compute
        assert parse_capability(cc)[0] <= bounds[1][0], chosen.compute


def test_pascal_on_2_12_gets_a_cuda_12_build_not_cuda_13() -> None:
    machine = probe.override(LINUX, driver="580.95.05", gpu_capabilities=["6.1"])
    chosen = selector.select(machine, release_spec="2.12.0")
    assert chosen.compute == "cu126"
    assert ("cu132", "toolkit range", ("sm_61",), (13, 2), ("sm_75", "sm_121")) in [
        (r.build, r.cause, r.arches, r.cuda, r.span) for r in chosen.passed
    ]


@pytest.mark.parametrize(
    ("args", "words", "hint"),
    [
        # No PyTorch build drives an NVIDIA, AMD or Intel GPU on macOS: the answer would be mps or cpu
        # with the GPU ignored in silence, so the machine is refused as the impossible ones are.
        (
            ["--driver", "550.54", "--gpu-cc", "9.0"],
            "--driver answers for a Linux or Windows machine: PyTorch has no CUDA build for macOS",
            "drop --driver and --gpu-cc, or answer for --os linux",
        ),
        (
            ["--gpu-cc", "8.6"],
            "--gpu-cc answers for a Linux or Windows machine: PyTorch has no CUDA build for macOS",
            "drop --gpu-cc,",
        ),
        (
            ["--gpu-gfx", "gfx942"],
            "--gpu-gfx answers for a Linux machine: PyTorch has no ROCm build for macOS",
            "PyTorch's ROCm builds are for Linux only",
        ),
        (
            ["--arch", "x86_64", "--gpu-gfx", "gfx1012", "--release", "2.2.2"],
            "--gpu-gfx answers for a Linux machine",
            "drop --gpu-gfx,",
        ),  # an Intel Mac's Radeon: real, and still no ROCm build
        (
            ["--intel-gpu"],
            "--intel-gpu answers for a Linux or Windows machine: PyTorch has no XPU build for macOS",
            "a Mac gets mps (Apple silicon) or cpu",
        ),
        (
            ["--arch", "x86_64", "--intel-gpu", "--compute", "cpu", "--package", "conda", "--release", "2.2.2"],
            "--intel-gpu answers",
            "drop --intel-gpu,",
        ),
    ],
)
def test_a_gpu_pytorch_has_no_macos_build_for_is_refused(
    args: list[str], words: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    for form in ([], ["--json"], ["--explain"], ["--format", "selector"]):
        assert main(["install-cmd", "--os", "macos", *args, *form]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        error, said_hint = captured.err.splitlines()
        assert error == f"ERROR: {words}" or error.startswith(f"ERROR: {words}"), error
        assert said_hint.startswith("hint: ") and hint in said_hint


def test_an_amd_gpu_on_windows_gets_the_cpu_build_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 21: ROCm is Linux only; elsewhere the CPU build, with the reason printed beside it."""
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "windows", "--gpu-gfx", "gfx1100"]) == 0
    captured = capsys.readouterr()
    assert captured.out.rstrip().endswith("/whl/cpu")
    assert "# cpu: gfx1100 [--gpu-gfx], but ROCm builds exist only for Linux" in captured.err
    assert main(["install-cmd", "--os", "windows", "--gpu-gfx", "gfx942", "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert chosen["compute"] == "cpu" and "ROCm builds exist only for Linux" in chosen["reasons"][-1]
    assert main(["install-cmd", "--os", "windows", "--gpu-gfx", "gfx942", "--compute", "rocm7.2"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: ROCm builds exist only for Linux")


def test_an_unknown_macos_version_is_answered_with_the_one_the_answer_needs(capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main
    from kitbench.advice import wheels

    stable = releases.release("stable").version
    older = wheels.newest(wheels.Host(os="macos", arch="arm64", macos=(13, 0)))
    assert main(["install-cmd", "--os", "macos", "--explain"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"pip install torch=={stable} ")
    assert (
        f"note: the macOS version was not given: torch {stable}'s macOS arm64 wheels need macOS 14.0 or newer; "
        f"on macOS 13 the newest release that installs is {older}: --os-version 13\n"
    ) in captured.err
    # What the note says to do answers for that Mac, and says nothing more about its version.
    assert main(["install-cmd", "--os", "macos", "--os-version", "13", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    # The newest release whose MPS runs there: 2.9 and later check for macOS 14 (their wheels' MPSDevice).
    assert answer["compute"] == "mps" and answer["release"] == "2.8.0", answer["release"]
    assert releases.release(answer["release"]).key <= releases.release(older or "").key
    assert "unknown_macos" not in [n["kind"] for n in answer["decision"]["notes"]]
    assert main(["install-cmd", "--os", "macos", "--json", "--compute", "cpu"]) == 0
    said = [n for n in json.loads(capsys.readouterr().out)["decision"]["notes"] if n["kind"] == "unknown_macos"]
    assert [(n["checked"], n["arch"], n["need"], n["older"], n["fits"]) for n in said] == [
        (stable, "arm64", [14, 0], [13, 0], older)
    ]
    # A release every Apple silicon Mac installs (macosx_11_0) needs no such note.
    assert main(["install-cmd", "--os", "macos", "--release", older or ""]) == 0
    assert "was not given" not in capsys.readouterr().err


@pytest.mark.parametrize("release", ["stable", "2.11.0", "2.9.1"])
def test_an_xpu_answer_is_unverified_and_its_notes_agree_with_it(
    release: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The builds a release's commands are recorded for never include xpu (pytorch.org has no XPU
    command); an xpu answer says so, and is never "verified", whatever the release's own status."""
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "linux", "--intel-gpu", "--release", release, "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    # stable: the newest release whose XPU build rests on an artifact or code (2.15.0's, on a nightly matrix alone,
    # does not).
    rel = releases.release(chosen["release"])
    assert chosen["compute"] == "xpu" and chosen["command"].endswith("/whl/xpu") and chosen["verified"] is False
    xpu = [n for n in chosen["notes"] if n.startswith("xpu command unverified: ")]
    assert xpu == [
        f"xpu command unverified: it is none of the builds torch {rel.version}'s commands are recorded "
        f"for ({', '.join(rel.wheels)}): it is the XPU index form, for the XPU wheels PyTorch's build "
        f"matrix has for linux from 2.5.0 (envs/vendors.yaml); that torch {rel.version} has them: "
        f"{rel.provenance('xpu').kind} ({rel.provenance('xpu').source})"
    ]
    assert rel.answerable("xpu", "linux-x86_64")  # a default answer: never one resting on docs or inferred
    # The release's own note, where it has one, stays, and the xpu note comes after what it qualifies.
    decided = chosen["decision"]["notes"]
    own = [n for n in decided if n["kind"] == "unverified"]
    assert [(n["rel"], n["fmt"]) for n in own] == ([(rel.version, "pinned")] if "pinned" in rel.unverified else [])
    kinds = [n["kind"] for n in decided]
    assert kinds.count("xpu_note") == 1
    assert kinds.index("xpu_note") > (kinds.index("unverified") if own else -1)
    # Without an Intel GPU the same release's cpu answer keeps the release's own status.
    assert main(["install-cmd", "--os", "linux", "--no-gpu", "--release", release, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is ("pinned" not in rel.unverified)


def test_stable_on_a_gpu_box_is_the_newest_release_that_runs_on_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: `eval "$(kitbench install-cmd)"` on a GPU machine installs a build that uses the GPU."""
    from kitbench._cli import main

    newest = releases.release("stable")
    h100 = probe.override(LINUX, driver="570.86.10", gpu_capabilities=["9.0"])
    chosen = selector.select(h100)
    cuda = chosen.compute.removeprefix("cu")
    assert chosen.compute.startswith("cu") and cuda.startswith("12"), chosen.compute
    assert releases.releases()[chosen.release].key >= (2, 14, 1)
    if chosen.release != newest.version:
        held = chosen.noted[0]
        assert (held.kind, held.figures["rel"].version, held.figures["newest"].version, held.figures["floor"]) == (
            "older_release",
            chosen.release,
            newest.version,
            "580",
        )
    # The same machine asked about the newest release by name, or for the CPU, gets just that.
    assert selector.select(h100, release_spec=newest.version).release == newest.version
    assert selector.select(h100, compute="cpu").compute == "cpu"
    on_the_gpu = {"older_release", "newer_gpu_release", "first_gpu_release", "cpu_fallback"}
    assert on_the_gpu.isdisjoint(n.kind for n in selector.select(h100, compute="cpu").noted)
    # An RX 7900 XTX gets a ROCm build.
    assert main(["install-cmd", "--os", "linux", "--gpu-gfx", "gfx1100"]) == 0
    assert "/whl/rocm" in capsys.readouterr().out


def test_no_release_runs_on_the_gpu_the_cpu_build_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    newest = releases.release("stable").version
    assert main(["install-cmd", "--os", "linux", "--driver", "390.157", "--gpu-cc", "6.1", "--explain"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"pip install torch=={newest} ") and captured.out.rstrip().endswith("/whl/cpu")
    assert f"note: the CPU build: no release that installs here runs on this GPU (torch {newest}: " in captured.err
    # A GTX 680 (sm_30): no CUDA toolkit of a covered release compiles for it, whatever the driver.
    assert main(["install-cmd", "--os", "linux", "--driver", "470.256.02", "--gpu-cc", "3.0", "--explain"]) == 0
    assert "; no release that installs here has kernels for sm_30" in capsys.readouterr().err
    # gfx803 (Fiji, Polaris): no ROCm build whose gfx list is recorded has its kernels.
    assert main(["install-cmd", "--os", "linux", "--gpu-gfx", "gfx803", "--explain"]) == 0
    captured = capsys.readouterr()
    assert captured.out.rstrip().endswith("/whl/cpu")
    assert "no covered release has gfx803 kernels" in captured.err


MATRIX = _rows("build-matrix.tsv")


@pytest.mark.parametrize("row", MATRIX, ids=[r[0] for r in MATRIX])
def test_every_release_has_the_builds_of_its_build_matrix(row: list[str]) -> None:
    """envs/releases agrees with pytorch/test-infra's matrix (envs/scripts/build_matrix.py), CUDA builds
    kept off Start Locally aside; a series newer than the matrix's release record says so. A nightly matrix
    is no record of what a release shipped (2.15's lost CUDA 12.6 after it): a build taken from it is
    marked inferred, naming it, and it holds no build the release's own sources do not."""
    series, channel, commit, _, cudas, rocms = row[:6]
    hidden = set(row[6].split()) if len(row) > 6 else set()
    found = [r for r in releases.releases().values() if r.series == series]
    assert found
    expected = {f"cu{c.replace('.', '')}" for c in cudas.split() if c not in hidden} | {
        f"rocm{v}" for v in rocms.split()
    }
    for rel in found:
        # Builds pytorch.org's pages never showed (cu129 of 2.9 to 2.13) are in a release branch's test channel,
        # not in this release channel: their own rows cite that branch.
        shown = {c for c in rel.wheels if c != "cpu" and rel.provenance(c).selector}
        assert all(
            "release/" in rel.provenance(c).source + rel.provenance(c).also
            for c in rel.wheels
            if not rel.provenance(c).selector
        ), rel.version
        if channel == "nightly":
            # A nightly matrix moves after it is read (2.15's ROCm 7.2 became 10.0): what it does not hold, or holds
            # alone, is no default answer's.
            assert all(not rel.answerable(c) for c in shown - expected), rel.version
            assert all(
                rel.answerable(c)
                or commit in rel.provenance(c).source
                or not rel.provenance(c).selector
                or c not in expected
                for c in shown
            ), rel.version
            continue
        assert shown == expected, rel.version
        if channel != "release":
            assert commit in rel.unverified["pinned"] or commit in rel.source or channel == "test", rel.version


def test_a_gpu_newer_than_every_build_of_a_release_is_told_which_release_first_has_its_kernels() -> None:
    """CUDA 12.6 cannot build sm_120 (12.8 can): torch 2.6.0's cu126 is no Blackwell's."""
    blackwell = probe.override(LINUX, driver="575.57.08", gpu_capabilities=["12.0"])
    chosen = selector.select(blackwell, release_spec="2.6.0")
    assert chosen.compute == "cpu"
    assert ("cu126", "toolkit range", ("sm_120",), ("sm_50", "sm_90")) in [
        (r.build, r.cause, r.arches, r.span) for r in chosen.passed
    ]
    first = next(n for n in chosen.noted if n.kind == "first_gpu_release")
    assert (first.figures["first"].version, first.figures["compute"]) == ("2.7.0", "cu128")
    assert (
        "this GPU is newer than every build of torch 2.6.0: torch 2.7.0 (cu128) is the first release with its kernels"
    ) in chosen.notes
    # A cubin runs on later minors of its major: CUDA 12.8's sm_120 serves a GB10 (12.1), and 12.6's sm_90 an H100.
    gb10, h100 = (probe.override(blackwell, gpu_capabilities=[cc]) for cc in ("12.1", "9.0"))
    assert selector.select(gb10, release_spec="2.7.0").compute == "cu128"
    assert selector.select(h100, release_spec="2.6.0").compute == "cu126"
    assert selector.select(blackwell).compute.startswith("cu")


def test_the_release_named_for_a_gpu_is_told_with_the_build_its_own_answer_picks() -> None:
    """The note after an explicit release's CPU answer names the build ``--release`` of that release would
    give: its newest CUDA that runs here (cu132, not cu130), and one whose index tags install here."""
    blackwell = probe.override(
        LINUX, driver="580.65.06", gpu_capabilities=["12.0"], python_version="3.12", glibc="2.35"
    )
    chosen = selector.select(blackwell, release_spec="2.6.0")
    named = next(n for n in chosen.noted if n.kind == "newer_gpu_release")
    newest = named.figures["newest"].version
    assert named.figures["compute"] == selector.select(blackwell, release_spec=newest).compute
    # glibc 2.17: 2.6.0's cu126 wheels are manylinux_2_28 (envs/index_tags.yaml), its cu124 ones install.
    old = probe.override(LINUX, driver="570.86.10", gpu_capabilities=["9.0"], python_version="3.12", glibc="2.17")
    host = selector.wheels.host_of(old, "x86_64")
    assert next(selector._gpu_releases(old, "x86_64", "pip", host)) == (releases.release("2.6.0"), "cu124")
    assert selector.select(old, release_spec="2.6.0").compute == "cu124"


def test_a_rocm_build_whose_recorded_index_tags_refuse_the_host_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded index tags decide a ROCm build as they do a CUDA one, in the release's own choice and so in
    the accelerator-first fallback that reuses it."""
    card = probe.override(LINUX, gpu_gfx=["gfx1100"], python_version="3.12", glibc="2.35")
    assert selector.select(card).compute == "rocm7.14"
    refusing = {("2.14.1", "rocm7.14"), ("2.14.1", "rocm7.2")}
    monkeypatch.setattr(
        selector.wheels,
        "build_refusal",
        lambda version, compute, host: ("needs glibc 2.99 (test)", "") if (version, compute) in refusing else None,
    )
    chosen = selector.select(card, release_spec="2.14.1")
    assert chosen.compute == "cpu"
    assert ("rocm7.14", "install", "needs glibc 2.99 (test)", "") in [
        (r.build, r.cause, r.detail, r.listing) for r in chosen.passed
    ]
    stable = selector.select(card)
    assert stable.release not in ("2.15.0", "2.14.1") and stable.compute.startswith("rocm")


def test_a_gpu_run_by_another_minors_kernels_is_not_said_to_have_its_own() -> None:
    """cu132 of 2.15.0 carries sm_120 and sm_100, not sm_121 or sm_101: a GB10 runs sm_120's cubins."""
    gb10 = probe.override(LINUX, driver="580.65.06", gpu_capabilities=["12.1", "9.0"])
    chosen = selector.select(gb10, release_spec="2.15.0")
    assert chosen.compute == "cu132"
    assert chosen.reasons[-1].endswith("; kernels for sm_121 (sm_120's, which run on it), sm_90")


def test_a_driver_given_as_a_bare_branch_is_told_what_its_full_version_would_change() -> None:
    """--driver 525 (the help's own example form) is read 525.0.0, below CUDA 12's 525.60.13, which every
    released 525 driver meets: the answer stays on the safe side and says so, once."""
    h100 = probe.override(LINUX, driver="525", gpu_capabilities=["9.0"], python_version="3.12", glibc="2.35")
    chosen = selector.select(h100)
    assert chosen.compute == "cu118"
    said = [n for n in chosen.noted if n.kind == "branch_floor"]
    assert said == [Note("branch_floor", {"driver": "525", "cuda": 12, "floor": "525.60.13"})]
    # Said once, for the two CUDA 12 builds it kept off.
    assert [r.build for r in chosen.passed if r.cause == "driver floor" and r.floor == "525.60.13"] == [
        "cu128",
        "cu126",
    ]
    assert wording.words(said[0]) == (
        "driver 525 is read as 525.0.0, below CUDA 12's floor 525.60.13, so the CUDA 12 builds were "
        "passed over; a released 525 driver is 525.60.13 or newer: give its full version "
        "(nvidia-smi's driver_version)"
    )  # the words, once
    full = selector.select(probe.override(h100, driver="525.60.13"))
    assert full.compute == "cu126" and "branch_floor" not in [n.kind for n in full.noted]
    # A floor that is the branch itself (CUDA 13's 580, NVIDIA's Table 2) needs no such note.
    branch = probe.override(h100, driver="580")
    assert selector.select(branch).compute == "cu132"
    assert "branch_floor" not in [n.kind for n in selector.select(branch).noted]


def test_a_start_locally_command_of_an_older_release_says_it_names_no_version() -> None:
    """pytorch.org's 2.6.0 command, run today, installs today's torch: an explicit old release, or the
    accelerator-first fallback's (an RTX 5090 on driver 570 gets 2.11.0), is told so; today's is not."""
    old = selector.select(LINUX, release_spec="2.6.0", compute="cu124", fmt="selector")
    assert old.command == "pip3 install torch torchvision torchaudio"
    assert [n.figures["rel"].version for n in old.noted if n.kind == "unpinned_release"] == ["2.6.0"]
    blackwell = probe.override(
        LINUX, driver="570.86.10", gpu_capabilities=["12.0"], python_version="3.12", glibc="2.35"
    )
    fallback = selector.select(blackwell, fmt="selector")
    assert fallback.release != releases.release("stable").version
    assert [n.figures["rel"].version for n in fallback.noted if n.kind == "unpinned_release"] == [fallback.release]
    today = selector.select(probe.override(blackwell, driver="580.65.06"), fmt="selector")
    assert "unpinned_release" not in [n.kind for n in today.noted]


def test_a_build_without_a_kernel_list_lacks_what_its_cuda_had_already_dropped() -> None:
    """A release whose cu128 list is not recorded (here, 2.11.0's taken away); 2.8 to 2.10's cu128 have none for
    Maxwell or Pascal, and CUDA 12.8 could build them: a GTX 1080 with --release 2.11.0 gets cu126, not a
    cu128 without its kernels."""
    pascal = probe.override(LINUX, driver="575.57.08", gpu_capabilities=["6.1"])
    rel = releases.release("2.11.0")
    unrecorded = rel._replace(kernels={c: a for c, a in rel.kernels.items() if c != "cu128"})
    assert selector._cuda_rejection(unrecorded, pascal, "cu128") == Rejection(
        "cu128", "dropped before", arches=("sm_61",), earlier="2.10.0", release="2.11.0"
    )
    # What was not dropped before runs there: Blackwell keeps cu128.
    assert selector._cuda_rejection(unrecorded, probe.override(pascal, gpu_capabilities=["12.0"]), "cu128") is None


def test_2_11_dropped_volta_from_its_cuda_12_8_build() -> None:
    """pytorch/pytorch#172352 (and RELEASE.md's 2.11 matrix, #175253): CUDA 12.8.1 builds Turing 7.5 to Blackwell
    12.0 in 2.11; a V100 with --release 2.11.0 gets the CUDA 12.6 build, which keeps Volta."""
    volta = probe.override(LINUX, driver="575.64.05", gpu_capabilities=["7.0"])
    chosen = selector.select(volta, release_spec="2.11.0")
    assert (chosen.release, chosen.compute) == ("2.11.0", "cu126")
    assert ("cu128", "no kernels", ("sm_70",), "") in [(r.build, r.cause, r.arches, r.detail) for r in chosen.passed]


def test_eight_gpus_of_one_kind_are_named_once() -> None:
    """--gpu-cc once per GPU: an 8-GPU box (or a hostile 10,000) names sm_90 once, and keeps its GPU count."""
    box = probe.override(LINUX, driver="580.65.06", gpu_capabilities=["9.0"] * 8 + ["8.6"] * 2)
    assert box.capabilities == ("9.0", "8.6")
    chosen = selector.select(box, release_spec="2.15.0")  # its cu132's kernel list is recorded
    assert chosen.reasons[-1].endswith("; kernels for sm_90, sm_86")
    assert chosen.facts["gpu_capabilities"] == ["9.0"] * 8 + ["8.6"] * 2


@pytest.mark.parametrize("given", ["10", "10.0", "sm_100", "100"])
def test_gpu_cc_10_is_blackwell_in_every_form(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "linux", "--driver", "580.95.05", "--gpu-cc", given, "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert chosen["facts"]["gpu_capabilities"] == ["10.0"] and chosen["compute"].startswith("cu13")


@pytest.mark.parametrize("given", ["abc", "8.8", "15", "sm_", "10.0.1"])
def test_a_capability_no_gpu_has_is_one_error_line(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "linux", "--driver", "580.95.05", "--gpu-cc", given]) == 2
    captured = capsys.readouterr()
    error, hint = captured.err.splitlines()
    assert captured.out == "" and error.startswith("ERROR: ") and hint.startswith("hint: ")


def test_an_x86_64_python_on_apple_silicon_is_told_so_and_given_the_arm64_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kitbench._cli import main

    newest = releases.release("stable").version
    what = "this is an Apple Silicon Mac running an x86_64 Python (Rosetta 2), which gets no MPS"
    arm64 = f"an arm64 Python gets torch {newest} with MPS: pip install torch=={newest} "
    assert main(["install-cmd", "--os", "macos", "--arch", "arm64", "--python-arch", "x86_64"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("pip install torch==2.2.2 ")
    assert f"# {what}; {arm64}" in captured.err  # not only under --explain
    assert (
        main(["install-cmd", "--os", "macos", "--arch", "arm64", "--python-arch", "x86_64", "--release", newest]) == 2
    )
    error, hint = capsys.readouterr().err.splitlines()
    assert error.startswith("ERROR: ") and error.endswith(what) and hint.startswith(f"hint: {arm64}")


def test_answers_for_another_machine_say_nothing_of_this_host(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """CentOS 7 asked from a container without GPUs is not told to start the container with --gpus all."""
    from kitbench._cli import main

    host = LINUX._replace(container=True)
    monkeypatch.setattr(probe, "probe", lambda: host)
    assert main(["install-cmd", "--os", "linux", "--glibc", "2.17", "--python-version", "3.9"]) == 0
    err = capsys.readouterr().err
    assert "container" not in err and "# cpu: no GPU was given" in err
    assert main(["install-cmd"]) == 0  # this host itself: its container is the point
    assert "docker run --gpus all" in capsys.readouterr().err


def test_macos_answers_carry_no_linux_build_notes(capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    assert main(["install-cmd", "--os", "macos", "--os-version", "15.1"]) == 0
    err = capsys.readouterr().err
    assert "CUDA" not in err and "cu13" not in err


def test_a_gpu_machine_asking_conda_of_stable_is_refused_as_any_machine_is() -> None:
    """The fallback looks for a release that runs on the GPU, not for one that has the package asked for."""
    h100 = probe.override(LINUX, driver="570.86.10", gpu_capabilities=["9.0"])
    with pytest.raises(SelectionError) as caught:
        selector.select(h100, package="conda")
    assert caught.value.hint == "use --package pip or uv (or --release 2.5.1)"


def test_the_decision_is_values_and_its_words_are_made_from_them() -> None:
    h100 = probe.override(LINUX, python_version="3.12", glibc="2.35", driver="570.86.10", gpu_capabilities=["9.0"])
    chosen = selector.select(h100)
    assert (chosen.release, chosen.compute, chosen.pins, chosen.index) == (
        "2.14.1",
        "cu126",
        (("torch", "2.14.1"), ("torchvision", "0.29.1")),
        "https://download.pytorch.org/whl/cu126",
    )
    assert chosen.command == f"pip install torch==2.14.1 torchvision==0.29.1 --index-url {chosen.index}"
    assert [(r.build, r.cause, r.floor) for r in chosen.passed] == [
        ("cu132", "driver floor", "580"),
        ("cu130", "driver floor", "580"),
    ]
    assert [n.kind for n in chosen.because] == ["cuda_reason"]
    held = next(n for n in chosen.noted if n.kind in selector.HELD_BACK)
    assert (held.kind, held.figures["newest"].version, held.figures["floor"]) == ("older_release", "2.15.0", "580")
    assert chosen.notes == [wording.words(n) for n in chosen.noted]
    decided = chosen.as_dict()["decision"]
    assert decided["notes"][0]["kind"] == "older_release" and decided["notes"][0]["newest"] == "2.15.0"
    assert decided["rejected"][0] == {
        "build": "cu132",
        "cause": "driver floor",
        "driver": "570.86.10",
        "floor": "580",
        "cuda": [13, 2],
    }


def test_nightly_pins_nothing_and_a_conda_command_names_no_index() -> None:
    nightly = selector.select(LINUX, release_spec="nightly")
    assert nightly.pins == () and nightly.format == "selector"
    assert [n.kind for n in nightly.noted][:1] == ["nightly_unpinned"]
    conda = selector.select(LINUX, release_spec="2.0.0", package="conda", compute="cpu")
    assert conda.index is None and conda.command.startswith("conda install pytorch==2.0.0")


@pytest.mark.parametrize(("driver", "cc"), [("570.86.10", "9.0"), ("535.104.05", "8.6"), ("470.82.01", "6.1")])
def test_one_cuda_pick_names_a_release_s_build_for_its_own_answer_and_for_the_newer_release_note(
    driver: str, cc: str
) -> None:
    machine = probe.override(LINUX, python_version="3.12", glibc="2.35", driver=driver, gpu_capabilities=[cc])
    host = selector.wheels.host_of(machine, machine.python_arch)
    found = list(selector._gpu_releases(machine, machine.python_arch, "pip", host))
    assert found, "each of these GPUs has a release that runs on it"
    for rel, compute in found[:4]:
        assert selector.select(machine, release_spec=rel.version).compute == compute
