"""NVIDIA driver <-> CUDA rules, read from ``envs/drivers.yaml`` (once per version of that file: the cache is
keyed by its stamp, so another KITBENCH_ENVS or a rewritten file is read afresh)."""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
from functools import cache
from pathlib import Path
from typing import NamedTuple

from kitbench import _files
from kitbench.errors import ManifestError
from kitbench.machine.versions import parse_capability, parse_cuda, parse_driver
from kitbench.records import manifest


# Named tuples, not dataclasses: "Start-up" in docs/architecture.md.
class DriverRequirement(NamedTuple):
    """What a CUDA version asks of the driver on one OS."""

    cuda: str
    floor: str | None  # minor-version-compatibility floor of the family
    toolkit: str | None  # the driver the toolkit itself shipped with

    def allows(self, driver: str) -> bool:
        return self.floor is not None and parse_driver(driver) >= parse_driver(self.floor)

    def below_toolkit(self, driver: str) -> bool:
        """Runs only by minor-version compatibility (no newer-PTX JIT)."""
        return self.toolkit is not None and parse_driver(driver) < parse_driver(self.toolkit)


class Generation(NamedTuple):
    """The oldest driver that drives one GPU generation at all, per OS (None: not sourced), and how that is known."""

    name: str
    capabilities: tuple[tuple[int, int], ...]
    floors: dict[str, str | None]
    published: bool  # False: docs or an inference, said but never deciding
    source: str
    confirm: str = ""

    def floor(self, os: str) -> str | None:
        return self.floors["windows" if os == "windows" else "linux"]

    def allows(self, driver: str, os: str) -> bool:
        floor = self.floor(os)
        return floor is None or parse_driver(driver) >= parse_driver(floor)


class DriverTable(NamedTuple):
    families: tuple[tuple[tuple[int, int], tuple[int, int], dict[str, str]], ...]
    toolkits: dict[tuple[int, int], dict[str, str | None]]
    source: str
    # (first CUDA, last CUDA, the oldest and the newest compute capability it compiles for)
    arches: tuple[tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]], ...] = ()
    capabilities: tuple[tuple[int, int], ...] = ()  # every one a GPU has shipped with
    generations: tuple[Generation, ...] = ()

    def generation(self, capability: str) -> Generation | None:
        """The generation a compute capability belongs to, where its driver floor is recorded."""
        found = parse_capability(capability)
        return next((g for g in self.generations if found in g.capabilities), None)

    def oldest_arch(self, cuda: str) -> tuple[int, int] | None:
        """The oldest compute capability a wheel built with this CUDA can carry kernels for."""
        found = self.arch_range(cuda)
        return found[0] if found else None

    def arch_range(self, cuda: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The oldest and the newest compute capability this CUDA compiles kernels for."""
        version = parse_cuda(cuda)
        return next(((oldest, newest) for first, last, oldest, newest in self.arches if first <= version <= last), None)

    def requirement(self, cuda: str, os: str = "linux") -> DriverRequirement:
        version = parse_cuda(cuda)
        key = "windows" if os == "windows" else "linux"
        floor = next((row[key] for first, last, row in self.families if first <= version <= last), None)
        toolkit = self.toolkits.get(version, {}).get(key)
        return DriverRequirement(cuda=f"{version[0]}.{version[1]}", floor=floor, toolkit=toolkit)


def load() -> DriverTable:
    return _load(_files.stamp(manifest.envs_dir() / "drivers.yaml"))


@cache
def _load(source: _files.Stamp) -> DriverTable:
    data = manifest.load(Path(source[0]), "drivers").data
    families = tuple(
        (parse_cuda(row["first"]), parse_cuda(row["last"]), {"linux": row["linux"], "windows": row["windows"]})
        for row in data["families"]
    )
    toolkits = {parse_cuda(row["cuda"]): {"linux": row["linux"], "windows": row["windows"]} for row in data["toolkits"]}
    arches = tuple(
        (parse_cuda(row["first"]), parse_cuda(row["last"]), parse_cuda(row["oldest"]), parse_cuda(row["newest"]))
        for row in data["architectures"]
    )
    generations = tuple(
        Generation(
            row["name"],
            tuple(parse_capability(c) for c in row["capabilities"]),
            _first_drivers(toolkits, row["toolkit"], source[0]),
            row["kind"] in manifest.ANSWERABLE,
            row["source"],
            row.get("confirm", ""),
        )
        for row in data.get("generations", ())
    )
    return DriverTable(
        families=families,
        toolkits=toolkits,
        source=data["source"],
        arches=arches,
        capabilities=tuple(parse_capability(c) for c in data["capabilities"]),
        generations=generations,
    )


def _first_drivers(
    toolkits: dict[tuple[int, int], dict[str, str | None]], toolkit: str, where: str
) -> dict[str, str | None]:
    """A generation's first drivers: those of the first toolkit that compiles for it."""
    found = toolkits.get(parse_cuda(toolkit))
    if found is None:
        raise ManifestError(
            Path(where),
            f"generation toolkit {toolkit} is not among the toolkits",
            hint="add that toolkit's row (its drivers, from NVIDIA's CUDA release notes, Table 3)",
        )
    return found
