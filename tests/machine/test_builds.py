"""kitbench.machine.builds: a build's tag parsed into its kind, version, index path and what it needs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kitbench.machine.builds import Build, build, newest_first


@pytest.mark.parametrize(
    ("tag", "kind", "version", "needs"),
    [
        ("cpu", "cpu", (), "nothing"),
        ("cu126", "cuda", (12, 6), "an NVIDIA driver"),
        ("cu118", "cuda", (11, 8), "an NVIDIA driver"),
        ("cu132", "cuda", (13, 2), "an NVIDIA driver"),
        ("rocm6.4", "rocm", (6, 4), "an AMD GPU"),
        ("rocm7.14", "rocm", (7, 14), "an AMD GPU"),
        ("rocm5.4.2", "rocm", (5, 4, 2), "an AMD GPU"),
        ("xpu", "xpu", (), "an Intel GPU"),
        ("mps", "mps", (), "an Apple Silicon Mac"),
    ],
)
def test_a_tag_is_parsed_into_its_build(tag: str, kind: str, version: tuple[int, ...], needs: str) -> None:
    found = build(tag)
    assert found == Build(tag, kind, version, needs, known=True)
    assert found.index_path == f"whl/{tag}"
    assert found.cuda == (version if kind == "cuda" else None)
    assert found.gpu == (kind in ("cuda", "rocm", "xpu"))


@pytest.mark.parametrize(
    ("tag", "kind"),
    [("cuda", "cuda"), ("cu12", "cuda"), ("rocm", "rocm"), ("xpu2", "xpu"), ("tpu", "unknown"), ("", "unknown")],
)
def test_a_tag_out_of_its_kinds_form_is_of_that_kind_but_not_known(tag: str, kind: str) -> None:
    # The kind is the prefix's (a --compute of cuda on macOS is told there are no CUDA builds there).
    assert (build(tag).kind, build(tag).known) == (kind, False)


@given(st.text(max_size=12))
def test_any_tag_parses(tag: str) -> None:
    assert build(tag).tag == tag


def test_newest_first_orders_one_kinds_builds_by_version() -> None:
    tags = ("rocm6.4", "cu118", "cpu", "cu132", "rocm7.14", "cu126", "xpu")
    assert newest_first(tags, "cuda") == ["cu132", "cu126", "cu118"]
    assert newest_first(tags, "rocm") == ["rocm7.14", "rocm6.4"]
