"""pairwise (issue 27) against a baseline FILE of answers, and ArenaHard's `[[A>>B]]` scale.

The tested model answers every item right; the baseline file's answers are the right number
moved by a known `delta`, so the simulator judging by a rule (sim/answers.py: `pair_reply` for
FastChat's pair-v2 — the larger last number wins, equal ones go to A; `arena_reply` for
ArenaHard's prompt — the difference's sign and size give the label, after every label quoted)
gives verdicts a test knows in advance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from planmaker import chat, key_for, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.plan.baseline import read_baseline_file
from evaltui.scoring.judges.arena_hard import PROMPT_TEMPLATE, SYSTEM_PROMPT, ArenaHard
from evaltui.sim import ModelProfile, SimConfig

ROWS = [{"question": f"Item {i}: which code does it carry?", "answer": str(100 + 7 * i), "question_id": f"q{i}"} for i in range(12)]
#: The baseline's answer to sample i is the right one + DELTA[i]; sample 11 is not in the file.
DELTA = [-7, -2, 0, 2, 7, 0, -1, 1, -9, 9, 0]


def _baseline_rows(delta: list[int] = DELTA) -> list[dict[str, Any]]:
    return [{"index": i, "answer": f"The code is {int(ROWS[i]['answer']) + d}."} for i, d in enumerate(delta)]


def _plan(tmp: Path, tested_url: str, judge_url: str, **evaluator: Any) -> Path:
    ds = {"abbr": "qa", "path": str(write_jsonl(tmp / "qa.jsonl", ROWS)), "prompt": "{question}", "target": "{answer}",
          "evaluator": {"type": "pairwise", "judge": "grader", "baseline_file": "base.jsonl", **evaluator}}
    models = [chat("m", tested_url), {**chat("grader", judge_url), "role": "judge"}]
    return write_plan(tmp, models=models, datasets=[ds])


def _servers(sim_factory: Any) -> tuple[Any, Any]:
    tested = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=1.0)}))
    return tested, sim_factory(SimConfig(record_bodies=True))


def _result(runner: Any) -> dict[str, Any]:
    return json.loads(runner.workdir.result_file("m", "qa").read_text())


def _pair_v2_value(d: int) -> float:
    """The model's value against a baseline d above it: a larger number wins both orders, an equal one splits them."""
    return 1.0 if d < 0 else 0.0 if d > 0 else 0.5


def test_a_baseline_file_gives_the_exact_win_rate_both_orders_asked(tmp_path: Path, sim_factory: Any) -> None:
    tested, judge = _servers(sim_factory)
    write_jsonl(tmp_path / "base.jsonl", _baseline_rows())
    code, _, runner = run_plan(_plan(tmp_path, tested.url, judge.url))
    assert code == 0
    result = _result(runner)
    values = [_pair_v2_value(d) for d in DELTA] + [0.0]  # sample 11: no baseline answer, a failed unit
    assert [d["scores"]["win_rate"] for d in result["details"]] == values
    assert result["win_rate"] == round(100 * sum(values) / len(ROWS), 2)
    assert [d["extracted"] for d in result["details"][:4]] == ["A B", "A B", "A A", "B A"]  # won as A and as B; equal: A each time; lost both
    missing = result["details"][11]
    assert missing["error"] == "judge" and "base.jsonl has no answer for sample 11" in missing["why"]
    sent = [r.prompt for r in judge.stats.log]
    assert len(sent) == 2 * len(DELTA)  # both orders of every sample the file has, sample 11 never
    first = [p for p in sent if ROWS[0]["question"] in p]
    a_answers = sorted(p.split("[The Start of Assistant A's Answer]\n")[1].split("\n")[0] for p in first)
    assert a_answers == sorted([ROWS[0]["answer"], "The code is 93."])  # the model as A, then the baseline as A


def test_a_changed_baseline_file_judges_again(tmp_path: Path, sim_factory: Any) -> None:
    tested, judge = _servers(sim_factory)
    write_jsonl(tmp_path / "base.jsonl", _baseline_rows())
    plan = _plan(tmp_path, tested.url, judge.url)
    assert run_plan(plan)[0] == 0 and len(judge.stats.log) == 2 * len(DELTA)
    result_file = tmp_path / "out" / "results" / "m" / "qa.json"
    result_file.unlink()
    judge.reset_stats()
    assert run_plan(plan)[0] == 0 and judge.stats.requests_total == 0  # the same file: every verdict on disk
    result_file.unlink()
    write_jsonl(tmp_path / "base.jsonl", [{**row, "model_id": "gpt-4-0314"} for row in _baseline_rows()])
    code, _, runner = run_plan(plan)
    assert code == 0 and judge.stats.requests_total == 2 * len(DELTA)  # the same answers, another file: judged again
    assert _result(runner)["win_rate"] == round(100 * (sum(_pair_v2_value(d) for d in DELTA)) / len(ROWS), 2)
    result_file.unlink()
    judge.reset_stats()
    changed = [-d for d in DELTA]  # every sample's baseline answer moved to the other side
    write_jsonl(tmp_path / "base.jsonl", _baseline_rows(changed))
    code, _, runner = run_plan(plan)
    assert code == 0 and judge.stats.requests_total == 2 * len(DELTA)  # another file: judged again
    values = [_pair_v2_value(d) for d in changed] + [0.0]
    assert _result(runner)["win_rate"] == round(100 * sum(values) / len(ROWS), 2)


def _label(d: int) -> str:
    """arena_reply's label when A's number is d above B's."""
    return "A>>B" if d >= 5 else "A>B" if d > 0 else "A=B" if d == 0 else "B>A" if d > -5 else "B>>A"


def test_arena_hards_scale_reads_the_last_label_in_both_orders(tmp_path: Path, sim_factory: Any) -> None:
    tested, judge = _servers(sim_factory)
    write_jsonl(tmp_path / "base.jsonl", _baseline_rows())
    code, _, runner = run_plan(_plan(tmp_path, tested.url, judge.url, scale="arena_hard"))
    assert code == 0
    result = _result(runner)
    # the model as A is -d above the baseline, as B the baseline is d above it: B>>A when the model is
    # B and far ahead is a win, read as one (the swapped order counted for the model, not for A)
    assert [d["extracted"] for d in result["details"][:11]] == [f"{_label(-d)} {_label(d)}" for d in DELTA]
    values = [1.0 if d < 0 else 0.0 if d > 0 else 0.5 for d in DELTA] + [0.0]  # a strong win counts once, as a slight one
    assert [d["scores"]["win_rate"] for d in result["details"]] == values
    assert result["win_rate"] == round(100 * sum(values) / len(ROWS), 2)
    bodies = [r.body for r in judge.stats.log]
    assert len(bodies) == 2 * len(DELTA)
    assert all(b is not None and b["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT} for b in bodies)
    assert all(r.prompt.startswith("<|User Prompt|>\n") for r in judge.stats.log)


def test_arena_hards_labels_and_their_values() -> None:
    reply = "1. Assistant A is significantly better: [[A>>B]] ... so: My final verdict is Assistant B is slightly better: [[B>A]]"
    assert ArenaHard.grade(reply) == "B>A"  # the last label, not the first quoted
    assert ArenaHard.grade("[[A>B]]") == "A>B" and ArenaHard.grade("[[A<B]]") is None and ArenaHard.grade("A>>B") is None
    # order 0: the model is A; order 1: the model is B
    assert [ArenaHard.value(g, 0) for g in ("A>>B", "A>B", "A=B", "B>A", "B>>A")] == [1.0, 1.0, 0.5, 0.0, 0.0]
    assert [ArenaHard.value(g, 1) for g in ("A>>B", "A>B", "A=B", "B>A", "B>>A")] == [0.0, 0.0, 0.5, 1.0, 1.0]
    assert "{question_1}" in PROMPT_TEMPLATE and SYSTEM_PROMPT.endswith('Example output: "My final verdict is tie: [[A=B]]".')


def test_evaltuis_own_predictions_as_the_baseline_file(tmp_path: Path, sim_factory: Any) -> None:
    """Another work dir's predictions of a model are the same baseline as that model in the plan."""
    tested = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=0.5), "b": ModelProfile(accuracy=1.0)}))
    judge = sim_factory(SimConfig())
    ds = {"abbr": "qa", "path": str(write_jsonl(tmp_path / "qa.jsonl", ROWS)), "prompt": "{question}", "target": "{answer}",
          "evaluator": {"type": "pairwise", "judge": "grader", "baseline": "b"}}
    models = [chat("m", tested.url), chat("b", tested.url), {**chat("grader", judge.url), "role": "judge"}]
    code, _, first = run_plan(write_plan(tmp_path, models=models, datasets=[ds]))
    assert code == 0
    with_model = _result(first)["win_rate"]
    assert 50.0 < with_model < 100.0  # m is wrong (larger) on some items only
    other = tmp_path / "again"
    other.mkdir()
    ds_file = {**ds, "evaluator": {"type": "pairwise", "judge": "grader", "baseline_file": str(first.workdir.predictions_file("b", "qa"))}}
    code, _, second = run_plan(write_plan(other, models=[models[0], models[2]], datasets=[ds_file]))
    assert code == 0
    assert _result(second)["win_rate"] == with_model


def test_rows_keyed_by_an_id_in_fastchats_answer_layout(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "gpt-4-0314.jsonl", [
        {"question_id": "q1", "model_id": "gpt-4-0314", "choices": [{"index": 0, "turns": [{"content": "one"}]}]},
        {"question_id": "q3", "choices": [{"index": 0, "turns": ["three"]}]},
    ])
    found = read_baseline_file(str(path))
    assert found.by == "question_id"
    assert found.for_records(ROWS) == {1: ["one"], 3: ["three"]}  # matched on the record's question_id


BAD = [
    ("both baselines", {"baseline": "m"}, None, "datasets[0].evaluator.baseline_file: the baseline is a model of the plan (baseline) or a file of its answers (baseline_file), not both"),
    ("a missing file", {"baseline_file": "absent.jsonl"}, None, "datasets[0].evaluator.baseline_file: cannot read {tmp}/absent.jsonl: No such file or directory"),
    ("a row without an answer", {}, '{"index": 0, "answer": "x"}\n{"index": 1, "reply": "y"}\n',
     "datasets[0].evaluator.baseline_file: {tmp}/base.jsonl line 2: no answer (a string \"answer\""),
    ("a row without a key", {}, '{"answer": "x"}\n', "datasets[0].evaluator.baseline_file: {tmp}/base.jsonl line 1: no sample key (index, or an id field: id, question_id, uid)"),
    ("a row that is not JSON", {}, '{"index": 0, "answer": "x"}\nnot json\n', "datasets[0].evaluator.baseline_file: {tmp}/base.jsonl line 2: not JSON"),
    ("the same sample twice", {}, '{"index": 0, "answer": "x"}\n{"index": 0, "answer": "y"}\n', "line 2: a second answer for index 0"),
    ("an empty file", {}, "\n", "datasets[0].evaluator.baseline_file: {tmp}/base.jsonl has no answers"),
    ("a .json that is not predictions", {"baseline_file": "base.json"}, None, "datasets[0].evaluator.baseline_file: {tmp}/base.json: not evaltui's predictions"),
    ("a baseline file for another evaluator", {"type": "exact", "judge": None}, None, 'datasets[0].evaluator.baseline_file: only type = "pairwise" reads it, not exact'),
    ("a scale for another evaluator", {"type": "exact", "judge": None, "baseline_file": None, "scale": "arena_hard"}, None,
     'datasets[0].evaluator.scale: only type = "pairwise" reads it, not exact'),
    ("an unknown scale", {"scale": "elo"}, None, "datasets[0].evaluator.scale"),
    ("no baseline at all", {"baseline_file": None}, None, "datasets[0].evaluator.baseline: pairwise judges each answer against a baseline model's: name one (m), or give baseline_file"),
]


@pytest.mark.parametrize(("case", "change", "content", "said"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_baseline_is_one_line_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, change: dict[str, Any],
                                                     content: str | None, said: str) -> None:
    (tmp_path / "base.jsonl").write_text(content if content is not None else '{"index": 0, "answer": "x"}\n', encoding="utf-8")
    (tmp_path / "base.json").write_text('[{"index": 0, "answer": "x"}]', encoding="utf-8")
    evaluator = {"type": "pairwise", "judge": "grader", "baseline_file": "base.jsonl", **change}
    ds = {"abbr": "qa", "path": str(write_jsonl(tmp_path / "qa.jsonl", ROWS)), "prompt": "{question}", "target": "{answer}",
          "evaluator": {k: v for k, v in evaluator.items() if v is not None}}
    models = [{"abbr": "m", "type": "openai-chat", "url": "http://127.0.0.1:1/v1", "model": "m"},
              {"abbr": "grader", "type": "openai-chat", "url": "http://127.0.0.1:1/v1", "model": "g", "role": "judge"}]
    if ds["evaluator"]["type"] == "exact":
        models.pop()  # a judge no evaluator names is another problem
    plan = tmp_path / "plan.toml"
    plan.write_text(tomli_w.dumps({"run": {"work_dir": "out"}, "models": models, "datasets": [ds]}), encoding="utf-8")
    assert main([str(plan), "--no-ui"]) == 2
    err = capsys.readouterr().err
    assert said.format(tmp=tmp_path) in err and "Traceback" not in err, err
    assert len([line for line in err.splitlines() if "datasets[0].evaluator." in line]) == 1, err
    assert not (tmp_path / "out").exists()


def test_the_files_thinking_is_cut_out_before_the_judge_sees_it(tmp_path: Path, sim_factory: Any) -> None:
    tested, judge = _servers(sim_factory)
    rows = _baseline_rows([0, 0])
    rows[0]["answer"] = f"<think>it may be {int(ROWS[0]['answer']) + 50}</think>The code is {ROWS[0]['answer']}."  # thinking, then the equal answer
    rows[1]["answer"] = "<think>a larger code: 99999"  # never closed: no answer, so the model's number is larger
    write_jsonl(tmp_path / "base.jsonl", rows)
    code, _, runner = run_plan(_plan(tmp_path, tested.url, judge.url))
    assert code == 0
    assert [d["scores"]["win_rate"] for d in _result(runner)["details"][:2]] == [0.5, 1.0]
    assert not any("<think>" in r.prompt for r in judge.stats.log)
