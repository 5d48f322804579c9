"""The Python that will receive torch, and the C library it runs on, read without torch.

kitbench may run from its own environment (pipx, uv tool) while torch goes into another:
``interpreter(path)`` asks that interpreter itself, in a tiny subprocess, as uv's
``--python`` does. The C library decides which Linux wheels install: glibc's version is
what manylinux tags are floored on; musl (Alpine) takes no manylinux wheel at all.
"""

from __future__ import annotations

import os
import re
import sys

from kitbench.errors import UsageError

ASK_TIMEOUT_S = 20.0  # a cold interpreter on a slow network file system, with room to spare

# What the answer must look like, line by line: anything else did not come from platform's functions
# ("t" after the version: a free-threaded build, Py_GIL_DISABLED). Patterns, compiled by re when first matched:
# only --python asks.
_VERSION = r"[0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}([a-z]{1,2}[0-9]{0,3}\+?)?t?"
_WORD = r"[A-Za-z0-9_.-]{1,32}"
# Printed by the target interpreter: its version ("t" appended for a free-threaded build), its machine,
# and its C library as it sees it.
_ASK = (
    "import platform, sysconfig; print(platform.python_version() + ('t' if sysconfig.get_config_var("
    "'Py_GIL_DISABLED') else '')); print(platform.machine()); print(*platform.libc_ver())"
)


def interpreter(path: str) -> tuple[str, str, tuple[str, str]]:
    """(version X.Y.Z, "t" appended if free-threaded, machine, (libc name, version)) of the interpreter at
    ``path``; a directory is taken as a virtual environment, its interpreter asked (as uv's ``--python .venv``
    does)."""
    if not path:
        raise UsageError("--python is empty", hint="give the path of a Python interpreter, e.g. .venv/bin/python")
    if os.path.isdir(path):
        found = [
            p
            for p in (os.path.join(path, "bin", "python"), os.path.join(path, "Scripts", "python.exe"))
            if os.path.isfile(p)
        ]
        if not found:
            raise UsageError(
                f"--python {path} is a directory with no bin/python (or Scripts/python.exe)",
                hint="give a virtual environment's directory or an interpreter, e.g. .venv/bin/python",
            )
        path = found[0]
    # Imported here: only --python and musl run a program, and install-cmd's start-up is spared both.
    import subprocess

    from kitbench import _proc

    try:  # bounded: a hung program is stopped with all it started, a talkative one cut at 4 KB
        done = _proc.run([path, "-I", "-c", _ASK], ASK_TIMEOUT_S, max_bytes=4096, cut=True)
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"--python {path} did not answer within {ASK_TIMEOUT_S:g} s and was stopped",
            hint="give the path of a Python 3 interpreter, e.g. .venv/bin/python",
        ) from None
    except OSError as exc:
        raise UsageError(
            f"cannot run --python {path}: {exc.strerror or exc}", hint="give the path of a Python interpreter"
        ) from None
    lines = [*done.stdout.splitlines(), "", "", ""][:3]
    name, _, version = lines[2].partition(" ")
    if (
        done.returncode != 0
        or done.truncated
        or not re.fullmatch(_VERSION, lines[0])
        or not re.fullmatch(_WORD, lines[1])
        or not all(re.fullmatch(_WORD, word) or not word for word in (name, version))
    ):
        raise UsageError(
            f"--python {path} did not answer as a Python interpreter",
            hint="give the path of a Python 3 interpreter, e.g. .venv/bin/python",
        )
    return lines[0], lines[1], (name, version)


def free_threaded() -> bool:
    """Whether this interpreter is a free-threaded build (Py_GIL_DISABLED). Its ABI flags carry "t" (PEP 703):
    read there, not from sysconfig's table of the build, which install-cmd's start-up would pay. Windows' Pythons
    have ABI flags only from 3.14; before, sysconfig reads no table there."""
    flags = getattr(sys, "abiflags", None)
    if flags is not None:
        return "t" in flags
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def running() -> str:
    """This interpreter's version, "3.13.1t" for a free-threaded build: its wheels are cp313t, not cp313, as
    pip's tags for it are."""
    # sys.version's first word is what platform.python_version() reads from it, without platform's import (it
    # compiles a dozen patterns), which install-cmd's start-up would pay.
    return sys.version.split()[0] + ("t" if free_threaded() else "")


def libc() -> tuple[str | None, str | None, str]:
    """(glibc | musl | None, version, where it was read) of this machine's C library."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        text = ""
    if text.startswith("glibc "):
        return "glibc", text.split()[1], "os.confstr(CS_GNU_LIBC_VERSION)"
    import glob  # here: glibc answers above on most machines

    loaders = glob.glob("/lib/ld-musl-*.so.1")
    if loaders:
        return "musl", _musl_version(loaders[0]), loaders[0]
    import platform

    name, version = platform.libc_ver()
    if name == "glibc":
        return "glibc", version, "platform.libc_ver()"
    return None, None, "no glibc or musl found"


def _musl_version(loader: str) -> str | None:
    # musl's loader prints its version on stderr when run by its own name, then exits 1.
    import subprocess

    from kitbench import _proc

    try:
        done = _proc.run([loader], 5)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_musl(done.stderr)


def parse_musl(text: str) -> str | None:
    """The version in musl's loader banner ("musl libc (x86_64)\\nVersion 1.2.4\\n...")."""
    for line in text.splitlines():
        if line.startswith("Version "):
            return line.split()[1]
    return None
