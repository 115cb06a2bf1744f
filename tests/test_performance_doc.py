"""docs/performance.md shows the measured figures: every table of it is what ``python -m
stress.report`` renders from ``stress/figures/*.json`` (what the benchmarks wrote with
``--json``), and every figures file has its table."""

from __future__ import annotations

import json

from stress import report
from stress.figures import FIGURES, Table, dumps


def test_the_document_is_what_the_figures_render():
    text = report.DOC.read_text()
    assert report.render(text) == text, "docs/performance.md is behind stress/figures/: run python -m stress.report"


def test_every_figures_file_has_its_table():
    shown = {m["name"] for m in report.BLOCK.finditer(report.DOC.read_text())}
    assert shown == {p.stem for p in FIGURES.glob("*.json")}


def test_a_benchmark_table_round_trips_through_its_json(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["bench_x", "--runs", "3", "--json", str(tmp_path / "x.json")])
    t = Table("bench_x")
    t.section("warm | cold")
    t.add("a listing <200 rows>", "12.5 ms", "(budget: 50 ms)")
    t.save(str(tmp_path / "x.json"))
    doc = json.loads((tmp_path / "x.json").read_text())
    assert doc["command"] == "python -m stress.bench_x --runs 3"  # not where it was written
    assert doc["sections"] == [
        {"title": "warm | cold", "rows": [["a listing <200 rows>", "12.5 ms", "(budget: 50 ms)"]]}
    ]
    assert dumps(doc) == (tmp_path / "x.json").read_text()
    block = report.table("x", doc)
    assert "| warm \\| cold | | |" in block and "| a listing &lt;200 rows> | 12.5 ms | (budget: 50 ms) |" in block
