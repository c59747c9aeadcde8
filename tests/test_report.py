"""`boxjax bench report`: the documents' generated blocks match the kept rows, and writing them twice changes
nothing. Reads rows only (no training)."""

import os

import pytest

from boxjax.bench import report, seed_table
from boxjax.bench import rows as bench_rows

REPO = os.path.join(os.path.dirname(__file__), "..")


def _read(doc: str) -> str:
    with open(os.path.join(REPO, doc)) as f:
        return f.read()


@pytest.fixture(scope="module")
def texts():
    return report.blocks(REPO)


def test_readme_headline_is_the_reports_from_the_newest_rows_of_the_default(texts):
    readme = _read("README.md")
    [(name, body)] = [m for m in report.MARKER.findall(readme) if m[0] == "headline"]
    assert body.strip() == texts[name]().strip(), (
        "README's figures are behind the rows: `boxjax bench report`"
    )
    rows = report.bench_rows_of(REPO)
    defaults = [e for e in seed_table.current(seed_table.measurements(rows)) if not e["options"]]
    newest = max((e for e in defaults if e["kind"] == "bench"), key=lambda e: e["stamp"])
    assert f"{newest['s_per_iteration_median']:.3f} s" in body and newest["commit"] in body


@pytest.mark.parametrize("doc", report.DOCS)
def test_every_block_of_the_documents_is_current_and_a_second_write_changes_nothing(doc, texts):
    text = _read(doc)
    assert report.MARKER.findall(text), f"{doc} has no report block"
    assert report.stale(text, texts) == [], f"{doc} is behind the rows: run `boxjax bench report`"
    once = report.fill(text, texts)
    assert report.fill(once, texts) == once == text


def test_blocks_are_replaced_between_their_markers_and_bad_markers_named():
    texts = {"a": lambda: "new A\n", "b": lambda: "B"}
    a, b, end = "<!-- report:a -->\n", "<!-- report:b -->\n", "<!-- /report -->"
    text = f"intro\n{a}old\nlines\n{end}\nmiddle\n{b}{end}\nend"
    out = report.fill(text, texts)
    assert out == f"intro\n{a}new A\n{end}\nmiddle\n{b}B\n{end}\nend"
    assert report.stale(text, texts) == ["a", "b"] and report.stale(out, texts) == []
    with pytest.raises(ValueError, match="unknown report block 'c'; valid: a, b"):
        report.fill("<!-- report:c -->\n<!-- /report -->", texts)
    with pytest.raises(ValueError, match="without its"):
        report.fill("<!-- report:a -->\nno end", texts)


def _bench(commit: str, date: str, median: float, **labels) -> list[dict]:
    row = {"bench": "block", "teacher": "shipped", "epochs": 4, "minibatch": 2048, **seed_table.WORLD,
           "device": "NVIDIA H100 80GB HBM3", "commit": commit, "date": date, "command": "x --repeats 5",
           **labels}  # fmt: skip
    return [
        {**row, "metric": "s_per_iteration", "value": median - 0.001},
        {**row, "metric": "s_per_iteration_median", "value": median},
    ]


def test_the_headline_takes_the_newest_default_and_the_options_below_the_seeds_price():
    rows = _bench("aaaaaaa", "2026-12-01T00:00", 0.50) + _bench("bbbbbbb", "2026-12-02T00:00", 0.40)
    rows += _bench("ccccccc", "2026-12-01T00:00", 0.20, task_options={"solver": "cg"})
    rows += _bench("ddddddd", "2026-12-01T00:00", 0.35, task_options={"solver_iterations": 2})  # dearer
    rows += _bench("eeeeeee", "2026-12-03T00:00", 0.10, reverted="fff: did not pay")
    text = report.headline(rows, bench_rows.load_prices()).replace("\n", " ")
    # 0.40 s at $2.50/h: $0.278 per 1,000 iterations, above the seed's $0.22
    assert "takes 0.400 s on one H100" in text and "(the default; bench median, bbbbbbb, 2026-12-02)" in text
    assert "3.0 times its speed, though at $2.50/h that is $0.278 per 1,000 iterations" in text
    assert "the CG solver (`--env solver=cg`) 0.200 s, $0.139 (ccccccc)" in text
    assert "solver cap 2" not in text and "0.100" not in text
    with pytest.raises(ValueError, match="no bench row of the default"):
        report.headline(rows[4:6], bench_rows.load_prices())


def test_current_table_keeps_the_newest_default_and_options_and_earlier_the_rest():
    rows = _bench("aaaaaaa", "2026-12-01T00:00", 0.50) + _bench("bbbbbbb", "2026-12-02T00:00", 0.40)
    rows += _bench("ccccccc", "2026-12-01T00:00", 0.20, task_options={"solver": "cg"})
    rows += _bench("ddddddd", "2026-12-03T00:00", 0.30, hessian_tiles="nonzero")
    rows += _bench("eeeeeee", "2026-12-03T00:00", 0.45, policy="data/blockers/block-muscular.msgpack")
    prices = bench_rows.load_prices()
    current = seed_table.table(rows, prices)
    assert "| **the default** | NVIDIA H100 80GB HBM3 |" in current and "bbbbbbb, 2026-12-02 |" in current
    assert "named option `--env solver=cg` (**physics changed**: the CG solver)" in current
    assert not any(c in current for c in ("aaaaaaa", "ddddddd", "eeeeeee"))
    earlier = seed_table.earlier_table(rows, prices)
    assert all(c in earlier for c in ("aaaaaaa", "ddddddd", "eeeeeee")) and "bbbbbbb" not in earlier
    assert "**option removed in 4ec4205**" in earlier and "acting: block-muscular.msgpack" in earlier
    every = seed_table.table(rows, prices, every=True)
    assert all(c in every for c in ("aaaaaaa", "bbbbbbb", "ccccccc", "ddddddd", "eeeeeee"))


def test_thirds_weigh_the_return_by_episodes_and_share_the_punches_arrived():
    metrics = [
        {"episode/count": 1.0, "episode/return": 100.0, "episode/fall_rate": 1.0, "env/punch/arrived": 4.0,
         "env/punch/blocked": 1.0, "env/punch/missed": 1.0, "env/punch/hit": 2.0},
        {"episode/count": 0.0, "episode/return": 0.0, "episode/fall_rate": 0.0, "env/punch/arrived": 0.0},
        {"episode/count": 3.0, "episode/return": 200.0, "episode/fall_rate": 0.0, "env/punch/arrived": 1.0,
         "env/punch/blocked": 1.0},
    ] * 3  # fmt: skip
    first, second, third = report.thirds(metrics, 9)
    assert first == second == third
    # return: (100 x 1 + 200 x 3) / 4 episodes; falls 1 of 4; punches: 2 of 5 blocked, 1 missed, 2 hit
    assert first == {"return": 175.0, "falls": 25.0, "blocked": 40.0, "missed": 20.0, "hit": 40.0}
    cells = report._cells([[first] * 3, [{**first, "return": 180.0, "falls": 30.0}] * 3])
    assert cells[0] == "175–180 / 175–180 / 175–180" and cells[1] == "25.0–30.0 / 25.0–30.0 / 25.0–30.0 %"
    assert cells[2] == "40 / 40 / 40 %"
