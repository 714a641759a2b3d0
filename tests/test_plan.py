"""Loading a plan: the happy path (defaults, paths, snapshot) and the problems `load_plan`/`select` report."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from evaltui.plan import Plan, PlanError, load_plan, select

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SECRET = "sk-test-0123456789-do-not-leak"


def write_data(folder: Path) -> None:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(5)]
    (folder / "data" / "math.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "data" / "mcq.csv").write_text(
        'What is 2+2?,3,4,5,6,B\n"Pick one, please",x,y,z,w,A\n', encoding="utf-8"
    )


def base_plan() -> dict[str, Any]:
    return {
        "title": "unit",
        "models": [
            {"abbr": "llama", "type": "lightllm", "url": "http://127.0.0.1:1/generate"},
            {"abbr": "gpt", "type": "openai-chat", "url": "http://127.0.0.1:1/v1", "model": "gpt-x"},
        ],
        "datasets": [
            {"abbr": "math", "path": "data/math.jsonl", "prompt": "Q: {question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}},
            {
                "abbr": "mcq",
                "path": "data/mcq.csv",
                "columns": ["question", "A", "B", "C", "D", "answer"],
                "prompt": "{question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:",
                "target": "{answer}",
                "evaluator": {"type": "choice"},
            },
        ],
    }


def write_plan(folder: Path, data: dict[str, Any], name: str = "my-eval.toml") -> Path:
    write_data(folder)
    path = folder / name
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def problems_of(path: Path, **kw: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        load_plan(path, **kw)
    return info.value.problems


# ------------------------------------------------------------------------------------ happy path


def test_valid_plan_loads_with_spec_defaults(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, base_plan()))
    assert plan.title == "unit"
    assert [m.abbr for m in plan.models] == ["llama", "gpt"]
    assert [d.abbr for d in plan.datasets] == ["math", "mcq"]
    run = plan.run
    assert (run.max_num_workers, run.eval_workers) == (1, 4)
    assert (run.heartbeat_interval, run.poll_interval, run.log_interval) == (5.0, 1.0, 30.0)
    assert (run.watch_interval, run.heartbeat_timeout) == (5.0, 60.0)
    assert plan.default_work_dir() == tmp_path / "outputs" / "my-eval"
    m = plan.models[0]
    assert m.max_workers == min(32, (os.cpu_count() or 1) + 4)
    assert (m.rate_per_worker, m.retry, m.timeout) == (0, 4, 120.0)
    assert m.generation_kwargs == {"do_sample": False, "ignore_eos": False, "max_new_tokens": 1024}
    assert m.headers == {} and m.api_key_env is None
    d = plan.datasets[0]
    assert (d.columns, d.system, d.mode, d.choices, d.shards, d.limit, d.fail_on_error) == ([], "", "gen", [], 1, 0, 0.0)
    assert d.evaluator is not None and d.evaluator.type == "gsm8k"
    assert run.executor == "local"


def test_executor_is_local_or_ray_and_round_trips(tmp_path: Path) -> None:
    data = base_plan()
    data["run"] = {"executor": "ray"}
    plan = load_plan(write_plan(tmp_path, data))
    assert plan.run.executor == "ray"
    assert load_plan(write_plan(tmp_path, {**plan.snapshot(), "title": "again"}, name="again.toml")).run.executor == "ray"
    data["run"] = {"executor": "dask"}
    assert problems_of(write_plan(tmp_path, data, name="bad.toml")) == ["bad.toml: run.executor: must be one of 'local' or 'ray' (got 'dask')"]


def test_replicas_adaptive_concurrency_and_pacing_load_and_round_trip(tmp_path: Path) -> None:
    data = base_plan()
    urls = ["http://10.0.0.1:8000/generate", "http://10.0.0.2:8000/generate"]
    data["models"][0].update(url=urls, max_workers=64, max_workers_per_url=40, concurrency="adaptive", min_workers=4,
                             requests_per_minute=600.0, tokens_per_minute=90_000.0, down_timeout=60.0)
    plan = load_plan(write_plan(tmp_path, data))
    m = plan.models[0]
    assert m.urls == tuple(urls) and m.url == urls
    assert (m.max_workers_per_url, m.concurrency, m.min_workers, m.down_timeout) == (40, "adaptive", 4, 60.0)
    assert m.request_rate == 10.0 and m.tokens_per_minute == 90_000.0  # 600 a minute is rate_per_worker = 10
    other = plan.models[1]
    assert other.urls == (other.url,) and other.concurrency == "fixed" and other.min_workers is None
    assert other.down_timeout == 300.0 and other.request_rate == other.tokens_per_minute == 0
    again = load_plan(write_plan(tmp_path, {**plan.snapshot(), "title": "again"}, name="again.toml"))
    assert again.models[0].urls == tuple(urls) and again.models[0].request_rate == 10.0


def test_rate_per_worker_alone_is_the_request_rate(tmp_path: Path) -> None:
    data = base_plan()
    data["models"][0]["rate_per_worker"] = 2.5
    assert load_plan(write_plan(tmp_path, data)).models[0].request_rate == 2.5


@pytest.mark.parametrize(("cpus", "expected"), [(2, 6), (1, 5), (28, 32), (96, 32), (None, 5)])
def test_default_max_workers_is_cpu_count_plus_4_capped_at_32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpus: int | None, expected: int
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    plan = load_plan(write_plan(tmp_path, base_plan()))
    assert [m.max_workers for m in plan.models] == [expected, expected]


def test_explicit_values_are_kept(tmp_path: Path) -> None:
    data = base_plan()
    data["run"] = {"work_dir": "/abs/elsewhere", "max_num_workers": 2, "poll_interval": 0.25, "heartbeat_timeout": 30}
    data["models"][0].update(max_workers=64, timeout=5, generation_kwargs={"max_new_tokens": 7})
    data["datasets"][0].update(limit=3, shards=2, fail_on_error=0.5)
    del data["datasets"][0]["evaluator"]
    plan = load_plan(write_plan(tmp_path, data))
    assert plan.default_work_dir() == Path("/abs/elsewhere")
    assert plan.run.max_num_workers == 2 and plan.run.poll_interval == 0.25 and plan.run.heartbeat_timeout == 30
    assert plan.models[0].max_workers == 64 and plan.models[0].timeout == 5
    assert plan.models[0].generation_kwargs == {"max_new_tokens": 7}
    assert (plan.datasets[0].limit, plan.datasets[0].shards, plan.datasets[0].fail_on_error) == (3, 2, 0.5)
    assert plan.datasets[0].evaluator is not None and plan.datasets[0].evaluator.type == "exact"


def test_relative_paths_resolve_against_the_plan_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "configs" / "nested"
    data = base_plan()
    data["run"] = {"work_dir": "runs/one"}
    data["datasets"][1]["path"] = str((folder / "data" / "mcq.csv").resolve())  # absolute stays absolute
    path = write_plan(folder, data)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory must not matter
    plan = load_plan(Path(os.path.relpath(path, elsewhere)))
    assert plan.dataset_path(plan.datasets[0]).resolve() == (folder / "data" / "math.jsonl").resolve()
    assert plan.dataset_path(plan.datasets[1]) == (folder / "data" / "mcq.csv").resolve()
    assert plan.default_work_dir().resolve() == (folder / "runs" / "one").resolve()


def test_sim_url_needs_no_model_name(tmp_path: Path) -> None:
    data = base_plan()
    data["models"] = [{"abbr": "sim", "type": "openai-chat", "url": "sim://?accuracy=0.9&latency=0.01"}]
    plan = load_plan(write_plan(tmp_path, data))
    assert plan.models[0].is_sim


def _walk(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [obj, *(x for v in obj.values() for x in _walk(v))]
    if isinstance(obj, list):
        return [obj, *(x for v in obj for x in _walk(v))]
    return [obj]


def test_snapshot_has_no_none_no_secret_and_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_TEST_API_KEY", SECRET)
    data = base_plan()
    data["models"][1]["api_key_env"] = "EVALTUI_TEST_API_KEY"
    data["models"][1]["headers"] = {"X-Team": "eval"}
    path = write_plan(tmp_path, data)
    plan = load_plan(path)

    snap = plan.snapshot()
    assert all(v is not None for v in _walk(snap))
    text = tomli_w.dumps(snap)  # the work dir's plan.toml
    assert "EVALTUI_TEST_API_KEY" in text
    assert SECRET not in text
    assert "source" not in snap
    # Defaults are filled in, dataset paths are absolute.
    assert snap["run"]["eval_workers"] == 4
    assert snap["models"][0]["max_workers"] == plan.models[0].max_workers
    assert snap["models"][0]["generation_kwargs"]["max_new_tokens"] == 1024
    assert snap["datasets"][0]["path"] == str((tmp_path / "data" / "math.jsonl").resolve())
    assert snap["datasets"][0]["evaluator"]["type"] == "gsm8k"

    again = Plan.model_validate({**tomllib.loads(text), "source": path.resolve()})
    assert again.snapshot() == snap
    assert again.model(abbr="gpt").api_key_env == "EVALTUI_TEST_API_KEY"
    # Written out as a plan file of its own, it loads again from another folder.
    copy_path = tmp_path / "elsewhere" / "resolved.toml"
    copy_path.parent.mkdir()
    copy_path.write_text(text, encoding="utf-8")
    reloaded = load_plan(copy_path)
    assert [reloaded.dataset_path(d) for d in reloaded.datasets] == [plan.dataset_path(d).resolve() for d in plan.datasets]


# -------------------------------------------------------------------------------------- problems


def test_issue_example_line_format(tmp_path: Path) -> None:
    data = base_plan()
    data["models"][1]["max_workers"] = 0
    assert problems_of(write_plan(tmp_path, data)) == ["my-eval.toml: models[1].max_workers: must be ≥ 1 (got 0)"]


def test_every_type_problem_is_reported_at_once(tmp_path: Path) -> None:
    data = base_plan()
    data["run"] = {"eval_workers": "4", "pol_interval": 1.0}
    data["models"][0]["retry"] = -1
    data["models"][1]["max_workers"] = 2.5
    data["datasets"][1]["mode"] = "generate"
    del data["datasets"][0]["target"]
    problems = problems_of(write_plan(tmp_path, data))
    assert all(p.startswith("my-eval.toml: ") for p in problems)
    joined = "\n".join(problems)
    for fragment in (
        "run.eval_workers: expected an integer",
        "run.pol_interval: unknown key (did you mean 'poll_interval'?)",
        "models[0].retry: must be ≥ 0 (got -1)",
        "models[1].max_workers: expected an integer",
        "datasets[1].mode: must be one of",
        "datasets[0].target: required field is missing",
    ):
        assert fragment in joined
    assert len(problems) == 6


def test_every_semantic_problem_is_reported_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALTUI_SURELY_UNSET_KEY", raising=False)
    data = base_plan()
    data["models"][1]["abbr"] = "llama"
    data["models"][0]["url"] = "ftp://127.0.0.1/generate"
    data["models"][1]["api_key_env"] = "EVALTUI_SURELY_UNSET_KEY"
    data["datasets"][0]["path"] = "data/missing.jsonl"
    data["datasets"][1]["prompt"] = "{question} {E}"
    problems = problems_of(write_plan(tmp_path, data))
    joined = "\n".join(problems)
    assert "models[1].abbr: duplicate abbr 'llama'" in joined
    assert "models[0].url:" in joined
    assert "models[1].api_key_env: environment variable EVALTUI_SURELY_UNSET_KEY is not set" in joined
    assert "datasets[0].path: file not found" in joined and "missing.jsonl" in joined
    assert "datasets[1].prompt: record 0 has no field 'E'" in joined
    assert len(problems) == 5


def test_api_key_env_is_looked_up_in_the_given_environment(tmp_path: Path) -> None:
    data = base_plan()
    data["models"][1]["api_key_env"] = "MY_KEY"
    path = write_plan(tmp_path, data)
    assert any("MY_KEY is not set" in p for p in problems_of(path, env={}))
    assert load_plan(path, env={"MY_KEY": SECRET}).models[1].api_key_env == "MY_KEY"


def test_template_problem_names_the_record_index(tmp_path: Path) -> None:
    path = write_plan(tmp_path, base_plan())
    rows = [{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}, {"question": "c"}]
    (tmp_path / "data" / "math.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert problems_of(path) == [
        "my-eval.toml: datasets[0].target: record 2 has no field 'answer' (its fields: question)"
    ]
    # Records past `limit` are never used, so they are not checked.
    data = base_plan()
    data["datasets"][0]["limit"] = 2
    write_plan(tmp_path, data)
    (tmp_path / "data" / "math.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert load_plan(path).datasets[0].limit == 2


def test_check_data_false_skips_the_data_files(tmp_path: Path) -> None:
    data = base_plan()
    data["datasets"][0]["prompt"] = "{no_such_field}"
    path = write_plan(tmp_path, data)
    assert problems_of(path)
    assert load_plan(path, check_data=False).datasets[0].prompt == "{no_such_field}"


def test_source_key_in_the_file_is_unknown(tmp_path: Path) -> None:
    data = base_plan()
    data["source"] = "/somewhere/else.toml"
    problems = problems_of(write_plan(tmp_path, data))
    assert problems == ["my-eval.toml: source: unknown key (known keys: title, run, models, datasets)"]


def test_missing_plan_file(tmp_path: Path) -> None:
    problems = problems_of(tmp_path / "nope.toml")
    assert len(problems) == 1 and "nope.toml" in problems[0] and "not found" in problems[0]


# ------------------------------------------------------------------------------------------ select


def test_select_restricts_models_and_datasets_in_plan_order(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, base_plan()))
    sub = select(plan, ["gpt"], ["mcq", "math"])
    assert [m.abbr for m in sub.models] == ["gpt"]
    assert [d.abbr for d in sub.datasets] == ["math", "mcq"]
    assert sub.source == plan.source
    assert select(plan, None, None) == plan
    assert [m.abbr for m in plan.models] == ["llama", "gpt"]  # the original is untouched


def test_select_unknown_abbrs_are_all_reported(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, base_plan()))
    with pytest.raises(PlanError) as info:
        select(plan, ["gpt", "claude"], ["gsm8k"])
    problems = info.value.problems
    assert len(problems) == 2
    assert "my-eval.toml" in problems[0] and "--models" in problems[0] and "'claude'" in problems[0]
    assert "llama, gpt" in problems[0]  # what the plan does have
    assert "--datasets" in problems[1] and "'gsm8k'" in problems[1] and "math, mcq" in problems[1]



# ---------------------------------------------------------------------------- epochs and reducers


def test_epochs_come_from_the_dataset_or_the_run(tmp_path: Path) -> None:
    data = base_plan()
    data["run"] = {"epochs": 4}
    data["datasets"][0].update(epochs=2, evaluator={"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 2]})
    data["datasets"][1]["evaluator"] = {"type": "choice", "reducer": "at_least_k", "k": 3}
    plan = load_plan(write_plan(tmp_path, data))
    assert [plan.epochs(d).count for d in plan.datasets] == [2, 4]
    assert plan.datasets[0].evaluator.ks() == (1, 2) and plan.datasets[1].evaluator.ks() == (3,)
    default = load_plan(write_plan(tmp_path, base_plan()))
    assert [default.epochs(d).count for d in default.datasets] == [1, 1]


def test_a_datasets_epochs_travel_with_its_reducer_and_k(tmp_path: Path) -> None:
    """Plan.epochs is the one place a dataset's epochs are resolved: the count with the reducer
    and k that reduce them, one value for the scorer, the summary, the follower and the fingerprints."""
    from evaltui.plan import Epochs

    data = base_plan()
    data["run"] = {"epochs": 4}
    data["datasets"][0].update(epochs=2, evaluator={"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 2]})
    data["datasets"][1]["evaluator"] = {"type": "choice", "reducer": "at_least_k", "k": 3}
    plan = load_plan(write_plan(tmp_path, data))
    assert [plan.epochs(d) for d in plan.datasets] == [Epochs(2, "pass_at_k", (1, 2)), Epochs(4, "at_least_k", (3,))]
    default = load_plan(write_plan(tmp_path, base_plan()))
    assert [default.epochs(d) for d in default.datasets] == [Epochs(1), Epochs(1)] and default.epochs(default.datasets[0]).trivial


def test_the_versions_of_a_plan_without_epochs_are_what_they_were(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New keys at their defaults are left out of the fingerprints: existing work is neither
    re-scored nor shown under another version. (The gsm8k judge's revision is held at the 4 these
    values were computed under: a new revision is meant to change them, and re-score.)"""
    from evaltui.engine.disk.versions import JUDGE_REVISIONS, evaluator_version

    monkeypatch.setitem(JUDGE_REVISIONS, "gsm8k", 4)
    from evaltui.plan import DatasetConfig
    from evaltui.scoring import dataset_version
    from evaltui.scoring.summary import RunSummary

    plan = load_plan(write_plan(tmp_path, base_plan()))
    d = plan.datasets[0]
    # the values evaltui computed for this dataset before epochs, reducers and the error policy existed
    same = DatasetConfig.model_validate({"abbr": "math", "path": "/data/math.jsonl", "prompt": "Q: {question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}})
    assert (evaluator_version(same), dataset_version(same.versioned_dump())) == ("86a857a383f6", "ba1aac")
    before = evaluator_version(d)
    data = base_plan()
    data["datasets"][0]["evaluator"] = {"type": "gsm8k", "reducer": "max"}
    data["datasets"][0]["epochs"] = 3
    other = load_plan(write_plan(tmp_path, data))
    assert evaluator_version(other.datasets[0]) != before
    assert RunSummary(other).rows()[0].version != RunSummary(plan).rows()[0].version
    data["datasets"][0]["epochs"] = None
    del data["datasets"][0]["epochs"]
    data["run"] = {"epochs": 3}  # the same epochs, given for the whole run: the same version
    assert RunSummary(load_plan(write_plan(tmp_path, data))).rows()[0].version == RunSummary(other).rows()[0].version


@pytest.mark.parametrize(
    ("dataset", "run", "expected"),
    [
        ({"epochs": 1001}, {}, "datasets[0].epochs: must be ≤ 1000 (got 1001)"),
        ({"evaluator": {"type": "gsm8k", "k": 2}}, {}, "datasets[0].evaluator.k: only used by the at_least_k and pass_at_k reducers (reducer is 'mean')"),
        ({"epochs": 3, "evaluator": {"type": "gsm8k", "reducer": "at_least_k", "k": [1, 2]}}, {}, "datasets[0].evaluator.k: at_least_k takes one k (got [1, 2])"),
        ({"epochs": 3, "evaluator": {"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 1]}}, {}, "datasets[0].evaluator.k: lists the same k twice (got [1, 1])"),
        ({"epochs": 3, "evaluator": {"type": "gsm8k", "reducer": "pass_at_k", "k": 0}}, {}, "datasets[0].evaluator.k: must be an integer ≥ 1 or a list of them (got 0)"),
        ({"epochs": 3, "evaluator": {"type": "gsm8k", "reducer": "pass_at_k", "k": "10"}}, {}, "datasets[0].evaluator.k: must be an integer ≥ 1 or a list of them (got '10')"),
        ({"evaluator": {"type": "gsm8k", "reducer": "pass_at_k"}}, {"epochs": 10}, "datasets[0].evaluator.k: required by the pass_at_k reducer (e.g. k = [1, 10])"),
        ({"evaluator": {"type": "gsm8k", "reducer": "pass_at_k", "k": 4}}, {"epochs": 3},
         "datasets[0].evaluator.k: 4 is more than the 3 epochs each sample gets (run.epochs = 3 applies to it)"),
        ({}, {"epochs": 0}, "run.epochs: must be ≥ 1 (got 0)"),
    ],
)
def test_epochs_and_reducer_problems_name_the_field(tmp_path: Path, dataset: dict[str, Any], run: dict[str, Any], expected: str) -> None:
    data = base_plan()
    data["datasets"][0].update(dataset)
    if run:
        data["run"] = run
    assert problems_of(write_plan(tmp_path, data)) == [f"my-eval.toml: {expected}"]


def test_ppl_mode_has_nothing_to_repeat(tmp_path: Path) -> None:
    data = base_plan()
    data["models"] = [data["models"][0]]
    data["datasets"][1].update(mode="ppl", choices=[" A", " B"], evaluator={"type": "ppl"}, epochs=2)
    assert problems_of(write_plan(tmp_path, data)) == [
        "my-eval.toml: datasets[1].epochs: ppl mode ranks the choices by log-probabilities, which every epoch gives alike; use epochs = 1"
    ]


def test_a_token_budget_below_max_new_tokens_is_fine_when_every_dataset_is_ppl(tmp_path: Path) -> None:
    # A ppl request is charged its prompt and one new token, whatever max_new_tokens says.
    data = base_plan()
    data["models"] = [{"abbr": "c", "type": "openai-completions", "url": "http://127.0.0.1:1/v1", "model": "x",
                       "tokens_per_minute": 600.0, "generation_kwargs": {"max_new_tokens": 1024}}]
    data["datasets"] = [data["datasets"][1]]
    data["datasets"][0].update(mode="ppl", choices=[" A", " B"], evaluator={"type": "ppl"})
    assert load_plan(write_plan(tmp_path, data)).models[0].tokens_per_minute == 600.0


# ---------------------------------------------------------------------------- the error policy


def test_fail_on_error_is_a_fraction_or_a_count(tmp_path: Path) -> None:
    data = base_plan()
    data["datasets"][0].update(fail_on_error=5, retry_on_error=2)
    data["datasets"][1].update(fail_on_error=1.0, score_on_error=False)
    plan = load_plan(write_plan(tmp_path, data))
    assert (plan.datasets[0].fail_on_error, plan.datasets[0].retry_on_error) == (5, 2)
    assert isinstance(plan.datasets[0].fail_on_error, int) and isinstance(plan.datasets[1].fail_on_error, float)
    data["datasets"][0].update(fail_on_error=0)
    assert load_plan(write_plan(tmp_path, data)).datasets[0].fail_on_error == 0.0  # none may fail, however written


def test_a_fraction_of_fail_on_error_keeps_the_leaderboard_version_it_had_before_counts() -> None:
    """A plan from before counts existed (fail_on_error was a float, 0–1) keeps its leaderboard
    version: the hashes are what the code before them (f39f398) gave for the same dataset."""
    from evaltui.plan import Plan
    from evaltui.scoring.summary import RunSummary

    for value, version in ((1.0, "d45dd8"), (0.25, "627da7"), (0, "ba1aac"), (0.0, "ba1aac")):
        dataset = {"abbr": "math", "path": "/data/math.jsonl", "prompt": "Q: {question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}}
        plan = Plan.model_validate({"models": base_plan()["models"][:1], "datasets": [{**dataset, "fail_on_error": value}]})
        assert [row.version for row in RunSummary(plan).rows()] == [version], value


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [
        ({"fail_on_error": 1.5}, "datasets[0].fail_on_error: a fraction must be between 0 and 1; a count of samples is an integer, e.g. 1 (got 1.5)"),
        ({"fail_on_error": -2}, "datasets[0].fail_on_error: a count of samples must be ≥ 0 (got -2)"),
        ({"fail_on_error": 99999999999999999}, "datasets[0].fail_on_error: a count of samples must be ≤ 1000000000000 (got 99999999999999999)"),
        ({"fail_on_error": 1},
         "datasets[0].fail_on_error: fail_on_error = 1 is ambiguous: write 1.0 for every sample may fail, or a count ≥ 2"),
        ({"fail_on_error": "5%"}, "datasets[0].fail_on_error: expected a fraction between 0 and 1 or a count (an integer ≥ 2) of samples (got '5%')"),
        ({"retry_on_error": -1}, "datasets[0].retry_on_error: must be ≥ 0 (got -1)"),
        ({"retry_on_error": 101}, "datasets[0].retry_on_error: must be ≤ 100 (got 101)"),
        ({"score_on_error": "yes"}, "datasets[0].score_on_error: expected true or false (got string 'yes')"),
        ({"score_on_error": True, "fail_on_error": 0.1},
         "datasets[0].fail_on_error: has no effect with score_on_error = true (score_on_error = true scores every failed sample as wrong; got 0.1); keep one of them"),
    ],
)
def test_error_policy_problems_name_the_field(tmp_path: Path, dataset: dict[str, Any], expected: str) -> None:
    data = base_plan()
    data["datasets"][0].update(dataset)
    assert problems_of(write_plan(tmp_path, data)) == [f"my-eval.toml: {expected}"]


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [
        ({"time_limit": -1.0}, "datasets[0].time_limit: must be ≥ 0.0 (got -1.0)"),
        ({"time_limit": 1e9}, "datasets[0].time_limit: must be ≤ 86400.0 (got 1000000000.0)"),
        ({"token_limit": 2.5}, "datasets[0].token_limit: expected an integer (got number 2.5)"),
        ({"token_limit": -5}, "datasets[0].token_limit: must be ≥ 0 (got -5)"),
        ({"sample_ids": "1-3"}, "datasets[0].sample_ids: expected an array (got string '1-3')"),
    ],
)
def test_limit_and_selection_problems_name_the_field(tmp_path: Path, dataset: dict[str, Any], expected: str) -> None:
    data = base_plan()
    data["datasets"][0].update(dataset)
    assert problems_of(write_plan(tmp_path, data)) == [f"my-eval.toml: {expected}"]


def test_limits_and_a_selection_load(tmp_path: Path) -> None:
    data = base_plan()
    data["datasets"][0].update(time_limit=30.0, token_limit=4096, sample_ids=[4, 0, 2])
    d = load_plan(write_plan(tmp_path, data)).datasets[0]
    assert (d.time_limit, d.token_limit, d.sample_ids) == (30.0, 4096, [0, 2, 4])


def test_a_models_limits_are_resolved_in_one_place(tmp_path: Path) -> None:
    """ModelConfig.limits: what the backend's replicas, the pool's load, Ray and the fleet screen
    all read (max_workers over the model; max_workers_per_url, else max_workers, at one url; the
    adaptive floor shared out over the urls, rounded up)."""
    data = base_plan()
    data["models"][0].update(url=["http://127.0.0.1:1/generate", "http://127.0.0.1:2/generate", "http://127.0.0.1:3/generate"],
                             max_workers=16, max_workers_per_url=6, concurrency="adaptive", min_workers=4)
    plan = load_plan(write_plan(tmp_path, data))
    limits = plan.models[0].limits
    assert (limits.max_workers, limits.per_url, limits.adaptive, limits.floor, limits.floor_per_url) == (16, 6, True, 4, 2)
    assert limits.per_replica and limits.capped_per_url
    one = plan.models[1].limits
    assert (one.per_url, one.floor_per_url, one.per_replica, one.capped_per_url) == (one.max_workers, 1, False, False)


@pytest.mark.parametrize(
    "evaluator",
    [{"type": "gsm8k"}, {"type": "gsm8k", "reducer": "max"}, {"type": "exact", "reducer": "pass_at_k", "k": [1, 2]}, {"type": "regex", "pattern": "(\\d+)"}],
)
def test_a_datasets_versioned_dump_holds_its_evaluators_own(evaluator: dict[str, object]) -> None:
    """The dataset's dump carries the evaluator's versioned dump (made from the one dump of the
    dataset, not a second one of the evaluator), the later keys at their defaults left out."""
    from evaltui.plan import DatasetConfig
    from evaltui.plan.schema import LATER_DATASET_KEYS

    d = DatasetConfig.model_validate({"abbr": "x", "path": "/data/x.jsonl", "prompt": "Q: {question}", "target": "{answer}", "evaluator": evaluator, "shuffle": True})
    dumped = d.versioned_dump()
    assert dumped["evaluator"] == d.evaluator.versioned_dump()
    assert dumped["shuffle"] is True  # a later key away from its default stays
    assert not any(k in dumped and dumped[k] == v for k, v in LATER_DATASET_KEYS.items())
    assert {k: v for k, v in d.model_dump(mode="json").items() if k != "evaluator" and (k not in LATER_DATASET_KEYS or v != LATER_DATASET_KEYS[k])} == {
        k: v for k, v in dumped.items() if k != "evaluator"
    }
