"""_types: the checks' result dataclasses (what is written) are the reader's types, field by field.

The schema is written from the reader's TypedDicts (test_run_schema fails when it is stale); this one
holds the writer to the reader, names and types, so that writer, reader and schema are one model. The one
difference allowed is the documented one: ``records.to_json`` writes a non-finite float as null,
so a field the writer types ``float`` may read as ``float | None``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path

import pytest

from kitbench.records import record as records
from kitbench.records import types as _types
from kitbench.suite import runner as suite

pytest.importorskip("torch")

from kitbench.suite.checks import availability, base, ddp, mnist_results, moves

# (writer, reader, exact): exact pairs are the whole object in both; the others are check results
# whose reader declares the part the schema does (the schema leaves the rest open).
PAIRS: list[tuple[type[typing.Any], typing.Any, bool]] = [
    (mnist_results.MnistRun, _types.MnistRun, True),
    (moves.Transfer, _types.Transfer, True),
    (mnist_results.Crossover, _types.Crossover, True),
    (ddp.ScalingRow, _types.DdpScaling, False),
    (ddp.BusRow, _types.DdpBus, False),
    (ddp.BackendRun, _types.DdpRun, False),
    (base.CheckResult, _types.Check, False),
    (availability.AvailabilityResult, _types.Check, False),
    (moves.MovesResult, _types.MovesCheck, False),
    (mnist_results.MnistResult, _types.MnistCheck, False),
    (ddp.DdpResult, _types.DdpCheck, False),
]
_READER_OF = {writer: reader for writer, reader, _ in PAIRS if reader is not _types.Check}


def _strip(annotation: typing.Any) -> typing.Any:
    while typing.get_origin(annotation) in (typing.NotRequired, typing.Required):
        annotation = typing.get_args(annotation)[0]
    return annotation


def _union(annotation: typing.Any) -> tuple[typing.Any, ...] | None:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return None


def _has_float(annotation: typing.Any) -> bool:
    return annotation is float or float in (_union(annotation) or ())


def _mismatch(written: typing.Any, read: typing.Any, where: str) -> str | None:
    """Why a value of type ``written`` is not read as ``read``, or None where it is."""
    read = _strip(read)
    if written == read:
        return None
    if dataclasses.is_dataclass(written):
        if typing.is_typeddict(read):
            return None if _READER_OF.get(written) is read else f"{where}: {written.__name__} read as {read.__name__}"
        if typing.get_origin(read) is dict and typing.get_args(read)[1] is typing.Any:
            return None  # an object the reader leaves untyped (the schema too)
        return f"{where}: {written.__name__} read as {read}"
    if _has_float(written) and read == written | None:  # non-finite floats are written as null
        return None
    written_args, read_args = _union(written), _union(read)
    if (
        written_args is not None
        and read_args is not None
        and len(written_args) == len(read_args)
        and all(_mismatch(w, r, where) is None for w, r in zip(written_args, read_args, strict=True))
    ):
        return None
    origin = typing.get_origin(written)
    if origin is not None and origin is typing.get_origin(read) and origin in (list, dict):
        for i, (w, r) in enumerate(zip(typing.get_args(written), typing.get_args(read), strict=True)):
            if (why := _mismatch(w, r, f"{where}[{i}]")) is not None:
                return why
        return None
    return f"{where}: {written} written, {read} read"


@pytest.mark.parametrize(("writer", "reader", "exact"), PAIRS, ids=[w.__name__ for w, _, _ in PAIRS])
def test_the_writer_is_the_reader_field_by_field(writer: type[typing.Any], reader: typing.Any, exact: bool) -> None:
    written = typing.get_type_hints(writer)
    read = typing.get_type_hints(reader)
    if exact:
        assert set(written) == set(read), (sorted(set(written) - set(read)), sorted(set(read) - set(written)))
    else:  # what the reader requires, the writer writes
        required = {
            k
            for k, v in typing.get_type_hints(reader, include_extras=True).items()
            if typing.get_origin(v) is not typing.NotRequired
        }
        assert required <= set(written), sorted(required - set(written))
    problems = [
        why
        for name in sorted(set(written) & set(read))
        if (why := _mismatch(written[name], read[name], f"{writer.__name__}.{name}")) is not None
    ]
    assert not problems, problems


def test_the_options_written_are_the_options_field_by_field() -> None:
    """suite.options_record names each option by hand (so that mypy checks it): none left out, each
    with its reader's type (a tuple is written as a list, a path as a string)."""
    written = typing.get_type_hints(base.Options)
    read = typing.get_type_hints(_types.RunOptions)
    assert set(written) == set(read), (sorted(set(written) - set(read)), sorted(set(read) - set(written)))
    json_side = {tuple[str, ...]: list[str], tuple[int, ...]: list[int], Path | None: str | None}
    problems = [
        why
        for name in sorted(written)
        if (why := _mismatch(json_side.get(written[name], written[name]), read[name], name)) is not None
    ]
    assert not problems, problems
    assert list(suite.options_record(base.Options())) == [f.name for f in dataclasses.fields(base.Options)]


def test_the_schema_written_is_the_records_schema() -> None:
    assert suite.SCHEMA == records.SCHEMA


def test_the_comparison_refuses_what_it_should() -> None:
    """The rule itself: None only where the writer's float may be non-finite; no wider writer type."""
    assert _mismatch(float, float | None, "x") is None
    assert _mismatch(list[float], list[float | None], "x") is None
    assert _mismatch(int, int | None, "x") is not None
    assert _mismatch(str, typing.Literal["a"], "x") is not None
    assert _mismatch(int, float, "x") is not None
    assert _mismatch(mnist_results.MnistRun, _types.Transfer, "x") is not None
    assert _mismatch(list[mnist_results.MnistRun], list[_types.MnistRun], "x") is None
