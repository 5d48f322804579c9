"""kitbench/_installed.py: how kitbench was installed, and every install hint in that installer's words.

The environments are laid out in a temporary folder as each tool leaves them (pipx's ``pipx_metadata.json``,
uv's ``uv-receipt.toml``, a venv's ``pyvenv.cfg`` and scripts); the detection reads nothing else.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from kitbench import _installed
from kitbench._installed import Installed, add_command, installed, optional_hint

PINS = ["torch==2.14.1", "torchvision==0.29.1"]
CU126 = "https://download.pytorch.org/whl/cu126"


def _venv(root: Path, *, pip: bool = True) -> str:
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if pip:
        (root / "bin" / "pip").touch()
    return str(root / "bin" / "python")


def test_pipx_s_venv_is_told_to_inject(tmp_path: Path) -> None:
    python = _venv(tmp_path / "pipx" / "venvs" / "kitbench")
    (tmp_path / "pipx" / "venvs" / "kitbench" / "pipx_metadata.json").write_text("{}")
    how = installed(str(tmp_path / "pipx" / "venvs" / "kitbench"), python)
    assert how == Installed("pipx", python, "kitbench")
    assert add_command(["matplotlib"], how=how) == "pipx inject kitbench matplotlib"
    assert add_command(PINS, CU126, how) == f"pipx inject kitbench {' '.join(PINS)} --index-url {CU126}"
    # The run hint that sent a pipx user to pip: now pipx's own verb, with this machine's build.
    hint = optional_hint("torch", (PINS, CU126), how)
    assert hint.startswith(
        f"install this machine's build (install-cmd's answer) into kitbench's pipx "
        f"environment: pipx inject kitbench torch==2.14.1 torchvision==0.29.1 --index-url {CU126};"
    )
    assert "pip install" not in hint


def test_pipx_s_suffixed_venv_is_injected_by_its_name(tmp_path: Path) -> None:
    """`pipx install --suffix _dev .` makes the venv kitbench_dev, and inject takes that name."""
    root = tmp_path / "venvs" / "kitbench_dev"
    python = _venv(root)
    (root / "pipx_metadata.json").write_text("{}")
    assert add_command(["docker"], how=installed(str(root), python)) == "pipx inject kitbench_dev docker"


def test_an_empty_sys_executable_still_names_a_python(tmp_path: Path) -> None:
    assert add_command(["docker"], how=installed(str(tmp_path), "")) == "python3 -m pip install docker"


def test_uv_tool_is_reinstalled_from_its_source_with_what_it_had(tmp_path: Path) -> None:
    root = tmp_path / "tools" / "kitbench"
    python = _venv(root, pip=False)
    # As `uv tool install --with rich '/home/me/src/kit bench'` writes it.
    (root / "uv-receipt.toml").write_text(
        '[tool]\nrequirements = [{ name = "kitbench", directory = "/home/me/src/kit bench" }, '
        '{ name = "rich", specifier = ">=13" }]\nentrypoints = [{ name = "kitbench", install-path = "/x" }]\n'
    )
    how = installed(str(root), python)
    assert how == Installed("uv tool", python, "/home/me/src/kit bench", ("rich>=13",))
    # uv replaces the tool's environment: the earlier --with is named again, the source as first given.
    assert add_command(["docker"], how=how) == (
        "uv tool install --with 'rich>=13' --with docker '/home/me/src/kit bench'"
    )
    assert add_command(PINS, CU126, how) == (
        f"uv tool install --with 'rich>=13' --with torch==2.14.1 --with torchvision==0.29.1 --index {CU126} "
        f"--index-strategy unsafe-best-match '/home/me/src/kit bench'"
    )
    assert shlex.split(add_command(["docker"], how=how))[-1] == "/home/me/src/kit bench"


@pytest.mark.parametrize(
    ("entry", "source"),
    [
        ('{ name = "kitbench", git = "https://example.org/kitbench.git" }', "https://example.org/kitbench.git"),
        ('{ name = "kitbench", specifier = "==0.1.0" }', "kitbench==0.1.0"),
        ('{ name = "kitbench" }', "kitbench"),
    ],
)
def test_uv_tool_names_the_source_uv_recorded(entry: str, source: str, tmp_path: Path) -> None:
    (tmp_path / "uv-receipt.toml").write_text(f"[tool]\nrequirements = [{entry}]\n")
    assert installed(str(tmp_path), "/x/bin/python").source == source


@pytest.mark.parametrize(
    "receipt",
    [
        "not toml [",
        "tool = 3\n",
        "[tool]\nrequirements = 'x'\n",
        "[tool]\nrequirements = [3, { name = 4 }]\n",
        "\udcff",
    ],
)
def test_a_receipt_that_is_not_uv_s_gives_the_plain_form(receipt: str, tmp_path: Path) -> None:
    (tmp_path / "uv-receipt.toml").write_bytes(receipt.encode("utf-8", "surrogateescape"))
    how = installed(str(tmp_path), "/x/bin/python")
    assert how == Installed("uv tool", "/x/bin/python")
    assert add_command(["docker"], how=how) == "uv tool install --with docker kitbench"


def test_a_huge_receipt_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "uv-receipt.toml").write_text("#" * (_installed._RECEIPT_LIMIT + 1))
    assert installed(str(tmp_path), "/x/bin/python") == Installed("uv tool", "/x/bin/python")


def test_a_plain_venv_is_told_its_own_interpreter(tmp_path: Path) -> None:
    python = _venv(tmp_path / "my env")
    how = installed(str(tmp_path / "my env"), python)
    assert how == Installed("pip", python)
    assert add_command(["matplotlib"], how=how) == f"{shlex.quote(python)} -m pip install matplotlib"
    assert add_command(PINS, CU126, how) == (
        f"{shlex.quote(python)} -m pip install torch==2.14.1 torchvision==0.29.1 --index-url {CU126}"
    )
    assert optional_hint("docker", how=how) == f"{shlex.quote(python)} -m pip install docker"


def test_a_venv_without_pip_is_told_uv_pip(tmp_path: Path) -> None:
    python = _venv(tmp_path / "v", pip=False)
    how = installed(str(tmp_path / "v"), python)
    assert how == Installed("uv pip", python)
    assert add_command(["matplotlib"], how=how) == f"uv pip install --python {python} matplotlib"


def test_a_system_python_is_pip_s(tmp_path: Path) -> None:
    # No pyvenv.cfg: a system Python, whose pip script may be elsewhere or absent; `-m pip` is its own.
    how = installed(str(tmp_path), "/usr/bin/python3")
    assert add_command(["docker"], how=how) == "/usr/bin/python3 -m pip install docker"


def test_this_python_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "kitbench").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "kitbench"))
    (tmp_path / "kitbench" / "pipx_metadata.json").write_text("{}")
    assert optional_hint("matplotlib") == "pipx inject kitbench matplotlib"


def test_torch_without_this_machine_s_answer_says_how_to_install_one(tmp_path: Path) -> None:
    how = Installed("pipx", "/p/bin/python", "kitbench")
    hint = optional_hint("torch", None, how)
    assert hint.startswith(
        "install torch into kitbench's pipx environment with the packages and index "
        "`kitbench install-cmd` prints: pipx inject kitbench PACKAGES --index-url URL;"
    )
    assert hint.endswith(
        "or run it in a target's pinned environment: `nox -s cpu -- ARGS` (`nox -R -s cpu -- ARGS` reuses it)"
    )


def test_every_optional_module_has_a_hint_and_none_names_pypi_s_kitbench() -> None:
    """No project called kitbench is on PyPI (yet): no hint may install one from there."""
    for tool in ("pipx", "uv tool", "pip", "uv pip"):
        how = Installed(tool, "/v/bin/python")  # type: ignore[arg-type]
        for module in sorted(_installed.OPTIONAL):
            hint = optional_hint(module, (PINS, CU126), how)
            assert "kitbench[" not in hint and "pip install kitbench" not in hint, (tool, module, hint)
