from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kitbench import _files
from kitbench.environments import targets
from kitbench.errors import ManifestError
from kitbench.records import manifest

GOOD = """\
description: test target
kind: venv
compute: cpu
python: "3.11"
torch: "2.14.1"
torchvision: "0.29.1"
index:
  linux: https://download.pytorch.org/whl/cpu
hosts:
  - {os: linux, arch: [x86_64]}
"""


def _load(tmp_path: Path, text: str) -> manifest.Manifest:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return manifest.load(path, "target")


def test_real_manifests_all_validate() -> None:
    found = targets.load_all()
    assert {"cpu", "cuda118", "cuda126", "mps"} <= set(found)
    assert found["cuda118"].compute == "cu118" and found["cuda118"].torch == "2.7.1"


def test_every_file_in_envs_reads_as_kitbench_reads_it() -> None:
    """What the weekly workflows run before a pull request (.github/workflows/facts.yml, locks.yml): each manifest
    against its schema (envs/<name>.yaml against <name>'s, releases/ and targets/ against theirs), the conda files
    against their targets, each lock read whole and held to its target's build. A manifest without a schema fails."""
    from kitbench.environments import locks
    from kitbench.records import schemas

    envs = manifest.envs_dir()
    known = {p.name.removesuffix(".schema.json") for p in Path(schemas.__file__).parent.glob("*.schema.json")}
    top = sorted(envs.glob("*.yaml"))
    assert top and {p.stem for p in top} <= known
    loaded = [manifest.load(p, p.stem) for p in top]
    loaded += [manifest.load(p, "release") for p in sorted((envs / "releases").glob("*.yaml"))]
    found = targets.load_all()
    assert len(loaded) > len(top) and found
    for path in sorted((envs / "locks").glob("pylock.*.toml")):
        lock = locks.read(path)
        locks.check_build(lock, found[lock.target])


def test_good_manifest_loads_with_hash(tmp_path: Path) -> None:
    loaded = _load(tmp_path, GOOD)
    assert loaded.data["kind"] == "venv"
    assert len(loaded.sha256) == 64


def test_unknown_key_names_file_line_and_allowed_keys(tmp_path: Path) -> None:
    text = GOOD.replace('torch: "2.14.1"', 'torch: "2.14.1"\ntorh: "2.0.0"')
    with pytest.raises(ManifestError) as caught:
        _load(tmp_path, text)
    assert caught.value.line == 6
    assert "t.yaml:6" in caught.value.message
    assert "unknown key 'torh'" in caught.value.message and "torchvision" in caught.value.message


def test_unknown_nested_key_points_at_that_key(tmp_path: Path) -> None:
    text = GOOD.replace("  - {os: linux, arch: [x86_64]}", "  - os: linux\n    arch: [x86_64]\n    gpu: yes")
    with pytest.raises(ManifestError) as caught:
        _load(tmp_path, text)
    assert caught.value.line == 12
    assert "hosts/0" in caught.value.message


def test_wrong_type_is_refused_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        _load(tmp_path, GOOD.replace('python: "3.11"', "python: 3.11"))
    assert caught.value.line == 4
    assert "python" in caught.value.message and "float" in caught.value.message
    assert caught.value.hint == (
        "fix it to match target's schema (kitbench/records/schemas/target.schema.json), or restore the file as shipped"
    )


def test_broken_yaml_names_line(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        _load(tmp_path, GOOD + "index: [unclosed\n")
    assert "invalid YAML" in caught.value.message
    assert caught.value.line is not None
    assert caught.value.hint and "restore it as shipped" in caught.value.hint


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n"])
def test_empty_manifest(tmp_path: Path, text: str) -> None:
    with pytest.raises(ManifestError, match="empty manifest"):
        _load(tmp_path, text)


def test_top_level_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="expected a mapping"):
        _load(tmp_path, "- a\n- b\n")


def test_docker_kind_needs_image(tmp_path: Path) -> None:
    text = GOOD.replace("kind: venv", "kind: docker").replace("compute: cpu", 'compute: cpu\ncuda: "12.6"')
    with pytest.raises(ManifestError, match="missing key 'image'"):
        _load(tmp_path, text)


def test_missing_file_hints_at_envs_variable(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        manifest.load(tmp_path / "nope.yaml", "target")
    assert caught.value.hint and "KITBENCH_ENVS" in caught.value.hint


def test_conda_environment_must_agree_with_target(envs_copy: Path) -> None:
    env_file = envs_copy / "conda" / "mps.yml"
    env_file.write_text(env_file.read_text().replace("python=3.11", "python=3.12"))
    with pytest.raises(ManifestError, match=r"pins python=3.12 but mps.yaml pins python 3.11"):
        targets.load_all()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_is_refused_never_crashes(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.yaml"
    path.write_text(text)
    with contextlib.suppress(ManifestError):
        manifest.load(path, "target")


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["description", "kind", "compute", "python", "torch", "hosts", "x"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=10), st.lists(st.integers())),
    )
)
def test_arbitrary_mappings_are_refused_never_crash(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, object]
) -> None:
    import yaml

    path = tmp_path_factory.mktemp("fuzz") / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ManifestError):
        manifest.load(path, "target")


def test_validators_are_compiled_once_into_the_cache_and_work_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fastjsonschema

    from kitbench.records import schemas

    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "cache"))
    validate = schemas.validator("mnist")
    kept = list((tmp_path / "cache" / "validators").glob("kitbench_validator_mnist_*.py"))
    assert len(kept) == 1 and "def validate" in kept[0].read_text()
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validate({"no such key": 1})
    # A cache that cannot be written (a file where the folder would be) costs only speed.
    monkeypatch.setenv(_files.CACHE_VARIABLE, str(kept[0]))
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        schemas.validator("mnist")({"no such key": 1})


def test_a_manifest_read_once_is_read_back_from_the_cache_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """install-cmd's start-up: the YAML parser and the validators are not even imported for a manifest kept."""
    from kitbench.records import schemas

    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "cache"))
    first = _load(tmp_path, GOOD)
    (kept,) = (tmp_path / "cache" / "manifests").glob("target-*.marshal")

    def no_parse(text: str, path: Path) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(manifest, "parse", no_parse)
    again = _load(tmp_path, GOOD)
    assert again.data == first.data and again.sha256 == first.sha256
    monkeypatch.undo()
    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "cache"))
    # Changed bytes are read and validated anew: a wrong value kept nowhere is refused.
    with pytest.raises(ManifestError, match="kind"):
        _load(tmp_path, GOOD.replace("kind: venv", "kind: nonsense"))
    # A damaged cache file costs only speed; a YAML date (which marshal cannot keep) is not kept.
    kept.write_bytes(b"\x00garbage")
    assert _load(tmp_path, GOOD).data == first.data
    dated = tmp_path / "dated.yaml"
    dated.write_text("read: 2026-11-26\n")
    monkeypatch.setattr(schemas, "validator", lambda name: lambda data: data)
    assert manifest.load(dated, "mnist").data == {"read": __import__("datetime").date(2026, 11, 26)}
    assert manifest.load(dated, "mnist").data["read"].year == 2026


@pytest.mark.parametrize(
    "text",
    [
        "schema: 1\nloop: &a [*a]\n",  # refers to itself: every walk loops
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n",  # "billion laughs"
        "base: &b {x: 1}\nother:\n  <<: *b\n",  # a merge key is an alias too
    ],
    ids=["recursive", "billion-laughs", "merge-key"],
)
def test_yaml_aliases_are_refused_at_once(tmp_path: Path, text: str) -> None:
    import time

    path = tmp_path / "m.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ManifestError, match="YAML aliases"):
        manifest.load(path, "suite")
    assert time.monotonic() - started < 2


def test_a_manifest_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "m.yaml")
    with pytest.raises(ManifestError, match="not a regular file"):
        manifest.load(tmp_path / "m.yaml", "suite")


def test_an_inferred_build_must_say_what_would_confirm_it_and_a_published_one_must_not(tmp_path: Path) -> None:
    """release.schema.json's provenance: a kind (artifact, code, release-notes, docs, inferred), a source, and for
    docs or inferred a `confirm`, which the others may not have; no other kind."""
    release = (Path(__file__).resolve().parents[2] / "envs" / "releases" / "2.15.yaml").read_text()
    path = tmp_path / "2.15.yaml"
    path.write_text(release)
    assert manifest.load(path, "release").data["provenance"]
    unconfirmed = re.sub(r',\n +confirm: "[^"]*"', "", release)
    confirmed = release.replace(
        'kind: artifact, read: "2026-11-22", source: "PyPI',
        'kind: artifact, confirm: "x", read: "2026-11-22", source: "PyPI',
    )
    published = release.replace("kind: artifact, read", "kind: published, read")
    for broken in (unconfirmed, confirmed, published):
        assert broken != release
        path.write_text(broken)
        with pytest.raises(ManifestError, match="provenance"):
            manifest.load(path, "release")
