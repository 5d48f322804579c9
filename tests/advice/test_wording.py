"""kitbench.advice.wording: the short answer install-cmd prints by default (the rest is --explain's)."""

from __future__ import annotations

import pytest

from kitbench._cli import main
from kitbench.advice import wording
from kitbench.advice.rejections import Rejection, note
from kitbench.advice.releases import Evidence, release
from kitbench.advice.wording import summary, words

H100_570 = [
    "install-cmd",
    "--os",
    "linux",
    "--python-version",
    "3.12",
    "--glibc",
    "2.35",
    "--driver",
    "570.86.10",
    "--gpu-cc",
    "9.0",
]


def test_the_default_answer_is_the_command_and_at_most_two_short_lines_of_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(H100_570) == 0
    out, err = capsys.readouterr()
    assert out == "pip install torch==2.14.1 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cu126\n"
    assert err.splitlines() == [
        "# cu126: the newest CUDA build of 2.14.1 that driver 570.86.10 runs (floor 525.60.13)",
        "# torch 2.14.1, not the newest release (2.15.0): update the driver to at least 580 for torch 2.15.0's "
        "CUDA builds",
    ]
    assert main([*H100_570, "--explain"]) == 0
    explained = capsys.readouterr().err
    assert "# rejected cu132, cu130: driver 570.86.10 < 580 (CUDA 13 family floor)" in explained
    assert "note: torch 2.14.1, pinned form unverified: " in explained


def test_a_line_of_details_is_cut_before_its_parenthesis_and_a_warning_kept_whole() -> None:
    sm_61 = [Rejection(build, "no kernels", arches=("sm_61",)) for build in ("cu132", "cu130")]
    held = note(
        "older_release",
        rel=release("2.14.1"),
        newest=release("2.15.0"),
        passed=sm_61,
        reason=note("cpu_reason", why="no cuda fits", machine=None),
        floor=None,
    )
    assert words(held) == (
        "torch 2.14.1, not the newest release (2.15.0): no build of 2.15.0 runs on this GPU (cu132: no kernels "
        "for sm_61; cu130: no kernels for sm_61)"
    )
    asked = note("asked_reason", compute="cu128")
    assert summary([asked], [held, note("mps_default")]) == [
        "cu128: asked for with --compute",
        "torch 2.14.1, not the newest release (2.15.0): no build of 2.15.0 runs on this GPU",
    ]
    floor = Rejection("cu128", "driver floor", driver="470.82.01", floor="525.60.13", cuda=(12, 8))
    warning = note("will_not_run", compute="cu128", why=floor)
    assert summary([asked], [held, warning]) == [
        "cu128: asked for with --compute",
        "warning: cu128 will not run on this machine: driver 470.82.01 < 525.60.13 (CUDA 12 family floor)",
    ]
    assert summary([], []) == []


def test_a_driver_update_that_would_lift_the_answer_is_the_short_line() -> None:
    sm_100 = Rejection("cu126", "gpu floor", arches=("sm_100",), driver="560.35", floor="570.26", detail="Blackwell")
    held = note(
        "older_release",
        rel=release("2.6.0"),
        newest=release("2.15.0"),
        passed=[sm_100],
        reason=note("cpu_reason", why="no cuda fits", machine=None),
        floor=None,
    )
    assert summary([], [held]) == ["torch 2.6.0, not the newest release (2.15.0): update the driver to at least 570.26"]
    lifted = held._replace(figures={**held.figures, "floor": "580"})
    assert summary([], [lifted]) == [
        "torch 2.6.0, not the newest release (2.15.0): update the driver to at least 580 for torch 2.15.0's CUDA builds"
    ]


def test_an_unconfirmed_line_of_the_default_answer_is_short_its_source_left_to_explain() -> None:
    evidence = Evidence("rocm10.0", "inferred", "the nightly build matrix", confirm="a wheel on PyTorch's index")
    inferred = note("inferred_build", rel=release("2.15.0"), evidence=evidence)
    assert words(inferred) == (
        "unconfirmed: torch 2.15.0 rocm10.0 rests on an inference alone (the nightly build matrix); confirmed by "
        "a wheel on PyTorch's index"
    )
    assert summary([note("asked_reason", compute="rocm10.0")], [note("mps_default"), inferred]) == [
        "rocm10.0: asked for with --compute",
        "unconfirmed: torch 2.15.0 rocm10.0 rests on an inference alone, not seen in an artifact (--explain: from "
        "what)",
    ]


def test_the_selector_takes_no_sentence_but_its_refusals_from_wording() -> None:
    # Its reasons and notes are values, worded when read: what it imports from wording is the words of the errors
    # it raises, the facts it reports, and the one door every note is worded through.
    from kitbench.advice import selector

    taken = {name for name, f in vars(selector).items() if getattr(f, "__module__", "") == wording.__name__}
    assert taken == {
        "machine_facts",
        "nightly_refusal",
        "no_uv_selector",
        "not_installable",
        "rejected",
        "rosetta_refusal",
        "unavailable",
        "unknown_choice",
        "value",
        "wheel_facts",
        "words",
    }


def test_explain_for_another_machine_shows_none_of_this_host_s_kernel_wsl_or_container(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*H100_570, "--explain"]) == 0
    err = capsys.readouterr().err
    assert "# os: linux  [--os]" in err
    assert not any(line.startswith(("# os_version:", "# container:", "# wsl:")) for line in err.splitlines())


def test_an_amd_gpu_is_told_once_that_the_cuda_builds_need_an_nvidia_driver(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "install-cmd",
                "--os",
                "linux",
                "--python-version",
                "3.12",
                "--glibc",
                "2.35",
                "--gpu-gfx",
                "gfx1100",
                "--explain",
            ]
        )
        == 0
    )
    rejected = [line for line in capsys.readouterr().err.splitlines() if line.startswith("# rejected")]
    assert rejected == ["# rejected cu132, cu130, cu126: no NVIDIA driver"]


def test_windows_cuda_13_floor_is_the_branch_nvidia_names(capsys: pytest.CaptureFixture[str]) -> None:
    """NVIDIA's Table 2 gives Windows' CUDA 13.x minimum as the 580 branch: printed as 580, not 580.0.0."""
    assert (
        main(
            [
                "install-cmd",
                "--os",
                "windows",
                "--python-version",
                "3.12",
                "--driver",
                "566.36",
                "--gpu-cc",
                "8.9",
                "--explain",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "# rejected cu132, cu130: driver 566.36 < 580 (CUDA 13 family floor)" in err and "580.0.0" not in err


WOA = ["install-cmd", "--os", "windows", "--arch", "aarch64", "--python-arch", "aarch64"]


def test_windows_on_arm_s_answer_says_what_it_leaves_out_and_where_its_wheels_are_on_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*WOA, "--python-version", "3.12"]) == 0
    out, err = capsys.readouterr()
    assert out == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu\n"
    assert err.splitlines() == [
        "# cpu: the only build torch 2.13.0 has for Windows arm64",
        "# torch only: no Windows arm64 wheel of torchvision 0.28.0 for Python 3.12 is on record "
        "(envs/index_tags.yaml)",
    ]
    assert main([*WOA, "--python-version", "3.12", "--explain"]) == 0
    explained = capsys.readouterr().err
    assert "# wheels: download.pytorch.org/whl/cpu/torch/ as listed on 2026-10-06: " in explained
    assert "(asanderson/llm-redact, scripts/cpu_torch.py) (envs/index_tags.yaml), read 2026-11-27\n" in explained
    assert (
        "note: pytorch.org has no Windows arm64 command: this pinned one names the wheels PyTorch's index is "
        "recorded serving there (envs/index_tags.yaml)\n" in explained
    )
    assert main([*WOA, "--python-version", "3.14"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "ERROR: torch 2.15.0 has no Windows arm64 wheels on record: PyPI has none, and PyTorch's index is on record "
        "serving torch 2.7.0, 2.8.0, 2.10.0, 2.12.0, 2.12.1, 2.13.0 (envs/index_tags.yaml)",
        "hint: no release from 2.0.0 to 2.15.0 installs here; one does on Python 3.11 to 3.13; an x86_64 Python runs "
        "on this machine under emulation: --python-arch x86_64",
    ]
