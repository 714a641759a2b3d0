"""`evaltui PLAN.toml` on a broken plan: exit code 2, one clear line per problem, never a traceback.

Each case breaks one thing in an otherwise valid plan and checks what the user reads on stderr:
the plan file's name, the table/field path and the words that say what is wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from evaltui.cli import main

PLAN_NAME = "llama_gsm8k.toml"
UNSET_VAR = "EVALTUI_TEST_SURELY_UNSET_KEY"


def write_data(folder: Path) -> None:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(4)]
    (folder / "data" / "math.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "data" / "mcq.csv").write_text('What is 2+2?,3,4,5,6,B\n"Pick, one",x,y,z,w,A\n', encoding="utf-8")


def base_plan() -> dict[str, Any]:
    return {
        "title": "cli errors",
        "run": {"work_dir": "out"},
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


@pytest.fixture(autouse=True)
def _never_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that should have been rejected must not start a run (no network, no work dir)."""

    def refuse(*a: Any, **kw: Any) -> Any:
        raise AssertionError("the plan was accepted and a run was started")

    import evaltui.engine.run.runner

    monkeypatch.setattr(evaltui.engine.run.runner, "Runner", refuse)
    monkeypatch.delenv(UNSET_VAR, raising=False)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert out == ""
    return code, err


def check(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert PLAN_NAME in err
    for f in fragments:
        assert f in err, f"{f!r} not in stderr:\n{err}"


def test_the_base_plan_is_valid(tmp_path: Path) -> None:
    """Every case below breaks exactly one thing in this plan."""
    from evaltui.plan import load_plan

    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(base_plan()), encoding="utf-8")
    plan = load_plan(tmp_path / PLAN_NAME)
    assert [m.abbr for m in plan.models] == ["llama", "gpt"]


# Each case: (id, change to the plan dict, fragments that must appear on stderr).
Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for p in parents:
            d = d[int(p)] if p.isdigit() else d[p]  # type: ignore[index]
        if value is _DELETE:
            del d[last]
        else:
            d[last] = value

    return edit


def _two(*edits: tuple[str, Any]) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for dotted, value in edits:
            _set(dotted, value)(data)

    return edit


def _both_urls_and(key: str, value: Any) -> Edit:
    """models[0] with two replicas and max_workers 16, and `key` set."""
    return _two(("models.0.url", ["http://127.0.0.1:1/generate", "http://127.0.0.1:2/generate"]), ("models.0.max_workers", 16), (f"models.0.{key}", value))


def _adaptive_with(key: str, value: Any) -> Edit:
    return _two(("models.0.concurrency", "adaptive"), ("models.0.max_workers", 16), (f"models.0.{key}", value))


_DELETE = object()

CASES: list[tuple[str, Edit, tuple[str, ...]]] = [
    ("unknown-top-key", _set("modles", []), ("modles: unknown key", "did you mean 'models'")),
    ("unknown-run-key", _set("run.workdir", "x"), ("run.workdir: unknown key", "work_dir")),
    ("unknown-model-key", _set("models.1.max_worker", 4), ("models[1].max_worker: unknown key", "max_workers")),
    ("unknown-evaluator-key", _set("datasets.0.evaluator.patern", "x"), ("datasets[0].evaluator.patern: unknown key", "pattern")),
    ("source-key", _set("source", "x.toml"), ("source: unknown key",)),
    ("int-as-string", _set("models.1.max_workers", "8"), ("models[1].max_workers: expected an integer", "'8'")),
    ("int-as-float", _set("models.0.retry", 1.5), ("models[0].retry: expected an integer", "1.5")),
    ("int-as-bool", _set("datasets.0.limit", True), ("datasets[0].limit: expected an integer", "boolean")),
    ("float-as-string", _set("run.poll_interval", "fast"), ("run.poll_interval: expected a number", "'fast'")),
    ("table-as-int", _set("models.0.generation_kwargs", 5), ("models[0].generation_kwargs: expected a table",)),
    ("header-not-string", _set("models.1.headers", {"X-Team": 1}), ("models[1].headers.X-Team: expected a string",)),
    ("array-as-string", _set("datasets.1.columns", "question,A"), ("datasets[1].columns: expected an array",)),
    ("run-not-table", _set("run", 3), ("run: expected a table",)),
    ("below-minimum", _set("models.1.max_workers", 0), ("models[1].max_workers: must be ≥ 1 (got 0)",)),
    ("above-maximum", _set("datasets.0.shards", 257), ("datasets[0].shards: must be ≤ 256", "257")),
    ("fraction-above-one", _set("datasets.0.fail_on_error", 1.5), ("datasets[0].fail_on_error: a fraction must be between 0 and 1", "1.5")),
    ("zero-timeout", _set("models.0.timeout", 0.0), ("models[0].timeout: must be > 0",)),
    ("bad-model-type", _set("models.0.type", "vllm"), ("models[0].type: must be one of", "'vllm'")),
    ("bad-mode", _set("datasets.0.mode", "generate"), ("datasets[0].mode: must be one of", "'generate'")),
    ("bad-evaluator", _set("datasets.0.evaluator.type", "bleu"), ("datasets[0].evaluator.type: must be one of", "'bleu'")),
    ("missing-prompt", _set("datasets.0.prompt", _DELETE), ("datasets[0].prompt: required field is missing",)),
    ("missing-url", _set("models.0.url", _DELETE), ("models[0].url: required field is missing",)),
    ("no-models", _set("models", []), ("models: needs at least",)),
    ("duplicate-model-abbr", _set("models.1.abbr", "llama"), ("models[1].abbr: duplicate abbr 'llama'", "models[0]")),
    ("duplicate-dataset-abbr", _set("datasets.1.abbr", "math"), ("datasets[1].abbr: duplicate abbr 'math'",)),
    ("abbr-dotdot", _set("models.0.abbr", "../up"), ("models[0].abbr:", "'../up'", "not a safe name")),
    ("abbr-slash", _set("datasets.0.abbr", "gsm8k/test"), ("datasets[0].abbr:", "not a safe name")),
    ("abbr-space", _set("models.1.abbr", "my model"), ("models[1].abbr:", "not a safe name")),
    ("abbr-colon", _set("models.1.abbr", "c:x"), ("models[1].abbr:", "not a safe name")),
    ("abbr-unicode", _set("models.1.abbr", "modèle"), ("models[1].abbr:", "not a safe name")),
    ("abbr-empty", _set("models.1.abbr", ""), ("models[1].abbr:", "not a safe name")),
    ("missing-data-file", _set("datasets.0.path", "data/nope.jsonl"), ("datasets[0].path: file not found", "nope.jsonl")),
    ("unsupported-data-file", _set("datasets.0.path", "data/math.txt"), ("datasets[0].path: unsupported file type", "math.txt")),
    ("template-field-missing", _set("datasets.0.prompt", "{question} {context}"), ("datasets[0].prompt: record 0 has no field 'context'",)),
    ("csv-template-field-missing", _set("datasets.1.target", "{E}"), ("datasets[1].target: record 0 has no field 'E'",)),
    ("system-template-field-missing", _set("datasets.0.system", "You are {persona}."), ("datasets[0].system:", "'persona'")),
    ("template-positional", _set("datasets.0.prompt", "Q: {0}"), ("datasets[0].prompt: invalid template",)),
    ("template-unbalanced", _set("datasets.0.target", "{answer"), ("datasets[0].target: invalid template",)),
    ("api-key-env-unset", _set("models.1.api_key_env", UNSET_VAR), ("models[1].api_key_env:", UNSET_VAR, "not set")),
    ("openai-chat-without-model", _set("models.1.model", _DELETE), ("models[1].model: required for type 'openai-chat'",)),
    ("url-ftp", _set("models.0.url", "ftp://127.0.0.1/generate"), ("models[0].url:", "http://", "'ftp://127.0.0.1/generate'")),
    ("url-no-scheme", _set("models.0.url", "127.0.0.1:8000/generate"), ("models[0].url:", "http://")),
    ("url-no-host", _set("models.1.url", "http:///v1"), ("models[1].url:", "http://")),
    ("sim-out-of-range", _set("models.0.url", "sim://?accuracy=2"), ("models[0].url:", "accuracy", "between 0 and 1")),
    ("sim-unknown-option", _set("models.0.url", "sim://?speed=3"), ("models[0].url:", "unknown sim:// option 'speed'")),
    ("sim-not-a-number", _set("models.0.url", "sim://?latency=slow"), ("models[0].url:", "latency must be a number")),
    ("sim-with-path", _set("models.0.url", "sim://host/generate"), ("models[0].url:", "sim://?accuracy=")),
    ("regex-without-pattern", _set("datasets.0.evaluator", {"type": "regex"}), ("datasets[0].evaluator.pattern: required",)),
    ("regex-invalid", _set("datasets.0.evaluator", {"type": "regex", "pattern": "([0-9]+"}), ("datasets[0].evaluator.pattern: invalid regular expression",)),
    ("pattern-on-other-evaluator", _set("datasets.0.evaluator.pattern", "x"), ("datasets[0].evaluator.pattern: only used by the regex evaluator",)),
    ("authorization-header", _set("models.1.headers", {"Authorization": "Bearer sk-x"}), ("models[1].headers.Authorization:", "api_key_env")),
    ("max-new-tokens-zero", _set("models.0.generation_kwargs", {"max_new_tokens": 0}), ("models[0].generation_kwargs.max_new_tokens: must be an integer ≥ 1",)),
    ("choices-in-gen-mode", _set("datasets.0.choices", ["a", "b"]), ("datasets[0].choices: only used when mode = 'ppl'",)),
    ("columns-on-jsonl", _set("datasets.0.columns", ["question", "answer"]), ("datasets[0].columns: only used for .csv",)),
    ("max-workers-huge", _set("models.0.max_workers", 100_000_000), ("models[0].max_workers: must be ≤ 4096",)),
    ("timeout-infinite", _set("models.0.timeout", float("inf")), ("models[0].timeout: must be a finite number",)),
    ("heartbeat-infinite", _set("run.heartbeat_interval", float("inf")), ("run.heartbeat_interval: must be a finite number",)),
    ("heartbeat-timeout-too-short", _set("run.heartbeat_timeout", 5.0), ("run.heartbeat_timeout: must be at least twice heartbeat_interval",)),
    ("abbr-too-long", _set("models.0.abbr", "m" * 300), ("models[0].abbr:", "not a safe name")),
    ("abbr-shard-collision", _set("datasets.1.abbr", "math_1"), ("datasets[1].abbr: 'math_1' would share files", "'math'")),
    ("template-format-spec", _set("datasets.0.prompt", "Q: {question:d}"), ("datasets[0].prompt: record 0 cannot fill this template", "ValueError")),
    ("template-nested-key", _set("datasets.0.prompt", "Q: {question[x]}"), ("datasets[0].prompt: record 0 cannot fill this template",)),
    # replicas, adaptive concurrency, pacing (issue 16)
    ("url-not-a-string", _set("models.0.url", 8000), ("models[0].url: expected a URL (a string) or a list of them",)),
    ("url-list-empty", _set("models.0.url", []), ("models[0].url: needs at least one URL",)),
    ("url-list-item-not-a-string", _set("models.0.url", ["http://127.0.0.1:1/generate", 2]), ("models[0].url: item 1 of the list is not a string",)),
    ("url-list-item-bad", _set("models.0.url", ["http://127.0.0.1:1/generate", "ftp://x/generate"]), ("models[0].url[1]:", "http://")),
    ("url-list-duplicate", _set("models.0.url", ["http://127.0.0.1:1/generate", "http://127.0.0.1:1/generate/"]), ("models[0].url[1]: the same URL as url[0]",)),
    ("url-list-with-sim", _set("models.0.url", ["sim://", "http://127.0.0.1:1/generate"]), ("models[0].url[0]: a sim:// URL stands alone",)),
    ("url-list-with-credentials", _set("models.1.url", ["http://127.0.0.1:1/v1", "https://u:p@127.0.0.1:2/v1"]), ("models[1].url[1]: holds credentials",)),
    ("per-url-with-one-url", _set("models.0.max_workers_per_url", 4), ("models[0].max_workers_per_url: only used with several urls",)),
    ("per-url-above-max", _both_urls_and("max_workers_per_url", 64), ("models[0].max_workers_per_url: must be ≤ max_workers (16) (got 64)",)),
    ("per-url-zero", _both_urls_and("max_workers_per_url", 0), ("models[0].max_workers_per_url: must be ≥ 1 (got 0)",)),
    ("concurrency-unknown", _set("models.0.concurrency", "auto"), ("models[0].concurrency: must be one of", "'fixed'", "'adaptive'", "'auto'")),
    ("min-workers-with-fixed", _set("models.0.min_workers", 2), ("models[0].min_workers: only used when concurrency = 'adaptive'",)),
    ("min-workers-above-max", _adaptive_with("min_workers", 32), ("models[0].min_workers: must be ≤ max_workers (16) (got 32)",)),
    ("min-workers-zero", _adaptive_with("min_workers", 0), ("models[0].min_workers: must be ≥ 1 (got 0)",)),
    ("requests-per-minute-and-rate", _two(("models.0.rate_per_worker", 2.0), ("models.0.requests_per_minute", 120.0)),
     ("models[0].requests_per_minute: the same limit as rate_per_worker", "set one of them")),
    ("requests-per-minute-negative", _set("models.0.requests_per_minute", -1.0), ("models[0].requests_per_minute: must be ≥ 0",)),
    ("tokens-per-minute-negative", _set("models.0.tokens_per_minute", -5.0), ("models[0].tokens_per_minute: must be ≥ 0",)),
    ("tokens-per-minute-too-small", _set("models.0.tokens_per_minute", 500.0), ("models[0].tokens_per_minute:", "max_new_tokens (1024)", "no request fits")),
    ("tokens-per-minute-string", _set("models.0.tokens_per_minute", "60k"), ("models[0].tokens_per_minute: expected a number",)),
    ("tokens-per-minute-below-max-tokens", _two(("models.1.tokens_per_minute", 1500.0), ("models.1.generation_kwargs", {"max_tokens": 2048})),
     ("models[1].tokens_per_minute:", "max_new_tokens (2048)", "no request fits")),
    ("min-workers-above-the-replicas-caps", _two(("models.0.concurrency", "adaptive"), ("models.0.min_workers", 8), ("models.0.max_workers_per_url", 3),
                                                  ("models.0.url", ["http://127.0.0.1:1/generate", "http://127.0.0.1:2/generate"]), ("models.0.max_workers", 16)),
     ("models[0].min_workers: must be ≤ max_workers_per_url × the 2 urls (6) (got 8)",)),
    ("down-timeout-zero", _set("models.0.down_timeout", 0.0), ("models[0].down_timeout: must be > 0",)),
    ("down-timeout-huge", _set("models.0.down_timeout", 1e9), ("models[0].down_timeout: must be ≤ 86400",)),
]


@pytest.mark.parametrize(("edit", "fragments"), [pytest.param(e, f, id=i) for i, e, f in CASES])
def test_plan_problem_exits_2_with_a_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, fragments: tuple[str, ...]
) -> None:
    data = base_plan()
    edit(data)
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    code, err = run_cli(capsys, str(tmp_path / PLAN_NAME), "--no-ui")
    check(code, err, *fragments)
    assert all(line.startswith(PLAN_NAME + ": ") for line in err.splitlines()), err


@pytest.mark.parametrize("model_type", ["openai-chat", "openai-completions", "lightllm-chat"])
def test_model_name_is_required_for_named_model_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model_type: str
) -> None:
    data = base_plan()
    data["models"][1] = {"abbr": "srv", "type": model_type, "url": "http://127.0.0.1:1/v1"}
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "models[1].model: required", repr(model_type))


def test_the_math_evaluator_without_math_verify_installed(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Looked up at load (without importing sympy): a plan using `math` where math-verify is
    missing is refused naming the field and what to install, before anything runs."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "math_verify" else real(name, *a))
    data = base_plan()
    data["datasets"][0]["evaluator"] = {"type": "math"}
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "datasets[0].evaluator.type: 'math' needs the math-verify package", "pip install math-verify")
    monkeypatch.setattr(importlib.util, "find_spec", real)
    data["datasets"][0]["evaluator"] = {"type": "mathh"}
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "datasets[0].evaluator.type", "'math'")


@pytest.mark.parametrize("model_type", ["openai-chat", "lightllm-chat"])
def test_ppl_mode_with_a_chat_model_type(tmp_path: Path, capsys: pytest.CaptureFixture[str], model_type: str) -> None:
    data = base_plan()
    data["models"][1]["type"] = model_type
    data["datasets"][1].update(mode="ppl", choices=[" A", " B", " C", " D"], evaluator={"type": "ppl"})
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "datasets[1].mode:", "ppl", "gpt")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('title = "x"\n[run]\nmax_num_workers = = 2\n', ("line 3, column", "invalid TOML")),
        ('title = "x"\ntitle = "y"\n', ("line 2, column", "invalid TOML")),
        ('[[models]]\nabbr = "a\n', ("line 2, column", "invalid TOML")),
        ("x = [1,\n", ("invalid TOML",)),
    ],
    ids=["double-equals", "duplicate-key", "unterminated-string", "unterminated-array"],
)
def test_toml_syntax_error_names_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fragments: tuple[str, ...]
) -> None:
    (tmp_path / PLAN_NAME).write_text(text, encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), *fragments)


def test_plan_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / PLAN_NAME).write_bytes(b'title = "caf\xe9"\n')
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "UTF-8")


def test_plan_file_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "not found")


def test_plan_path_that_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / PLAN_NAME
    folder.mkdir()
    check(*run_cli(capsys, str(folder)), "cannot read")


def _bounded_command(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`evaltui PATH --no-ui` in a process of its own, with 1 GiB of address space and 30 s: on the
    main before the fix a FIFO hung and /dev/zero was read until memory ran out."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run(
        [sys.executable, "-m", "evaltui", str(path), "--no-ui"],
        capture_output=True, text=True, timeout=30, cwd=cwd, env=env, stdin=subprocess.DEVNULL, preexec_fn=limit,
    )


@pytest.mark.reliability
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge", "folder"])
def test_a_plan_path_that_is_no_regular_file_or_is_huge_is_one_line_at_once(tmp_path: Path, kind: str) -> None:
    """A FIFO hung, `/dev/zero` grew to 23.5 GB before the kernel killed it: only a regular file
    of at most 64 MiB is read as a plan; anything else is one line naming it, exit 2."""
    said = {"fifo": "is a FIFO (named pipe), not a regular file", "dev-zero": "is a device, not a regular file",
            "huge": "is 104,857,600 bytes, larger than the 67,108,864 such a file may be", "folder": "is a folder, not a regular file"}[kind]
    path = tmp_path / PLAN_NAME
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(100 << 20)  # sparse: 100 MiB of NULs that take no room
    else:
        path.mkdir()
    proc = _bounded_command(path, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"{path}: cannot read plan file: it {said}\n"
    assert proc.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.reliability
@pytest.mark.parametrize("case", ["2-GB-sparse-line", "width-bomb"])
def test_a_dataset_that_would_fill_memory_is_one_line_at_once(tmp_path: Path, case: str) -> None:
    """A 2 GB sparse data file (one line of NULs) was refused after 24 s at 4.2 GB; a prompt
    `{question:>999999999}` was accepted and built 1 GB prompts. In 1 GiB of address space: one
    line naming the field, exit 2."""
    write_data(tmp_path)
    data = base_plan()
    if case == "2-GB-sparse-line":
        with open(tmp_path / "data" / "math.jsonl", "ab") as f:
            f.truncate(2 << 30)
        said = "datasets[0].path: math.jsonl line 5: longer than 16,777,216 characters, the most a record may be"
    else:
        data["datasets"][0]["prompt"] = "{question:>999999999}"
        said = "datasets[0].prompt: invalid template: '{question:>999999999}' asks for a width of 999,999,999 characters"
    plan = tmp_path / PLAN_NAME
    plan.write_text(tomli_w.dumps(data), encoding="utf-8")
    proc = _bounded_command(plan, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and said in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(f"{PLAN_NAME}: ")


@pytest.mark.reliability
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", f"{PLAN_NAME}: invalid TOML: arrays or tables nested more than 32 deep"),
        (
            '[[models]]\nabbr = "m"\ngeneration_kwargs = { stop = ' + "[" * 200 + "]" * 200 + " }\n",
            f"{PLAN_NAME}: models[0].generation_kwargs…: arrays or tables nested more than 32 deep",
        ),
    ],
    ids=["5000-deep-array", "200-deep-in-generation_kwargs"],
)
def test_tables_or_arrays_nested_too_deep_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str) -> None:
    """A 5,000-deep TOML array was a RecursionError traceback."""
    (tmp_path / PLAN_NAME).write_text(text, encoding="utf-8")
    code, err = run_cli(capsys, str(tmp_path / PLAN_NAME))
    assert code == 2 and err == said + "\n"


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ('{"question": "a", "answer": "1"}\n{"question": \n', ("datasets[0].path:", "line 2", "not valid JSON")),
        ('{"question": "a", "answer": "1"}\n\n["a", "b"]\n', ("datasets[0].path:", "line 3", "expected a JSON object")),
        ("", ("datasets[0].path:", "has no records")),
    ],
    ids=["invalid-json-line", "non-object-line", "empty"],
)
def test_unreadable_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, fragments: tuple[str, ...]) -> None:
    write_data(tmp_path)
    (tmp_path / "data" / "math.jsonl").write_text(content, encoding="utf-8")
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(base_plan()), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), *fragments)


def test_csv_row_with_wrong_width(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_data(tmp_path)
    (tmp_path / "data" / "mcq.csv").write_text("q1,a,b,c,d,A\nq2,a,b,c,B\n", encoding="utf-8")
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(base_plan()), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME)), "datasets[1].path:", "row 2", "5 values but 6 columns")


def test_several_problems_are_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = base_plan()
    data["models"][0]["url"] = "ftp://x/generate"
    data["models"][1]["abbr"] = "llama"
    data["models"][1]["api_key_env"] = UNSET_VAR
    data["datasets"][0]["path"] = "data/gone.jsonl"
    data["datasets"][1]["evaluator"] = {"type": "regex"}
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    code, err = run_cli(capsys, str(tmp_path / PLAN_NAME))
    check(
        code,
        err,
        "models[0].url:",
        "models[1].abbr: duplicate",
        "models[1].api_key_env:",
        "datasets[0].path: file not found",
        "datasets[1].evaluator.pattern: required",
    )
    assert len(err.strip().splitlines()) == 5


def test_several_type_problems_are_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = base_plan()
    data["run"]["eval_workers"] = 0
    data["models"][0]["max_workers"] = "lots"
    data["datasets"][1]["shards"] = 0
    data["datasets"][0]["promt"] = "typo"
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(data), encoding="utf-8")
    code, err = run_cli(capsys, str(tmp_path / PLAN_NAME))
    check(code, err, "run.eval_workers: must be ≥ 1", "models[0].max_workers: expected an integer", "datasets[1].shards: must be ≥ 1", "datasets[0].promt: unknown key")
    assert len(err.strip().splitlines()) == 4


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--models", "llama,claude"], ("--models: unknown abbr 'claude'", "llama, gpt")),
        (["--datasets", "gsm8k"], ("--datasets: unknown abbr 'gsm8k'", "math, mcq")),
        (["--models", "x", "--datasets", "y"], ("--models: unknown abbr 'x'", "--datasets: unknown abbr 'y'")),
    ],
    ids=["models", "datasets", "both"],
)
def test_unknown_abbr_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fragments: tuple[str, ...]
) -> None:
    write_data(tmp_path)
    (tmp_path / PLAN_NAME).write_text(tomli_w.dumps(base_plan()), encoding="utf-8")
    check(*run_cli(capsys, str(tmp_path / PLAN_NAME), "--no-ui", *flags), *fragments)


def test_bad_plan_via_python_dash_m(tmp_path: Path) -> None:
    data = base_plan()
    data["models"][1]["max_workers"] = 0
    write_data(tmp_path)
    plan = tmp_path / PLAN_NAME
    plan.write_text(tomli_w.dumps(data), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{PLAN_NAME}: models[1].max_workers: must be ≥ 1 (got 0)" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["plan.toml", "--bogus"], "evaltui: unrecognized arguments: --bogus"),
        (["plan.toml", "--executor", "slurm"], "evaltui: argument --executor: invalid choice: 'slurm'"),  # (the choices' quoting is the Python version's)
        (["watch"], "evaltui watch: the following arguments are required: WORK_DIR"),
        (["serve-sim", "--port", "x"], "evaltui serve-sim: argument --port: not an integer: 'x'"),
    ],
)
def test_a_command_line_it_refuses_is_one_line_and_exit_2(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """As for a plan: one line on stderr (argparse's usage comes with --help only)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(said), err


def _too_deep_walking_every_value(raw: dict[str, Any]) -> str | None:
    """load._too_deep as it was: every value walked (the reference its faster walk must match)."""
    from evaltui.plan.load import _NAMED_LEVELS, MAX_NESTING

    stack: list[tuple[Any, str, int]] = [(raw, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"{where}…"
        named = depth < _NAMED_LEVELS
        if isinstance(value, dict):
            stack += [(v, (f"{where}.{k}" if where else str(k)) if named else where, depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{where}[{i}]" if named else where, depth + 1) for i, v in enumerate(value)]
    return None


def test_the_walk_of_tables_and_arrays_finds_what_the_walk_of_every_value_found() -> None:
    """_too_deep walks only tables and arrays: the same first path, or None, for nestings at,
    around and past the limit, scalars or empty ones at the bottom, several too deep at once."""
    import random

    from evaltui.plan.load import MAX_NESTING, _too_deep

    rng = random.Random(23)

    def nest(depth: int) -> Any:
        bottom = rng.choice([1, "x", [], {}, [2], {"k": 3}])
        for _ in range(depth):
            bottom = rng.choice([lambda v: [v], lambda v: {"k": v}, lambda v: [1, v, "s"], lambda v: {"a": 1, "b": v, "c": [v]}])(bottom)
        return bottom

    for _ in range(400):
        raw = {f"t{j}": nest(rng.randint(MAX_NESTING - 4, MAX_NESTING + 2)) for j in range(rng.randint(1, 3))}
        raw["datasets"] = [{"abbr": "d", "evaluator": {"type": "x", "k": [1]}}, nest(rng.randint(0, MAX_NESTING + 1))]
        assert _too_deep(raw) == _too_deep_walking_every_value(raw), raw
