"""kitbench.machine.probe.saved: a probe read back from what `kitbench probe --json` wrote elsewhere."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kitbench._cli import main
from kitbench.advice import selector
from kitbench.errors import KitbenchError, UsageError
from kitbench.machine import drivers
from kitbench.machine.probe import as_dict, override, saved
from kitbench.machine.versions import parse_capability

CI = Path(__file__).resolve().parents[1] / "resources" / "project" / "ci-linux-x86_64.probe.json"


def test_the_file_reads_back_as_the_probe_that_wrote_it() -> None:
    written = json.loads(CI.read_text())
    machine = saved.load(CI)
    facts = json.loads(json.dumps(as_dict(machine)))
    assert (facts["gpu_doubt"], "gpu_doubt" in written) == (None, False)  # the file predates that field
    facts.pop("gpu_doubt")
    assert {k: v for k, v in facts.items() if k != "sources"} == {k: v for k, v in written.items() if k != "sources"}
    # Each fact says it came from that file, and where that machine read it.
    assert machine.sources["libc"] == f"{CI}: os.confstr(CS_GNU_LIBC_VERSION)"


def test_a_gpu_list_in_doubt_reads_back_in_doubt_from_a_file_old_or_new() -> None:
    """Why nvidia-smi's list is unconfirmed is a value of its own (gpu_doubt); a file written before it was one
    says it in its GPU list's source only, and reads back with the same doubt."""
    why = "nvidia-smi exited 15: 'Unable to determine the device handle for GPU0000:41:00.0'; 1 GPU line(s) kept"
    gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_mib": 81559}]
    base = {**json.loads(CI.read_text()), "driver": "570.86.10", "gpus": gpus}
    old = {**base, "sources": {"gpus": f"nvidia-smi --query-gpu; unconfirmed: {why}"}}
    new = {**base, "gpu_doubt": why, "sources": {"gpus": "nvidia-smi --query-gpu"}}
    assert saved.from_json(old, "old.json").gpu_doubt == why == saved.from_json(new, "new.json").gpu_doubt
    assert saved.from_json({**new, "gpu_doubt": None}, "sure.json").gpu_doubt is None
    # The GPUs given in its place are no longer in doubt.
    assert override(saved.from_json(new, "new.json"), gpu_capabilities=["9.0"]).gpu_doubt is None


def test_gpus_read_back_with_their_capability() -> None:
    written = {
        **json.loads(CI.read_text()),
        "driver": "570.86.10",
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_mib": 81559}],
    }
    machine = saved.from_json(written, "h100.json")
    assert machine.driver == "570.86.10" and machine.capabilities == ("9.0",)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"os": None}, "'os' is NoneType"),
        ({"wsl": "no"}, "'wsl' is str"),
        ({"driver": 570}, "'driver' is int"),
        ({"gpus": {"0": "H100"}}, "'gpus' is not a list of objects"),
        ({"gpus": [{"name": "H100"}]}, "a GPU entry lacks 'index'"),
        ({"gpus": [{"index": 0, "name": "H100", "capability": 9.0}]}, "capability is float, not text"),
    ],
)
def test_a_field_of_the_wrong_kind_is_one_refusal_naming_it(change: dict[str, object], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        saved.from_json({**json.loads(CI.read_text()), **change}, "x.json")


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "probe.json").write_text("os: linux\n")
    with pytest.raises(UsageError, match="not JSON"):
        saved.load(tmp_path / "probe.json")
    with pytest.raises(UsageError, match="not a JSON object"):
        saved.from_json([], "x.json")


def test_a_run_record_gives_the_machine_it_ran_on() -> None:
    # docs/records/h100-cnn.json: a run on an H100 container, driver 580.159.04, Python 3.12.3, glibc 2.39.
    machine = saved.load(Path(__file__).resolve().parents[2] / "docs" / "records" / "h100-cnn.json")
    assert (machine.os, machine.arch, machine.python_arch, machine.python_version) == (
        "linux",
        "x86_64",
        "x86_64",
        "3.12.3",
    )
    assert machine.driver == "580.159.04" and [g.name for g in machine.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert machine.capabilities == () and (machine.libc, machine.libc_version) == ("glibc", "2.39")
    assert machine.container and machine.sources["driver"].endswith("h100-cnn.json: the record's environment")


# --- a probe file goes through install-cmd's flags' checks (issue 47: 31 tracebacks, and a capability of 99.9
# pinning a CUDA build where `--gpu-cc 99.9` is refused) ------------------------------------------------------------

H100 = {
    **json.loads(CI.read_text()),
    "container": False,
    "driver": "570.86.10",
    "rocm": "6.4.1",
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "capability": "9.0",
            "memory_mib": 81559,
            "pcie_gen": 5,
            "pcie_width": 16,
        }
    ],
    "amd_gpus": [{"index": 0, "gfx": "gfx942", "device_id": "0x74a1", "compute_units": 304}],
    "intel_gpus": [{"address": "0000:03:00.0", "device_id": "0x56a0"}],
}
# Where a value sits in the file: a top-level key, or (list, entry 0, key).
PLACES: list[tuple[str, ...]] = [
    *(
        (key,)
        for key in (
            "os",
            "os_version",
            "arch",
            "python_arch",
            "python_version",
            "rosetta",
            "wsl",
            "container",
            "driver",
            "rocm",
            "libc",
            "libc_version",
            "sources",
        )
    ),
    *(("gpus", key) for key in ("index", "name", "capability", "memory_mib", "pcie_gen", "pcie_width")),
    *(("amd_gpus", key) for key in ("index", "gfx", "device_id", "compute_units")),
    *(("intel_gpus", key) for key in ("address", "device_id")),
]


def _with(place: tuple[str, ...], value: object) -> dict[str, object]:
    data = copy.deepcopy(H100)
    if len(place) == 1:
        data[place[0]] = value
    else:
        data[place[0]][0][place[1]] = value
    return data


def _loaded(tmp_path: Path, data: object) -> Path:
    """``data`` as a file, written as Python's json writes what it is given (Infinity, NaN, "\\ud800" included)."""
    path = tmp_path / "machine.probe.json"
    path.write_text(json.dumps(data))
    return path


def test_the_h100_probe_these_variants_start_from_reads() -> None:
    machine = saved.from_json(H100, "h100.json")
    assert machine.capabilities == ("9.0",) and machine.gfx == ("gfx942",)
    assert machine.intel_gpus[0].device_id == "0x56a0"


@pytest.mark.parametrize(
    ("place", "value", "said"),
    [
        (("gpus", "capability"), "99.9", "no NVIDIA GPU has compute capability 99.9"),  # what --gpu-cc 99.9 says
        (("gpus", "capability"), "9.x", "malformed compute capability '9.x'"),
        (("gpus", "capability"), 9.0, "capability is float, not text"),
        (("gpus", "capability"), float("inf"), "capability is float"),
        (("gpus", "index"), 0.5, "GPU 0.5's index is 0.5, not a whole number"),
        (("gpus", "index"), None, "index is None, not a whole number"),
        (("gpus", "index"), True, "index is True, not a whole number"),
        (("gpus", "memory_mib"), float("inf"), "memory_mib is inf, not a whole number"),
        (("gpus", "memory_mib"), float("nan"), "memory_mib is nan, not a whole number"),
        (("gpus", "name"), "H100\ud800", "name is not printable text"),
        (("gpus", "name"), "H100\x1b[2J", "name is not printable text"),
        (("gpus", "name"), None, "name is not printable text"),
        (("gpus", "name"), {}, "name is not printable text"),
        (("amd_gpus", "device_id"), [], "device_id [] is not a version or id"),
        (("intel_gpus", "address"), {}, "address is not printable text"),
        (("driver",), "570.86.10.1.2", "malformed NVIDIA driver version"),  # as --driver says
        (("driver",), 570.86, "'driver' is float"),
        (("amd_gpus", "gfx"), "gfx000", "'gfx000' is not an AMD GPU architecture"),  # as --gpu-gfx says
        (("amd_gpus", "gfx"), 942, "gfx is int, not text"),
        (("amd_gpus", "device_id"), ["0x74a1"], "device_id ['0x74a1'] is not a version or id"),
        (("amd_gpus", "compute_units"), "304", "compute_units is '304', not a whole number"),
        (("intel_gpus", "device_id"), "zz", "--intel-gpu 'zz' is not a PCI device id"),  # as --intel-gpu says
        (("intel_gpus", "device_id"), 22176, "device_id is int, not text"),
        (("intel_gpus", "address"), {"bus": 3}, "address is not printable text"),
        (("os",), "beos", "os 'beos' is none of linux, macos, windows"),
        (("arch",), "amd64", "arch 'amd64' is not linux's name"),
        (("python_arch",), "arm64", "arch 'arm64' is not linux's name"),
        (("python_version",), "3.12; rm -rf ~", "python_version '3.12; rm -rf ~' is not a version"),
        (("rocm",), "6.4\n", "rocm '6.4\\n' is not a version"),
        (("libc",), "bionic", "libc 'bionic' is neither glibc nor musl"),
        (("libc_version",), "2.x", "libc_version '2.x' is not a version"),
        (("os_version",), "\ud83d", "os_version is not printable text"),
        (("sources",), {"os": 7}, "sources is not printable text"),
    ],
)
def test_a_bad_value_anywhere_is_one_refusal_naming_the_file_and_the_field(
    place: tuple[str, ...], value: object, said: str, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=re.escape(said)) as refused:
        saved.load(_loaded(tmp_path, _with(place, value)))
    assert refused.value.message.startswith(f"{tmp_path / 'machine.probe.json'}: ") and refused.value.hint


def test_a_bad_probe_file_is_an_error_line_and_a_hint_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kitbench project --machine NAME=FILE`: exit 2, one ERROR line and a hint, the folder left as it was."""
    path = _loaded(tmp_path, _with(("gpus", "capability"), "99.9"))
    folder = tmp_path / "project"
    folder.mkdir()
    assert main(["project", str(folder), f"--machine=h100={path}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"ERROR: {path}: no NVIDIA GPU has compute capability 99.9" and err[1].startswith("hint: ")
    assert list(folder.iterdir()) == []


def test_the_os_and_arch_choices_are_install_cmds() -> None:
    assert (saved.OSES, saved.ARCHES) == (selector.OSES, selector.ARCHES)


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
    | st.sampled_from(["99.9", "9.0", "12.0", "gfx942", "0x56a0", "570.86.10", "", "linux", "3.12", "sm_90"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(PLACES), value=_JSON_VALUES)
def test_no_value_in_any_field_of_a_probe_file_is_a_traceback(
    place: tuple[str, ...], value: object, tmp_path: Path
) -> None:
    """Every variant: refused as a KitbenchError, or read into a machine install-cmd answers (or refuses) for
    without a traceback; and a machine read is one whose every fact the flags would have taken."""
    try:
        machine = saved.load(_loaded(tmp_path, _with(place, value)))
    except KitbenchError:
        return
    for cc in machine.capabilities:
        assert parse_capability(cc) in drivers.load().capabilities
    # What was read is what the probe writes: text where it writes text, printable, as UTF-8 can write it.
    json.dumps(as_dict(machine), ensure_ascii=False).encode()
    assert all(
        isinstance(text, str) for text in (*(g.name for g in machine.gpus), *(g.address for g in machine.intel_gpus))
    )
    assert all(isinstance(g.device_id, (str, type(None))) for g in (*machine.amd_gpus, *machine.intel_gpus))
    for package in ("pip", "uv"):
        with contextlib.suppress(KitbenchError):
            selector.select(machine, package=package)


def test_this_hosts_own_probe_file_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks refuse nothing `kitbench probe --json` writes: this machine's file, written and read back."""
    assert main(["probe", "--json"]) == 0
    path = tmp_path / "here.probe.json"
    path.write_text(capsys.readouterr().out)
    assert {k: v for k, v in as_dict(saved.load(path)).items() if k != "sources"} == {
        k: v for k, v in json.loads(path.read_text()).items() if k != "sources"
    }
