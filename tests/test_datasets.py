"""Reading dataset files into records and rendering samples; the real GSM8K/HumanEval/MMLU files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from evaltui.datasets import DatasetError, check_dataset, iter_records, load_records, open_records, render_sample
from evaltui.plan import DatasetConfig, Plan, load_plan

# tests/ -> repo root (/work/main) -> its parent, which holds shared/datasets.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets folder not found at {SHARED}")
MMLU_COLUMNS = ["question", "A", "B", "C", "D", "answer"]
MMLU_PROMPT = "{question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:"


def plan_for(folder: Path, **ds: Any) -> tuple[Plan, DatasetConfig]:
    """A plan with one lightllm model and one dataset (defaults: prompt {question}, target {answer})."""
    dataset = {"abbr": "d", "prompt": "{question}", "target": "{answer}", **ds}
    data = {"models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": [dataset]}
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    plan = load_plan(path, check_data=False)
    return plan, plan.datasets[0]


def records(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    return list(iter_records(path, columns))


# ---------------------------------------------------------------------------------------- jsonl


def test_a_checked_small_file_is_not_opened_again_when_its_records_are_taken_unless_it_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checking a plan reads each small data file whole and keeps its bytes: a dataset starting
    takes its records from them (10,000 small datasets opened none again); a file changed since
    (another size, mtime or inode) is read anew."""
    import os

    path = tmp_path / "d.jsonl"
    path.write_text('{"q": 0}\n{"q": 1}\n', encoding="utf-8")
    dataset = {"abbr": "d", "path": str(path), "prompt": "{q}", "target": "{q}"}
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tomli_w.dumps({"models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": [dataset]}))
    plan = load_plan(plan_path)  # checks the data: reads it
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda file, *a, **kw: opened.append(os.fspath(file)) or real_open(file, *a, **kw))
    assert list(open_records(plan, plan.datasets[0])) == [{"q": 0}, {"q": 1}]
    assert str(path) not in opened
    path.write_text('{"q": 0}\n{"q": 1}\n{"q": 2}\n', encoding="utf-8")
    assert list(open_records(plan, plan.datasets[0])) == [{"q": 0}, {"q": 1}, {"q": 2}]
    assert str(path) in opened


def test_a_resume_reads_only_the_records_it_still_needs(tmp_path: Path) -> None:
    """A resumed run skips its finished samples' lines unread: here they are not even JSON, and
    the records it needs still come with their own index (blank lines are not records)."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"q": 0}\nnot json\n\n{"q": 2}\nneither\n{"q": 4}\n', encoding="utf-8")
    got = list(iter_records(path, skip={1, 3}))
    assert got == [{"q": 0}, None, {"q": 2}, None, {"q": 4}]
    with pytest.raises(DatasetError, match="line 2: not valid JSON"):
        list(iter_records(path, skip={3}))
    plan, ds = plan_for(tmp_path, path=str(path), prompt="{q}", target="{q}")
    assert list(open_records(plan, ds, skip={0, 1, 2, 3, 4})) == [None] * 5  # all done: still five places


def test_jsonl_skips_blank_lines_and_keeps_order(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"q": 1}\n\n   \n{"q": 2, "nested": {"x": [1, 2]}}\r\n{"q": "tr\\u00e8s"}', encoding="utf-8")
    assert records(p) == [{"q": 1}, {"q": 2, "nested": {"x": [1, 2]}}, {"q": "très"}]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"q": 1}\n\n{"q": \n', ("line 3", "not valid JSON")),
        ('{"q": 1}\n[1, 2]\n', ("line 2", "expected a JSON object", "list")),
        ('"just a string"\n', ("line 1", "expected a JSON object", "str")),
        ('{"q": 1}\n{"q": 2}\nnull\n', ("line 3", "expected a JSON object")),
    ],
    ids=["invalid-json", "array-line", "string-line", "null-line"],
)
def test_jsonl_bad_line_names_the_line(tmp_path: Path, content: str, words: tuple[str, ...]) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        records(p)
    msg = str(info.value)
    assert "bad.jsonl" in msg
    for w in words:
        assert w in msg


def test_jsonl_gz(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl.gz"
    rows = [{"task_id": f"T/{i}", "prompt": "def f():\n"} for i in range(3)]
    p.write_bytes(gzip.compress(("\n".join(json.dumps(r) for r in rows) + "\n\n").encode()))
    assert records(p) == rows


def test_corrupt_gzip_is_a_dataset_error(tmp_path: Path) -> None:
    raw = bytearray(gzip.compress(b'{"q": 1}\n' * 2000))
    for i in range(30, 60):  # damage the deflate stream itself
        raw[i] ^= 0xFF
    p = tmp_path / "broken.jsonl.gz"
    p.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match="broken.jsonl.gz"):
        records(p)
    truncated = tmp_path / "short.jsonl.gz"
    truncated.write_bytes(gzip.compress(b'{"q": 1}\n' * 2000)[:-20])
    with pytest.raises(DatasetError, match="short.jsonl.gz"):
        records(truncated)


def test_not_utf8_is_a_dataset_error(tmp_path: Path) -> None:
    p = tmp_path / "latin.jsonl"
    p.write_bytes(b'{"q": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match="latin.jsonl"):
        records(p)


def test_byte_order_mark_is_not_part_of_the_data(tmp_path: Path) -> None:
    j = tmp_path / "bom.jsonl"
    j.write_bytes('\ufeff{"q": 1}\n'.encode())
    assert records(j) == [{"q": 1}]
    c = tmp_path / "bom.csv"
    c.write_bytes("\ufeffquestion,answer\nx,1\n".encode())
    assert records(c) == [{"question": "x", "answer": "1"}]


# ----------------------------------------------------------------------------------------- json


def test_json_list_of_objects(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text(json.dumps([{"q": 1}, {"q": 2}]), encoding="utf-8")
    assert records(p) == [{"q": 1}, {"q": 2}]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"data": [{"q": 1}]}', ("expected a JSON array", "dict")),
        ('[{"q": 1}, 5]', ("item 1", "expected a JSON object")),
        ('[{"q": 1},', ("not valid JSON",)),
    ],
    ids=["object-not-list", "non-object-item", "invalid"],
)
def test_json_errors(tmp_path: Path, content: str, words: tuple[str, ...]) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        records(p)
    for w in ("bad.json", *words):
        assert w in str(info.value)


# ------------------------------------------------------------------------------------------ csv


def test_csv_with_header(tmp_path: Path) -> None:
    p = tmp_path / "d.csv"
    p.write_text('question,answer\n"Is 1,000 > 999?",yes\n\nplain,no\n', encoding="utf-8")
    assert records(p) == [{"question": "Is 1,000 > 999?", "answer": "yes"}, {"question": "plain", "answer": "no"}]


def test_csv_without_header_uses_columns_mmlu_style(tmp_path: Path) -> None:
    p = tmp_path / "mmlu.csv"
    p.write_text(
        '"Which, if any?","True, True","line one\nline two",x,"say ""hi""",A\r\nSecond,1,2,3,4,D\r\n', encoding="utf-8"
    )
    rows = records(p, MMLU_COLUMNS)
    assert rows == [
        {"question": "Which, if any?", "A": "True, True", "B": "line one\nline two", "C": "x", "D": 'say "hi"', "answer": "A"},
        {"question": "Second", "A": "1", "B": "2", "C": "3", "D": "4", "answer": "D"},
    ]
    # Without columns the first row would be taken as a header: one record fewer.
    assert len(records(p)) == 1


@pytest.mark.parametrize(
    ("content", "columns", "row"),
    [
        ("a,b,c,d,e,A\nq,1,2,3,A\n", MMLU_COLUMNS, "row 2"),
        ("a,b,c,d,e,A,extra\n", MMLU_COLUMNS, "row 1"),
        ("question,answer\nx,1\ny,2,3\n", None, "row 3"),
    ],
    ids=["short-row", "long-row", "header-file"],
)
def test_csv_row_of_wrong_width_names_the_row(tmp_path: Path, content: str, columns: list[str] | None, row: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        records(p, columns)
    assert "bad.csv" in str(info.value) and row in str(info.value)


def test_a_headerless_csv_without_columns_is_told_to_set_them(tmp_path: Path) -> None:
    """`record 0 has no field 'B', … (its fields: 12, 4, 6, 8, A, The cyclic subgroup…)`: its first
    row was read as the header; the problem now says so, and what to set."""
    (tmp_path / "mmlu.csv").write_text("The cyclic subgroup of Z_24 generated by 18 has order,4,6,8,12,A\nSecond,1,2,3,4,D\n", encoding="utf-8")
    plan, ds = plan_for(tmp_path, path="mmlu.csv", prompt="{question}\nA. {A}\nB. {B}", target="{answer}")
    problems = check_dataset(plan, ds)
    assert problems and all("a file without one needs `columns`" in p for p in problems), problems
    plan, ds = plan_for(tmp_path, path="mmlu.csv", prompt="{question} {A}", target="{answer}", columns=MMLU_COLUMNS)
    assert check_dataset(plan, ds) == []


def test_empty_csv_has_no_records(tmp_path: Path) -> None:
    p = tmp_path / "empty.csv"
    p.write_text("", encoding="utf-8")
    assert records(p) == [] and records(p, ["a"]) == []


# ---------------------------------------------------------------------------- load, check, render


def test_load_records_limit(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"question": i, "answer": i}) + "\n" for i in range(10)))
    plan, ds = plan_for(tmp_path, path="d.jsonl", limit=3)
    assert [r["question"] for r in load_records(plan, ds)] == [0, 1, 2]
    plan, ds = plan_for(tmp_path, path="d.jsonl")
    assert len(load_records(plan, ds)) == 10
    plan, ds = plan_for(tmp_path, path="d.jsonl", limit=50)
    assert len(load_records(plan, ds)) == 10


def test_loaded_records_share_their_field_names(tmp_path: Path) -> None:
    """Records held for a run must not each keep their own copy of every field name."""
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"question": f"q{i}", "answer": i}) + "\n" for i in range(3)))
    plan, ds = plan_for(tmp_path, path="d.jsonl")
    recs = load_records(plan, ds)
    assert recs == [{"question": f"q{i}", "answer": i} for i in range(3)]
    assert all(a is b for r in recs[1:] for a, b in zip(r, recs[0], strict=False))


def test_check_dataset_reports_missing_fields_with_the_record_index(tmp_path: Path) -> None:
    rows = [{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}, {"question": "c", "hint": "h"}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plan, ds = plan_for(tmp_path, path="d.jsonl", system="{hint}")
    problems = check_dataset(plan, ds)
    assert "system: record 0 has no field 'hint' (its fields: answer, question)" in problems
    assert "target: record 2 has no field 'answer' (its fields: hint, question)" in problems
    assert len(problems) == 2
    plan, ds = plan_for(tmp_path, path="d.jsonl", limit=2)  # record 2 is past the limit
    assert check_dataset(plan, ds) == []


def test_check_dataset_renders_what_a_presence_check_cannot_vouch_for(tmp_path: Path) -> None:
    """Records of strings under bare `{field}` templates are only checked for their fields; any
    other value, or a template with a spec or an index, is rendered as the run will render it."""
    rows = [
        {"question": "a", "answer": "1", "n": 1},
        {"question": 7, "answer": None, "n": 2},  # not strings, yet `{question}` renders them
        {"question": ["x"], "answer": "3", "n": "three"},  # `{n:03d}` cannot format a string
        {"question": "d", "n": 4},  # no answer
        {"question": "e", "answer": "5"},  # no n: already reported for the prompt
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plan, ds = plan_for(tmp_path, path="d.jsonl")
    assert check_dataset(plan, ds) == ["target: record 3 has no field 'answer' (its fields: n, question)"]
    plan, ds = plan_for(tmp_path, path="d.jsonl", prompt="{question} #{n:03d}")
    assert check_dataset(plan, ds) == [
        "prompt: record 2 cannot fill this template: ValueError: Unknown format code 'd' for object of type 'str'",
        "target: record 3 has no field 'answer' (its fields: n, question)",
    ]


def test_check_dataset_empty_and_unreadable(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    plan, ds = plan_for(tmp_path, path="empty.jsonl")
    assert check_dataset(plan, ds) == ["path: empty.jsonl has no records"]
    (tmp_path / "bad.jsonl").write_text('{"question": 1, "answer": 2}\nnope\n')
    plan, ds = plan_for(tmp_path, path="bad.jsonl")
    (problem,) = check_dataset(plan, ds)
    assert problem.startswith("path: ") and "bad.jsonl line 2" in problem


def test_render_sample_formats_every_template(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("")
    plan, ds = plan_for(
        tmp_path,
        path="d.jsonl",
        prompt="Q: {question}\nOptions: {opts[0]} / {opts[1]} ({meta[level]})",
        system="You are {role}.",
        target="{answer}",
        mode="ppl",
        choices=[" {opts[0]}", " {opts[1]}"],
        evaluator={"type": "ppl"},
    )
    rec = {"question": "2+2?", "opts": ["4", "5"], "meta": {"level": "easy"}, "role": "a tutor", "answer": "4"}
    s = render_sample(ds, 7, rec)
    assert s.index == 7
    assert s.prompt == "Q: 2+2?\nOptions: 4 / 5 (easy)"
    assert s.system == "You are a tutor."
    assert s.target == "4"
    assert s.choices == (" 4", " 5")


@pytest.mark.parametrize(("gold", "expected"), [(0, "0"), ("", ""), (0.0, "0.0"), (False, "False"), ("0", "0")])
def test_falsy_gold_is_kept(tmp_path: Path, gold: Any, expected: str) -> None:
    (tmp_path / "d.jsonl").write_text("")
    plan, ds = plan_for(tmp_path, path="d.jsonl")
    s = render_sample(ds, 0, {"question": "q", "answer": gold})
    assert s.target == expected
    assert s.system == "" and s.choices == ()


def test_literal_braces_in_templates(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(json.dumps({"question": "x", "answer": "y"}) + "\n")
    plan, ds = plan_for(tmp_path, path="d.jsonl", prompt='Reply as JSON {{"answer": ...}}: {question}')
    assert check_dataset(plan, ds) == []
    assert render_sample(ds, 0, {"question": "x", "answer": "y"}).prompt == 'Reply as JSON {"answer": ...}: x'


# ------------------------------------------------------------------------------------ real data


@needs_shared
def test_gsm8k_test_split() -> None:
    rows = records(SHARED / "gsm8k" / "test.jsonl")
    assert len(rows) == 1319
    assert all(set(r) == {"question", "answer"} for r in rows)
    assert all("####" in r["answer"] for r in rows)


@needs_shared
def test_humaneval_gz() -> None:
    rows = records(SHARED / "humaneval" / "HumanEval.jsonl.gz")
    assert len(rows) == 164
    keys = {"task_id", "prompt", "canonical_solution", "test", "entry_point"}
    assert all(keys <= set(r) for r in rows)
    assert rows[0]["task_id"] == "HumanEval/0" and rows[-1]["task_id"] == "HumanEval/163"


@needs_shared
def test_mmlu_val_all_files_count() -> None:
    files = sorted((SHARED / "mmlu" / "data" / "val").glob("*.csv"))
    assert len(files) == 57
    total = 0
    for f in files:
        rows = records(f, MMLU_COLUMNS)
        assert all(r["answer"] in ("A", "B", "C", "D") for r in rows), f.name
        total += len(rows)
    assert total == 1542


@needs_shared
def test_plan_over_real_datasets_loads_and_renders(tmp_path: Path) -> None:
    mmlu = SHARED / "mmlu" / "data" / "val" / "abstract_algebra_val.csv"
    data = {
        "models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}],
        "datasets": [
            {"abbr": "mmlu-aa", "path": str(mmlu), "columns": MMLU_COLUMNS, "prompt": MMLU_PROMPT, "target": "{answer}", "evaluator": {"type": "choice"}},
            {"abbr": "gsm8k", "path": str(SHARED / "gsm8k" / "test.jsonl"), "prompt": "Question: {question}\nAnswer:", "target": "{answer}", "limit": 5, "evaluator": {"type": "gsm8k"}},
            {"abbr": "humaneval", "path": str(SHARED / "humaneval" / "HumanEval.jsonl.gz"), "prompt": "{prompt}", "target": "{canonical_solution}", "evaluator": {"type": "code_exec"}},
        ],
    }
    path = tmp_path / "real.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    plan = load_plan(path)  # checks every record against the templates

    aa = plan.dataset("mmlu-aa")
    rows = load_records(plan, aa)
    assert len(rows) == 11
    s = render_sample(aa, 0, rows[0])
    assert s.prompt.startswith("The cyclic subgroup of Z_24 generated by 18 has order\nA. 4\nB. 8\nC. 12\nD. 6\nAnswer:")
    assert s.target == "A"
    third = render_sample(aa, 2, rows[2])  # quoted options with commas
    assert "\nA. True, True\nB. False, False\n" in third.prompt

    gsm = load_records(plan, plan.dataset("gsm8k"))
    assert len(gsm) == 5
    g = render_sample(plan.dataset("gsm8k"), 0, gsm[0])
    assert g.prompt.startswith("Question: ") and "####" in g.target

    he = load_records(plan, plan.dataset("humaneval"))
    assert len(he) == 164
    h = render_sample(plan.dataset("humaneval"), 0, he[0])
    assert h.prompt.startswith("from typing import List") and h.target.strip()


def test_a_csv_header_that_names_the_given_columns_is_not_a_record(tmp_path: Path) -> None:
    from evaltui.datasets import iter_records

    path = tmp_path / "mmlu.csv"
    path.write_text("question,A,B,answer\nWhat?,x,y,A\n", encoding="utf-8")
    assert list(iter_records(path, ["question", "A", "B", "answer"])) == [{"question": "What?", "A": "x", "B": "y", "answer": "A"}]


# ------------------------------------------------------------------------- bounds (issue 23)


@pytest.mark.reliability
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_dataset_path_that_is_a_folder_or_a_fifo_is_said_as_such(tmp_path: Path, kind: str) -> None:
    """Both were 'file not found'; a FIFO would hang whatever read it."""
    import os

    path = tmp_path / "d.jsonl"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    plan_path = tmp_path / "plan.toml"
    dataset = {"abbr": "d", "path": "d.jsonl", "prompt": "{question}", "target": "{answer}"}
    plan_path.write_text(tomli_w.dumps({"models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": [dataset]}))
    from evaltui.plan import PlanError

    with pytest.raises(PlanError) as e:
        load_plan(plan_path)
    shown = {"folder": "a folder", "fifo": "a FIFO (named pipe)"}[kind]
    assert e.value.problems == [f"plan.toml: datasets[0].path: {path} is {shown}, not a data file"]
    with pytest.raises(DatasetError, match=rf"d.jsonl: cannot read: it is {shown.replace('(', '.').replace(')', '.')}, not a regular file"):
        list(iter_records(path))  # and a reader never waits on it


@pytest.mark.reliability
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_record_longer_than_the_bound_is_refused_naming_its_line_without_reading_it_whole(tmp_path: Path, suffix: str) -> None:
    """A sparse file of one 2 GB line of NULs was read whole (4.2 GB) before it was refused: a line
    is read no further than MAX_RECORD_CHARS. (Here 40 MiB: the point is where reading stops.)"""
    from evaltui.datasets import MAX_RECORD_CHARS

    path = tmp_path / f"d{suffix}"
    with open(path, "wb") as f:
        f.write(b'{"question": "a", "answer": "1"}\n' if suffix == ".jsonl" else b"question,answer\na,1\n")
        f.truncate(40 << 20)  # the rest: NULs, no newline
    with pytest.raises(DatasetError) as e:
        list(iter_records(path))
    line = 2 if suffix == ".jsonl" else 3
    assert str(e.value) == f"d{suffix} line {line}: longer than {MAX_RECORD_CHARS:,} characters, the most a record may be (is it a data file?)"


@pytest.mark.reliability
def test_a_format_spec_that_would_pad_a_prompt_to_a_gigabyte_is_refused(tmp_path: Path) -> None:
    """`{question:>999999999}` was accepted and built 1 GB prompts; a spec's width and precision
    are bounded when the plan loads, and when they come from the record, as it is filled."""
    (tmp_path / "d.jsonl").write_text('{"question": "a", "answer": "1", "w": 5}\n{"question": "b", "answer": "2", "w": 999999999}\n')
    from evaltui.plan import PlanError

    with pytest.raises(PlanError) as e:
        plan_for(tmp_path, path="d.jsonl", prompt="{question:>999999999}")
    assert e.value.problems == [
        "plan.toml: datasets[0].prompt: invalid template: '{question:>999999999}' asks for a width of 999,999,999 characters; a format spec may ask for at most 10,000"
    ]
    with pytest.raises(PlanError, match=r"datasets\[0\].target: invalid template: '\{answer:.100000\}' asks for a precision of 100,000 characters"):
        plan_for(tmp_path, path="d.jsonl", target="{answer:.100000}")
    plan, ds = plan_for(tmp_path, path="d.jsonl", prompt="{question:>{w}}")
    assert check_dataset(plan, ds) == [
        "prompt: the format spec '>999999999' (filled from the record) asks for a width of 999,999,999 characters; a format spec may ask for at most 10,000"
    ]
    assert render_sample(ds, 0, {"question": "a", "answer": "1", "w": 5}).prompt == "    a"


@pytest.mark.reliability
def test_a_prompt_longer_than_the_bound_is_refused_naming_its_record(tmp_path: Path) -> None:
    """A record within its own bound can still render past the prompt's (a field named twice)."""
    from evaltui.templates import MAX_PROMPT_CHARS, TemplateError

    big = "x" * (MAX_PROMPT_CHARS // 2 + 1)
    (tmp_path / "d.jsonl").write_text(json.dumps({"question": "a", "answer": "1"}) + "\n" + json.dumps({"question": big, "answer": "2"}) + "\n")
    plan, ds = plan_for(tmp_path, path="d.jsonl", prompt="{question}\n\n{question}")
    said = f"record 1 renders to {2 * len(big) + 2:,} characters, more than the {MAX_PROMPT_CHARS:,} a prompt may be"
    assert check_dataset(plan, ds) == [f"prompt: {said}"]
    with pytest.raises(TemplateError, match=said):
        render_sample(ds, 1, {"question": big, "answer": "2"})
    plan, ds = plan_for(tmp_path, path="d.jsonl", prompt="{question}")
    assert check_dataset(plan, ds) == []  # once fits
