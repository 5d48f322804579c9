"""kitbench.machine.probe.saved: a probe read back from what `kitbench probe --json` wrote elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kitbench.errors import UsageError
from kitbench.machine.probe import as_dict, saved

CI = Path(__file__).resolve().parents[1] / "resources" / "project" / "ci-linux-x86_64.probe.json"


def test_the_file_reads_back_as_the_probe_that_wrote_it() -> None:
    written = json.loads(CI.read_text())
    machine = saved.load(CI)
    facts = json.loads(json.dumps(as_dict(machine)))
    assert {k: v for k, v in facts.items() if k != "sources"} == {k: v for k, v in written.items() if k != "sources"}
    # Each fact says it came from that file, and where that machine read it.
    assert machine.sources["libc"] == f"{CI}: os.confstr(CS_GNU_LIBC_VERSION)"


def test_gpus_read_back_with_their_capability() -> None:
    written = {**json.loads(CI.read_text()), "driver": "570.86.10",
               "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_mib": 81559}]}
    machine = saved.from_json(written, "h100.json")
    assert machine.driver == "570.86.10" and machine.capabilities == ("9.0",)


@pytest.mark.parametrize(("change", "said"), [
    ({"os": None}, "'os' is NoneType"),
    ({"wsl": "no"}, "'wsl' is str"),
    ({"driver": 570}, "'driver' is int"),
    ({"gpus": {"0": "H100"}}, "'gpus' is not a list of objects"),
    ({"gpus": [{"name": "H100"}]}, "a GPU entry lacks 'index'"),
    ({"gpus": [{"index": 0, "name": "H100", "capability": 9.0}]}, "capability is not text"),
])
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
        "linux", "x86_64", "x86_64", "3.12.3")
    assert machine.driver == "580.159.04" and [g.name for g in machine.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert machine.capabilities == () and (machine.libc, machine.libc_version) == ("glibc", "2.39")
    assert machine.container and machine.sources["driver"].endswith("h100-cnn.json: the record's environment")
