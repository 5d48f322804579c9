"""pip's own configuration, read as pip reads it: which index a user's pip installs from.

The facts refresh needs it (where "PyPI" is for this user); a module of its own, at the bottom, so that the
refresh imports nothing of the installers'. The installer no longer reads it: under ``KITBENCH_INDEX_URL=default``
pip reads its own configuration and uv its own.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

from kitbench import _files
from kitbench.errors import KitbenchError

MAX_CONFIG_BYTES = 2**20  # a pip.conf is a few lines


def pip_configuration() -> dict[str, list[str]]:
    """pip's ``index-url``, ``extra-index-url`` and ``find-links`` as pip itself would read them: its
    configuration files (global, then user, then site; later wins, ``[install]`` over ``[global]``, ``index_url``
    the same option as ``index-url``: pip folds ``_`` into ``-``), then ``PIP_*`` variables
    (https://pip.pypa.io/en/stable/topics/configuration/)."""
    found: dict[str, list[str]] = {}
    for path in config_files():
        parser = configparser.RawConfigParser()
        try:
            # Through the bounded reader: PIP_CONFIG_FILE may name a FIFO or /dev/zero, which would hold a refresh
            # for ever; a file that is no configuration is skipped, as one that does not parse.
            parser.read_string(_files.read(path, MAX_CONFIG_BYTES, "pip configuration").decode("utf-8"))
        except (KitbenchError, configparser.Error, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            for key in ("index-url", "extra-index-url", "find-links"):
                for spelling in (key, key.replace("-", "_")):
                    if parser.has_option(section, spelling) and parser.get(section, spelling).split():
                        found[key] = parser.get(section, spelling).split()
    for key in ("index-url", "extra-index-url", "find-links"):
        value = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if value:
            found[key] = value.split()
    return found


def config_files() -> list[Path]:
    """Where pip reads its configuration, in its order (later files win): site-wide, the user's (each
    platform's place), the environment's; ``PIP_CONFIG_FILE`` last, and ``os.devnull`` there means none."""
    named = os.environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [
        Path("/etc/xdg/pip/pip.conf"),
        Path("/etc/pip.conf"),
        home / ".pip" / "pip.conf",
        home / "Library" / "Application Support" / "pip" / "pip.conf",
        xdg / "pip" / "pip.conf",
    ]
    if os.environ.get("APPDATA"):
        files.append(Path(os.environ["APPDATA"]) / "pip" / "pip.ini")
    if os.environ.get("VIRTUAL_ENV"):
        venv = Path(os.environ["VIRTUAL_ENV"])
        files += [venv / "pip.conf", venv / "pip.ini"]
    return [*files, *([Path(named)] if named else [])]
