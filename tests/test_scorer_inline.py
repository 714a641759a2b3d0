"""The watch-scorer scores a small pair of a light evaluator on its own loop, and every other pair
in a worker thread, with the same gate: never from predictions a retry replaced, never twice."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

import evaltui.engine.run.scorer as watch
from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.run.scorer import INLINE_BYTES, Scorer
from evaltui.engine.score.gate import ScoreGate
from evaltui.engine.score.pairscore import Replace
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.fsutil import atomic_write_json
from evaltui.plan import Plan, load_plan

ROWS = arithmetic(5)
CODE = Path(__file__).resolve().parents[1] / "sample_configs/data/code.jsonl"


class ThreadOfWrites(ScoreGate):
    """A gate that notes the thread each pair's result was put in place from."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[Pair, list[threading.Thread]] = {}

    def replacer(self, pair: Pair, token: tuple[int, int]) -> Replace:
        inner = super().replacer(pair, token)

        def replace(tmp: str, path: Path) -> None:
            self.threads.setdefault(pair, []).append(threading.current_thread())
            inner(tmp, path)

        return replace


def setup(tmp_path: Path) -> tuple[Plan, WorkDir, StatusWriter]:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    code = {"abbr": "code", "path": str(CODE), "prompt": "{prompt}", "target": "{canonical_solution}", "evaluator": {"type": "code_exec", "timeout": 5.0}}
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    datasets = [gsm_dataset("small", data), gsm_dataset("large", data), code]
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=datasets, run={"watch_interval": 0.05}))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    return plan, wd, StatusWriter(wd)


def finish(wd: WorkDir, board: StatusWriter, dataset: str, answers: list[str], golds: list[str], pad: int = 0) -> None:
    """`dataset`'s predictions on disk (each answer after `pad` bytes of reasoning) and its status `done`."""
    entries = {str(i): {"origin_prompt": f"q{i}", "prediction": "x" * pad + "\n" + a, "gold": g} for i, (a, g) in enumerate(zip(answers, golds, strict=True))}
    atomic_write_json(wd.predictions_file("m", dataset), entries)
    board.write("m", dataset, 0, 1, "done", total=len(answers), completed=len(answers), failed=0)


def run(scorer: Scorer, pairs: list[Pair]) -> None:
    scorer.add(pairs)
    scorer.inference_finished()

    async def main() -> None:
        with anyio.fail_after(60):
            await scorer.run()

    anyio.run(main)


def test_a_small_light_pair_is_scored_on_the_loop_a_large_or_code_exec_one_in_a_thread(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path)
    golds = [r["answer"] for r in ROWS]
    finish(wd, board, "small", golds, golds)
    finish(wd, board, "large", golds, golds, pad=INLINE_BYTES // len(golds))  # just past the bound
    code = [json.loads(line) for line in CODE.read_text().splitlines()]
    finish(wd, board, "code", [r["canonical_solution"] for r in code], [r["canonical_solution"] for r in code])
    events: list[ev.Event] = []
    gate = ThreadOfWrites()
    run(Scorer(plan, wd, events.append, gate=gate), [("m", "small"), ("m", "large"), ("m", "code")])
    assert {e.dataset: e.score for e in events if isinstance(e, ev.DatasetScored)} == {"small": 100.0, "large": 100.0, "code": 100.0}
    loop = threading.main_thread()  # anyio.run's loop
    assert gate.threads[("m", "small")] == [loop]
    assert gate.threads[("m", "large")] != [loop] and len(gate.threads[("m", "large")]) == 1
    assert gate.threads[("m", "code")] != [loop] and len(gate.threads[("m", "code")]) == 1


def test_a_small_pair_retried_as_its_scoring_begins_is_scored_once_from_its_new_predictions(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A retry (forget, new predictions, add) that comes as the scoring of the old ones begins:
    the old scoring does not run at all (its token is stale before it reads a byte) and the new
    predictions are scored exactly once."""
    plan, wd, board = setup(tmp_path)
    golds = [r["answer"] for r in ROWS]
    finish(wd, board, "small", golds, golds)  # all right: 100
    scorings: list[str] = []
    real = watch.score_pair

    def counted(*args: Any) -> Any:
        scorings.append(wd.predictions_file("m", "small").read_text())
        return real(*args)

    monkeypatch.setattr(watch, "score_pair", counted)
    events: list[ev.Event] = []
    scorer: Scorer

    def emit(e: ev.Event) -> None:
        events.append(e)
        if isinstance(e, ev.DatasetScoring) and len([x for x in events if isinstance(x, ev.DatasetScoring)]) == 1:
            scorer.forget(("m", "small"))  # a retry begins: what is scored now is stale
            finish(wd, board, "small", ["#### 0"] * len(golds), golds)  # its new answers: all wrong
            scorer.add([("m", "small")])

    scorer = Scorer(plan, wd, emit, gate=ThreadOfWrites())
    run(scorer, [("m", "small")])
    assert len([e for e in events if isinstance(e, ev.DatasetScoring)]) == 2
    assert [(e.dataset, e.score) for e in events if isinstance(e, ev.DatasetScored)] == [("small", 0.0)]
    assert len(scorings) == 1 and "#### 0" in scorings[0]
    assert wd.read_result("m", "small") is not None and wd.read_result("m", "small")["accuracy"] == 0.0  # type: ignore[index]


def test_a_small_pair_told_inferred_while_its_status_is_not_done_is_not_scored(tmp_path: Path) -> None:
    """The in-run scorer is told when a pair's inference ended, done or failed: only its status
    files say which, so a failed pair with predictions of an earlier run is not scored."""
    plan, wd, board = setup(tmp_path)
    golds = [r["answer"] for r in ROWS]
    finish(wd, board, "small", golds, golds)  # an earlier run's predictions
    board.write("m", "small", 0, 1, "fail", total=5, completed=2, failed=3, error="boom", reset=True)
    events: list[ev.Event] = []
    inferring = [True]
    scorer = Scorer(plan, wd, events.append, inferring=lambda: inferring[0])
    scorer.add([("m", "small")])

    async def main() -> None:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(scorer.run)
                await anyio.sleep(0.1)
                scorer.inferred(("m", "small"))
                await anyio.sleep(0.1)
                inferring[0] = False
                scorer.inference_finished()

    anyio.run(main)
    assert not [e for e in events if isinstance(e, ev.DatasetScored)]
    assert [e.pairs for e in events if isinstance(e, ev.ScoringSkipped)] == [(("m", "small"),)]
    assert not wd.result_file("m", "small").exists()


def test_a_small_gsm8k_pair_whose_answer_needs_math_verify_is_scored_in_a_thread(tmp_path: Path) -> None:
    """An expression ("3 + 6") is worked out by math-verify's worker, a process the loop must not
    start or wait on: the pair is scored in a thread after all, to the same result."""
    plan, wd, board = setup(tmp_path)
    golds = [r["answer"] for r in ROWS]
    answers = ["#### " + " + ".join(["1"] * int(g.split()[-1])) if int(g.split()[-1]) > 1 else g for g in golds]
    assert any("+" in a for a in answers)
    finish(wd, board, "small", answers, golds)
    events: list[ev.Event] = []
    gate = ThreadOfWrites()
    run(Scorer(plan, wd, events.append, gate=gate), [("m", "small")])
    assert [(e.dataset, e.score) for e in events if isinstance(e, ev.DatasetScored)] == [("small", 100.0)]
    assert len(gate.threads[("m", "small")]) == 1 and gate.threads[("m", "small")] != [threading.main_thread()]


def test_a_burst_of_small_pairs_ready_at_once_is_scored_on_the_loop_only_up_to_its_budget(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past INLINE_BUDGET of scoring one after another, the loop hands the rest to threads (a
    re-run rescoring every dataset must not hold up the requests in flight): with a budget of
    nothing and any gap taken for one after another, the first pair is scored on the loop and
    the others in threads, each once, to the same scores."""
    monkeypatch.setattr(watch, "INLINE_BUDGET", 0.0)
    monkeypatch.setattr(watch, "INLINE_GAP", 3600.0)
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    names = [f"d{i}" for i in range(4)]
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=[gsm_dataset(n, data) for n in names], run={"eval_workers": 4}))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    board = StatusWriter(wd)
    golds = [r["answer"] for r in ROWS]
    for n in names:
        finish(wd, board, n, golds, golds)
    events: list[ev.Event] = []
    gate = ThreadOfWrites()
    run(Scorer(plan, wd, events.append, gate=gate), [("m", n) for n in names])
    assert sorted((e.dataset, e.score) for e in events if isinstance(e, ev.DatasetScored)) == [(n, 100.0) for n in names]
    threads = [gate.threads[("m", n)] for n in names]
    assert all(len(t) == 1 for t in threads)
    assert sum(t == [threading.main_thread()] for t in threads) == 1


def test_a_small_pair_over_a_large_data_file_is_scored_in_a_thread(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Its fingerprint may have to be read again (the file touched since it was planned): the
    whole file hashed on the loop would hold every request in flight. Only small files are."""
    import evaltui.engine.run.runs as runs

    plan, wd, board = setup(tmp_path)
    monkeypatch.setattr(watch, "SMALL_DATA_BYTES", (tmp_path / "d.jsonl").stat().st_size - 1)  # d.jsonl: just past the bound
    assert runs.SMALL_DATA_BYTES > watch.SMALL_DATA_BYTES
    golds = [r["answer"] for r in ROWS]
    finish(wd, board, "small", golds, golds)
    gate = ThreadOfWrites()
    run(Scorer(plan, wd, lambda e: None, gate=gate), [("m", "small")])
    assert len(gate.threads[("m", "small")]) == 1 and gate.threads[("m", "small")] != [threading.main_thread()]
