"""report.html's plots cached by content (issue 29, the warm sweep floor): a hit is the bytes of a fresh draw of the
same data, a change in anything drawn redraws, a broken entry redraws and says so, no cache draws every time."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core.cachenotes import CacheNotes, CacheSkipped
from harness.pipeline.cache_size import evict, usage
from harness.report import Timings
from harness.report.model import CaseRecord
from harness.report.plotcache import SECTION, PlotCache, drawing_versions, plot_key, png_problem
from harness.report.plotdata import PlotSpec, grid_spec, share_spec, speed_spec, tolerance_levels
from harness.report.plots import draw_png
from harness.sweep import SweepPoint, SweepSpec, expand
from tests.helpers.report_samples import output_stats, record_for

CASES = [record_for(case) for case in expand(SweepSpec(keep_io_types=(False, True)))]
TIMED = [
    dataclasses.replace(c, speedup=1.0 + 0.1 * i, latency_ms=1.0, fp32_latency_ms=1.0 + 0.1 * i)
    for i, c in enumerate(CASES)
]
SPECS: dict[str, Callable[[list[CaseRecord]], PlotSpec]] = {
    "share": lambda cases: share_spec(cases, title="m: error vs low-precision FLOP share"),
    "grid": lambda cases: grid_spec(cases, title="m: pass/fail by data_max"),
    "speed": lambda cases: speed_spec(cases, title="m: error vs measured speedup"),
}


def _entries(root: Path) -> list[Path]:
    return sorted((root / SECTION).glob("*.png"))


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_a_cached_plot_is_the_bytes_of_a_fresh_draw(tmp_path: Path, kind: str) -> None:
    spec = SPECS[kind](TIMED)
    first = PlotCache(CacheNotes(tmp_path))
    drawn = first.png(spec)
    assert first.drawn == 1 and len(_entries(tmp_path)) == 1
    again = PlotCache(CacheNotes(tmp_path))  # the next run's report
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a hit says nothing
        cached = again.png(spec)
    assert again.drawn == 0, "the second report drew the plot again"
    assert cached == drawn == draw_png(spec), "a cached plot must be the bytes of a fresh draw of the same data"
    assert png_problem(cached) is None


def _worse(c: CaseRecord) -> CaseRecord:
    return dataclasses.replace(c, outputs=(output_stats("Plus214_Output_0", 0.2, passed=False),))


CHANGES: dict[str, Callable[[CaseRecord], CaseRecord]] = {
    "error": _worse,
    "share": lambda c: dataclasses.replace(c, lowp_flop_share=0.123),
    "status": lambda c: dataclasses.replace(c, status="xfail"),
    "precision": lambda c: dataclasses.replace(c, case=dataclasses.replace(c.case, precision="bf16")),
    "data_max": lambda c: dataclasses.replace(c, case=dataclasses.replace(c.case, data_max=64.0)),
    "speedup": lambda c: dataclasses.replace(c, speedup=9.5),
}


DRAWN = {  # what each plot draws of a case
    "share": ("error", "share", "status", "precision"),
    "grid": ("status", "precision", "data_max"),
    "speed": ("error", "speedup", "status", "precision"),
}


@pytest.mark.parametrize(("kind", "change"), [(kind, change) for kind, changes in DRAWN.items() for change in changes])
def test_a_changed_input_redraws_and_never_serves_the_stale_plot(tmp_path: Path, kind: str, change: str) -> None:
    old = SPECS[kind](TIMED)
    new = SPECS[kind]([CHANGES[change](TIMED[0]), *TIMED[1:]])
    assert new != old, f"the {kind} plot's spec misses the case's {change}"
    stale = PlotCache(CacheNotes(tmp_path)).png(old)
    cache = PlotCache(CacheNotes(tmp_path))
    got = cache.png(new)
    assert cache.drawn == 1, f"a changed {change} must redraw the {kind} plot"
    assert got == draw_png(new) and got != stale, "the plot served is not the one of the new data"
    assert len(_entries(tmp_path)) == 2


@pytest.mark.parametrize(("kind", "change"), [("grid", "error"), ("grid", "share"), ("share", "speedup")])
def test_a_change_a_plot_does_not_draw_keeps_its_entry(tmp_path: Path, kind: str, change: str) -> None:
    PlotCache(CacheNotes(tmp_path)).png(SPECS[kind](TIMED))
    cache = PlotCache(CacheNotes(tmp_path))
    cache.png(SPECS[kind]([CHANGES[change](TIMED[0]), *TIMED[1:]]))
    assert cache.drawn == 0


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_a_changed_title_redraws(tmp_path: Path, kind: str) -> None:
    spec = SPECS[kind](TIMED)
    PlotCache(CacheNotes(tmp_path)).png(spec)
    cache = PlotCache(CacheNotes(tmp_path))
    renamed = dataclasses.replace(spec, title="other model: same data")
    assert cache.png(renamed) == draw_png(renamed) and cache.drawn == 1


def test_what_a_plot_does_not_draw_keeps_its_entry(tmp_path: Path) -> None:
    """A re-run's timings and messages differ; its plots are the same PNGs, read from the cache."""
    rerun = [dataclasses.replace(c, timings=Timings(total_s=9.9), message="another run") for c in TIMED]
    for make in SPECS.values():
        PlotCache(CacheNotes(tmp_path)).png(make(TIMED))
        cache = PlotCache(CacheNotes(tmp_path))
        cache.png(make(rerun))
        assert cache.drawn == 0


def test_the_tolerance_line_is_part_of_the_key(tmp_path: Path) -> None:
    loose = [dataclasses.replace(c, outputs=tuple(dataclasses.replace(o, atol=0.5) for o in c.outputs)) for c in TIMED]
    assert tolerance_levels(loose) != tolerance_levels(TIMED)
    PlotCache(CacheNotes(tmp_path)).png(share_spec(TIMED, title="m"))
    cache = PlotCache(CacheNotes(tmp_path))
    assert cache.png(share_spec(loose, title="m")) == draw_png(share_spec(loose, title="m")) and cache.drawn == 1


def test_another_matplotlib_or_drawing_code_is_another_key() -> None:
    spec = SPECS["share"](CASES)
    versions = drawing_versions()
    assert set(versions) == {"matplotlib", "pillow", "castguard", "drawing_source"}
    assert plot_key(spec, versions=versions) == plot_key(spec, versions=dict(versions))
    for name in versions:
        assert plot_key(spec, versions={**versions, name: "other"}) != plot_key(spec, versions=versions), name


BREAKS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda data: data[: len(data) // 2],
    "a flipped byte": lambda data: data[:200] + bytes([data[200] ^ 0xFF]) + data[201:],
    "not a PNG": lambda data: b"<html>not a png</html>",
    "empty": lambda data: b"",
}


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_broken_entry_is_drawn_again_and_replaced_with_a_warning(tmp_path: Path, how: str) -> None:
    spec = SPECS["share"](CASES)
    good = PlotCache(CacheNotes(tmp_path)).png(spec)
    (entry,) = _entries(tmp_path)
    entry.write_bytes(BREAKS[how](good))
    cache = PlotCache(CacheNotes(tmp_path))
    with pytest.warns(CacheSkipped, match="unreadable cache entry") as said:
        got = cache.png(spec)
    assert got == good and cache.drawn == 1
    assert str(entry) in str(said[0].message) and "drawn again" in str(said[0].message)
    assert entry.read_bytes() == good, "the broken entry was not replaced"
    later = PlotCache(CacheNotes(tmp_path))
    assert later.png(spec) == good and later.drawn == 0


def test_no_cache_folder_draws_every_plot_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = SPECS["share"](CASES)
    cache = PlotCache(None)
    assert cache.png(spec) == cache.png(spec) == draw_png(spec)
    assert cache.drawn == 2 and not list(tmp_path.rglob("*"))


def test_a_cache_folder_that_cannot_be_used_draws_and_says_so_once(tmp_path: Path) -> None:
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder belongs")
    with pytest.warns(CacheSkipped, match="this is a file") as said:
        cache = PlotCache(CacheNotes(blocked))
        plots = [cache.png(make(TIMED)) for make in SPECS.values()]
    assert cache.drawn == 3 and plots == [draw_png(make(TIMED)) for make in SPECS.values()]
    assert len(said) == 1, "one warning per cause, not one per plot"


def test_plot_entries_count_towards_the_cache_cap(tmp_path: Path) -> None:
    root = tmp_path / ".castguard-cache"
    for make in SPECS.values():
        PlotCache(CacheNotes(root)).png(make(TIMED))
    plots = [e for e in usage(root).entries if e.section == SECTION]
    assert len(plots) == 3 and all(e.size > 0 for e in plots)
    assert (root / ".gitignore").read_text().splitlines()[-1] == "*", "castguard's own folder ignores itself"
    assert len(evict(root, max_bytes=1)) == 3 and not _entries(root), "the size cap does not evict plot entries"


def test_an_empty_plot_is_cached_too(tmp_path: Path) -> None:
    none = [dataclasses.replace(record_for(SweepPoint()), lowp_flop_share=None, outputs=())]
    spec = share_spec(none, title="m")
    assert spec.points == () and spec.left_out == 1
    PlotCache(CacheNotes(tmp_path)).png(spec)
    cache = PlotCache(CacheNotes(tmp_path))
    assert cache.png(spec) == draw_png(spec) and cache.drawn == 0
