"""The leaderboard: content, averages, ranking, the three renderings and the files."""

from __future__ import annotations

from datetime import datetime

from evaltui.scoring import (
    DatasetRow,
    RankedModel,
    build_leaderboard,
    rank_models,
    render_csv,
    render_md,
    render_txt,
    write_summary,
)

DATASETS = [
    ("gsm8k", "1d7fe4", "accuracy", "gen"),
    ("humaneval", "8e312c", "pass@1", "gen"),
    ("mmlu_ppl", "a1b2c3", "accuracy", "ppl"),
]
MODELS = ["llama-7b", "qwen2-7b-chat"]
SCORES = {
    ("llama-7b", "gsm8k"): 71.234,
    ("llama-7b", "humaneval"): 12.2,
    ("llama-7b", "mmlu_ppl"): 45.0,
    ("qwen2-7b-chat", "gsm8k"): 80.5,
    ("qwen2-7b-chat", "humaneval"): None,  # known but not scored yet
}


def table():
    return build_leaderboard(DATASETS, MODELS, SCORES)


def test_content_rows_and_missing_cells():
    t = table()
    assert t.header == ["dataset", "version", "metric", "mode", "llama-7b", "qwen2-7b-chat"]
    assert t.datasets[0] == DatasetRow("gsm8k", "1d7fe4", "accuracy", "gen")
    assert t.rows() == [
        ["gsm8k", "1d7fe4", "accuracy", "gen", "71.23", "80.50"],
        ["humaneval", "8e312c", "pass@1", "gen", "12.20", "-"],
        ["mmlu_ppl", "a1b2c3", "accuracy", "ppl", "45.00", "-"],
        ["Average", "-", "naive_average", "-", "42.81", "-"],
    ]


def test_average_only_when_every_dataset_is_scored():
    t = table()
    assert abs(t.average("llama-7b") - (71.234 + 12.2 + 45.0) / 3) < 1e-9
    assert t.average("qwen2-7b-chat") is None
    assert t.average("unknown-model") is None


def test_zero_score_counts_as_a_score():
    t = build_leaderboard(DATASETS[:2], ["m"], {("m", "gsm8k"): 0.0, ("m", "humaneval"): 50.0})
    assert t.average("m") == 25.0
    assert t.rows()[0][-1] == "0.00"


def test_ranking_uses_partial_means_and_counts():
    ranked = rank_models(table())
    assert ranked[0] == RankedModel("qwen2-7b-chat", 80.5, 1, 3)
    assert ranked[1].model == "llama-7b" and ranked[1].scored == 3 and ranked[1].total == 3


def test_ranking_ties_and_unscored_models():
    t = build_leaderboard(
        DATASETS[:2],
        ["none", "one", "two", "also-two"],
        {("one", "gsm8k"): 50.0, ("two", "gsm8k"): 40.0, ("two", "humaneval"): 60.0,
         ("also-two", "gsm8k"): 50.0, ("also-two", "humaneval"): 50.0},
    )
    assert [(r.model, r.average, r.scored) for r in t.ranking()] == [
        ("two", 50.0, 2),  # same mean as "one": more datasets first
        ("also-two", 50.0, 2),  # then the configured order
        ("one", 50.0, 1),
        ("none", None, 0),
    ]


def test_empty_table():
    t = build_leaderboard([], ["m"], {})
    assert t.rows() == [["Average", "-", "naive_average", "-", "-"]]
    assert t.ranking() == [RankedModel("m", None, 0, 0)]


TXT = """\
dataset    version  metric         mode  llama-7b  qwen2-7b-chat
---------  -------  -------------  ----  --------  -------------
gsm8k      1d7fe4   accuracy       gen      71.23          80.50
humaneval  8e312c   pass@1         gen      12.20              -
mmlu_ppl   a1b2c3   accuracy       ppl      45.00              -
Average    -        naive_average  -        42.81              -
"""

CSV = """\
dataset,version,metric,mode,llama-7b,qwen2-7b-chat
gsm8k,1d7fe4,accuracy,gen,71.23,80.50
humaneval,8e312c,pass@1,gen,12.20,-
mmlu_ppl,a1b2c3,accuracy,ppl,45.00,-
Average,-,naive_average,-,42.81,-
"""

MD = """\
| dataset   | version | metric        | mode | llama-7b | qwen2-7b-chat |
|-----------|---------|---------------|------|---------:|--------------:|
| gsm8k     | 1d7fe4  | accuracy      | gen  |    71.23 |         80.50 |
| humaneval | 8e312c  | pass@1        | gen  |    12.20 |             - |
| mmlu_ppl  | a1b2c3  | accuracy      | ppl  |    45.00 |             - |
| Average   | -       | naive_average | -    |    42.81 |             - |
"""


def test_render_txt():
    assert render_txt(table()) == TXT


def test_render_csv():
    assert render_csv(table()) == CSV


def test_render_md():
    assert render_md(table()) == MD


def test_renderers_quote_and_escape_awkward_names():
    t = build_leaderboard([("a,b|c", "000000", "accuracy", "gen")], ['my "model"'], {})
    assert render_csv(t).splitlines()[1] == '"a,b|c",000000,accuracy,gen,-'
    assert '"my ""model"""' in render_csv(t).splitlines()[0]
    assert "a,b\\|c" in render_md(t)


def test_no_ansi_anywhere():
    for text in (render_txt(table()), render_csv(table()), render_md(table())):
        assert "\x1b" not in text


def test_write_summary(tmp_path):
    paths = write_summary(tmp_path, table(), now=datetime(2024, 5, 6, 7, 8, 9))
    assert set(paths) == {"txt", "csv", "md"}
    for ext, path in paths.items():
        assert path == tmp_path / "summary" / f"summary_20240506_070809.{ext}"
    assert paths["txt"].read_text(encoding="utf-8") == TXT
    assert paths["csv"].read_text(encoding="utf-8") == CSV
    assert paths["md"].read_text(encoding="utf-8") == MD
    assert sorted(p.name for p in (tmp_path / "summary").iterdir()) == [
        "summary_20240506_070809.csv", "summary_20240506_070809.md", "summary_20240506_070809.txt",
    ]  # no temporary files left behind


def test_write_summary_defaults_to_now(tmp_path):
    paths = write_summary(tmp_path, table())
    assert paths["txt"].is_file()
    assert paths["txt"].name.startswith("summary_") and len(paths["txt"].stem) == len("summary_YYYYmmdd_HHMMSS")


def test_rows_are_made_once_and_handed_out_as_copies():
    """The rows are kept (a run's end renders the same 10,000-row table four times): a caller
    that changes the lists it got changes neither the table nor what the next caller gets."""
    t = table()
    first = t.rows()
    first[0][4] = "changed"
    first.append(["extra"])
    assert t.rows() == table().rows()
    assert t.rows(intervals=False) == table().rows(intervals=False)
    assert render_txt(t) == render_txt(table())
