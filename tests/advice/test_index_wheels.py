"""envs/scripts/index_wheels.py against a hostile cpu tree on 127.0.0.1 (tests/pytorch_index.py): file names that
would inject keys or quotes into envs/index_tags.yaml if decoded or pasted, a token in the index URL, a wheel the
file's schema cannot say, a hand-kept part that does not end where the script writes. Each run either writes a file
that loads (and says what it left out) or writes nothing and says why in one ERROR line."""

from __future__ import annotations

import hashlib
import runpy
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytorch_index import everything, serving

from kitbench.advice import indexes
from kitbench.records import manifest

SCRIPT = Path(__file__).resolve().parents[2] / "envs" / "scripts" / "index_wheels.py"
ARM = "win_arm64"
GOOD = [f"torch-2.13.0+cpu-{py}-{py}-{ARM}.whl" for py in ("cp311", "cp312")]


class Tree:
    """whl/cpu/<package>/ pages (PEP 691), each listing the file names given, as sent."""

    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {"torch": list(GOOD), "torchvision": [], "torchaudio": []}

    def page(self, name: str) -> dict[str, Any] | None:
        if name not in self.files:
            return None
        return {
            "meta": {"api-version": "1.1"},
            "name": name,
            "files": [
                {
                    "filename": f,
                    "url": f"/whl/cpu/{urllib.parse.quote(f)}",
                    "hashes": {"sha256": hashlib.sha256(f.encode()).hexdigest()},
                }
                for f in self.files[name]
            ],
        }


@pytest.fixture
def tree(envs_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    stand = Tree()
    with serving(stand.page, everything) as url:
        monkeypatch.setenv(indexes.PYTORCH_VARIABLE, url.removesuffix("/simple") + "/whl/")
        yield stand


def _run(capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return int(done.value.code or 0), captured.out, captured.err


def _rows(envs: Path) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in manifest.load(envs / "index_tags.yaml", "index_tags").data["wheels"]:
        rows.setdefault(row["torch"], []).append(row)
    return rows


@pytest.mark.parametrize(
    "name",
    [
        # The sweep's: a percent-encoded quote that, decoded, would close the string and add a torchaudio key.
        f"torch-2.13.0+cpu-cp313%22%2C%20torchaudio%3A%20%22cp312-cp313-{ARM}.whl",
        # The same sent raw, in the JSON page's file name: a quote, a backslash, a newline, YAML's own line break.
        f'torch-2.13.0+cpu-cp313", torchaudio: "cp312-cp313-{ARM}.whl',
        f"torch-2.13.0+cpu-cp313\\-cp313-{ARM}.whl",
        f"torch-2.13.0+cpu-cp313\n  - {{torch: 2.99.0}}-cp313-{ARM}.whl",
        f"torch-2.13.0+cpu-cp313\u2028x-cp313-{ARM}.whl",
        # A local label escaped (never decoded), an empty tag, a space, a name no installer reads.
        f"torch-2.13.0%2Bcpu-cp313-cp313-{ARM}.whl",
        f"torch-2.13.0+cpu-cp313..cp314-cp313-{ARM}.whl",
        f"torch-2.13.0+cpu-cp313 -cp313-{ARM}.whl",
        f"torch-2.13.0+cpu-cp313-{ARM}.whl",
    ],
)
def test_a_listed_name_that_is_no_wheel_s_is_left_out_and_the_rest_written(
    tree: Tree, envs_copy: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    tree.files["torch"].append(name)
    code, out, _ = _run(capsys)
    assert code == 0
    said = [line for line in out.splitlines() if "left out" in line]
    assert (
        len(said) == 1
        and said[0].startswith("1 listed file(s) whose name is no wheel's left out (the first: torch-2.13.0")
        and '"' not in said[0]
        and "\\" not in said[0]
    )
    rows = _rows(envs_copy)
    assert [r["pythons"] for r in rows["2.13.0"]] == [{"torch": "cp311 cp312"}]
    assert "2.99.0" not in rows and not any("torchaudio" in r["pythons"] for rs in rows.values() for r in rs)


def test_a_token_in_the_index_url_is_neither_written_nor_shown(
    tree: Tree, envs_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    url = os.environ[indexes.PYTORCH_VARIABLE]
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, url.replace("http://", "http://bot:s3cr3t-token@"))
    code, out, err = _run(capsys)
    assert code == 0
    assert "s3cr3t" not in out + err and "s3cr3t" not in (envs_copy / "index_tags.yaml").read_text()
    assert _rows(envs_copy)["2.13.0"][0]["source"].startswith(url.removesuffix("/") + "/cpu/")


def test_a_wheel_the_schema_cannot_say_writes_nothing(
    tree: Tree, envs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """py3-none-win_arm64 parses; index_tags.yaml's Python tags are CPython's: a person extends the schema first."""
    before = (envs_copy / "index_tags.yaml").read_bytes()
    tree.files["torch"].append(f"torch-2.13.0+cpu-py3-none-{ARM}.whl")
    code, _, err = _run(capsys)
    assert code == 1
    assert err.startswith("ERROR: ") and "index_tags.yaml" in err and "\nhint: " in err and len(err.splitlines()) == 2
    assert (envs_copy / "index_tags.yaml").read_bytes() == before
    assert not [p for p in envs_copy.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text + "extra: []\n",  # a key after the rows: not the script's to drop
        lambda text: text.replace("\nwheels:\n", "\nwheels: \n"),  # no section where the script writes
        lambda text: text.replace(
            "glibc:\n", 'glibc:\n  - {tag: linux_x86_64, glibc: "2.17", source: "x"}\nwheels: []\n', 1
        ),  # a second wheels: key, above
    ],
)
def test_a_hand_kept_part_that_would_not_read_the_same_writes_nothing(
    tree: Tree, envs_copy: Path, capsys: pytest.CaptureFixture[str], edit: Any
) -> None:
    path = envs_copy / "index_tags.yaml"
    path.write_text(edit(path.read_text()))
    before = path.read_bytes()
    code, _, err = _run(capsys)
    assert code == 1 and err.startswith("ERROR: ") and len(err.splitlines()) == 2
    assert path.read_bytes() == before


def test_an_index_that_does_not_answer_is_one_line(
    envs_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, "http://127.0.0.1:9/whl/")
    before = (envs_copy / "index_tags.yaml").read_bytes()
    code, _, err = _run(capsys)
    assert code == 1 and err.startswith("ERROR: cannot reach 127.0.0.1:9") and "\nhint: " in err
    assert (envs_copy / "index_tags.yaml").read_bytes() == before


def test_what_it_writes_reads_as_it_did_but_for_the_rows_it_owns(
    tree: Tree, envs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = envs_copy / "index_tags.yaml"
    before = manifest.load(path, "index_tags").data
    text = path.read_text()
    assert _run(capsys)[0] == 0
    after = manifest.load(path, "index_tags").data
    assert {k: v for k, v in after.items() if k != "wheels"} == {k: v for k, v in before.items() if k != "wheels"}
    assert path.read_text().startswith(text[: text.index("\nwheels:\n")])
    assert [r for r in after["wheels"] if r["torch"] != "2.13.0"] == [
        r for r in before["wheels"] if r["torch"] != "2.13.0"
    ]
