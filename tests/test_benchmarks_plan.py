"""A benchmark in the plan: what it fills, what the plan may change, and every refusal in one line.

Also the plain datasets' parquet reader, and `evaltui benchmarks` (list, show, --help).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchkit import shared
from hubkit import parquet_bytes
from planmaker import run_plan, write_plan

from evaltui.plan import PlanError, load_plan
from evaltui.plan.benchmark import version_label
from evaltui.scoring.summary import RunSummary

SIM = {"abbr": "m", "type": "openai-chat", "url": "sim://?latency=0", "model": "m"}


def _problems(tmp_path: Path, **dataset: object) -> list[str]:
    plan = write_plan(tmp_path, models=[SIM], datasets=[{"abbr": "d", **dataset}])
    with pytest.raises(PlanError) as e:
        load_plan(plan)
    return e.value.problems


@pytest.mark.reliability
def test_an_unknown_benchmark_is_one_line_naming_the_field_and_the_close_names(tmp_path: Path) -> None:
    assert _problems(tmp_path, benchmark="gsm8k_cott") == [
        "plan.toml: datasets[0].benchmark: unknown benchmark 'gsm8k_cott' (close names: gsm8k_cot, gsm8k, gsm8k_gen; `evaltui benchmarks` lists them all)"
    ]
    assert _problems(tmp_path, benchmark="GSM") == [
        "plan.toml: datasets[0].benchmark: unknown benchmark 'GSM' (close names: gsm8k, gsm8k_gen, gsm8k_cot; `evaltui benchmarks` lists them all)"
    ]


@pytest.mark.reliability
def test_the_benchmark_keys_are_checked_one_line_each(tmp_path: Path) -> None:
    gsm = str(shared("gsm8k", "test.jsonl"))
    assert _problems(tmp_path, benchmark="gsm8k_cot", path=gsm, subsets=["algebra"]) == [
        "plan.toml: datasets[0].subsets: gsm8k_cot is not a grouped benchmark (it has no parts)"
    ]
    assert _problems(tmp_path, benchmark="gsm8k_cot", path=gsm, split="dev") == [
        "plan.toml: datasets[0].split: gsm8k_cot has no split 'dev' (it has: test, train)"
    ]
    assert _problems(tmp_path, benchmark="gsm8k_cot", path=gsm, num_fewshot=9) == [
        "plan.toml: datasets[0].num_fewshot: gsm8k_cot has only 8 fixed examples (got 9)"
    ]
    assert _problems(tmp_path, benchmark="gsm8k_cot", path=gsm, fewshot_as_multiturn=True, prompt="{fewshot}Q: {question}") == [
        "plan.toml: datasets[0].fewshot_as_multiturn: the turns are made from the entry's prompt and system: leave out the plan's prompt, system and messages"
    ]
    assert _problems(tmp_path, benchmark="gsm8k", path=str(tmp_path / "nowhere")) == [
        f"plan.toml: datasets[0].path: gsm8k: path {tmp_path / 'nowhere'} does not exist"
    ]
    assert _problems(tmp_path, benchmark="gsm8k", path=str(tmp_path), num_fewshot=-1) == ["plan.toml: datasets[0].num_fewshot: must be ≥ 0 (got -1)"]
    assert _problems(tmp_path, path="d.jsonl", prompt="{q}", target="{a}", split="test", stop=[""]) == [
        "plan.toml: datasets[0].stop: an empty stop sequence would end every reply at once",
    ]


def test_a_folder_that_lacks_a_split_says_which_file_in_the_releases_layout(tmp_path: Path) -> None:
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "test.jsonl").write_text(shared("gsm8k", "test.jsonl").read_text())
    (line,) = _problems(tmp_path, benchmark="gsm8k", path=str(tmp_path / "copy"))
    assert line == (f"plan.toml: datasets[0].path: gsm8k: no 'train' file at {tmp_path / 'copy' / 'train.jsonl'} "
                    "(a `path` folder is laid out as openai/grade-school-math (grade_school_math/data/): train.jsonl)")


def test_the_plan_may_change_any_key_and_the_version_then_says_the_entry_was_changed(tmp_path: Path) -> None:
    gsm = str(shared("gsm8k"))
    plan = load_plan(write_plan(tmp_path, models=[SIM], datasets=[
        {"abbr": "as_is", "benchmark": "gsm8k", "path": gsm},
        {"abbr": "same_values", "benchmark": "gsm8k", "path": gsm, "num_fewshot": 5, "max_tokens": 256, "stop": ["Question:", "</s>", "<|im_end|>"]},
        {"abbr": "longer", "benchmark": "gsm8k", "path": gsm, "max_tokens": 512},
        {"abbr": "zero_shot", "benchmark": "gsm8k", "path": gsm, "num_fewshot": 0},
        {"abbr": "own_scorer", "benchmark": "gsm8k", "path": gsm, "evaluator": {"type": "gsm8k"}},
        {"abbr": "ignore_case", "benchmark": "gsm8k", "path": gsm, "evaluator": {"ignore_case": False}},
    ]))
    labels = {d.abbr: version_label(d) for d in plan.datasets}
    assert labels["as_is"] == labels["same_values"] == "lm-eval gsm8k v3"
    changed = {labels[k] for k in ("longer", "zero_shot", "own_scorer", "ignore_case")}
    assert len(changed) == 4 and all(v.startswith("lm-eval gsm8k v3+") and len(v) == len("lm-eval gsm8k v3+") + 6 for v in changed)
    by_abbr = {d.abbr: d for d in plan.datasets}
    assert by_abbr["longer"].max_tokens == 512 and by_abbr["longer"].stop == ["Question:", "</s>", "<|im_end|>"]
    assert by_abbr["ignore_case"].evaluator.type == "exact_match" and by_abbr["ignore_case"].evaluator.filters  # merged over the entry's
    assert by_abbr["ignore_case"].evaluator.ignore_case is False
    rows = {r.abbr: r.version for r in RunSummary(plan).rows()}
    assert rows["as_is"] == "lm-eval gsm8k v3" and rows["longer"] == labels["longer"]


def test_the_resolved_plan_in_the_work_dir_reads_back_as_the_same_datasets(tmp_path: Path) -> None:
    plan_path = write_plan(tmp_path, models=[SIM], datasets=[{"abbr": "g", "benchmark": "gsm8k_cot", "path": str(shared("gsm8k", "test.jsonl")),
                                                             "limit": 3, "max_tokens": 300}])
    code, _, runner = run_plan(plan_path)
    assert code == 0
    again = load_plan(runner.workdir.plan_file)
    resolved = [d.model_copy(update={"path": str(Path(d.path).resolve())}) for d in load_plan(plan_path).datasets]
    assert again.datasets == resolved
    assert version_label(again.datasets[0]) == version_label(load_plan(plan_path).datasets[0])


def test_a_plain_dataset_may_be_a_parquet_file(tmp_path: Path) -> None:
    rows = [{"question": f"What is {n} + {n}?", "answer": f"#### {2 * n}"} for n in range(7)]
    (tmp_path / "d.parquet").write_bytes(parquet_bytes(rows))
    plan = write_plan(tmp_path, models=[SIM], datasets=[{"abbr": "d", "path": "d.parquet", "prompt": "{question}", "target": "{answer}",
                                                         "evaluator": {"type": "gsm8k"}}])
    code, _, runner = run_plan(plan)
    assert code == 0
    assert runner.leaderboard().scores[("m", "d")] == 100.0
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    (line,) = _problems(tmp_path, path="bad.parquet", prompt="{q}", target="{a}")
    assert line.startswith("plan.toml: datasets[0].path: bad.parquet: not a readable parquet file")


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_evaltui_benchmarks_lists_the_catalog() -> None:
    r = _cli("benchmarks")
    assert r.returncode == 0
    head, rule, *rows = r.stdout.splitlines()
    assert head.split()[:5] == ["name", "reference", "version", "records", "metric"]
    gsm = next(row for row in rows if row.startswith("gsm8k_cot "))
    assert "lm-eval 0.4.13" in gsm and "lm-eval gsm8k_cot v3" in gsm and "1319" in gsm and "exact_match,strict-match" in gsm and "openai/gsm8k" in gsm
    listed = json.loads(_cli("benchmarks", "--json").stdout)
    assert {e["name"] for e in listed} >= {"gsm8k", "gsm8k_cot"}
    assert "standard benchmarks" in _cli("benchmarks", "--help").stdout


def test_evaltui_benchmarks_show_prints_the_table_and_the_exact_first_request(tmp_path: Path) -> None:
    r = _cli("benchmarks", "show", "gsm8k_cot", "--path", str(shared("gsm8k", "test.jsonl")))
    assert r.returncode == 0, r.stderr
    table, _, request = r.stdout.partition("# The first request")
    assert 'benchmark = "gsm8k_cot"' in table and 'prompt = "{fewshot}Q: {question}\\nA:"' in table and "max_tokens = 256" in table
    body = json.loads(request[request.index("{"):])
    assert body["stop"] == ["Q:", "</s>", "<|im_end|>"] and body["max_tokens"] == 256 and body["temperature"] == 0.0
    assert body["prompt"].startswith("Q: There are 15 trees in the grove.") and body["prompt"].endswith("farmers' market?\nA:")
    chat = _cli("benchmarks", "show", "gsm8k_cot", "--path", str(shared("gsm8k", "test.jsonl")), "--type", "openai-chat")
    assert json.loads(chat.stdout[chat.stdout.index("{", chat.stdout.index("# The first request")):])["messages"][0]["content"] == body["prompt"]
    turns = _cli("benchmarks", "show", "gsm8k_cot", "--path", str(shared("gsm8k", "test.jsonl")), "--type", "openai-chat", "--num-fewshot", "1",
                 "--fewshot-as-multiturn")
    assert "fewshot_as_multiturn = true" in turns.stdout and 'content = "{fewshot_a0}"' in turns.stdout
    messages = json.loads(turns.stdout[turns.stdout.index("{", turns.stdout.index("# The first request")):])["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"] and messages[1]["content"].endswith("The answer is 6.")
    unknown = _cli("benchmarks", "show", "mmlu_pro")
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1 and "unknown benchmark 'mmlu_pro'" in unknown.stderr
    offline = subprocess.run([sys.executable, "-m", "evaltui", "benchmarks", "show", "gsm8k"], capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)})
    assert offline.returncode == 2
    assert offline.stderr.splitlines() == [
        f"evaltui benchmarks: gsm8k: HF_HUB_OFFLINE is set and openai/gsm8k is not in the Hub cache ({tmp_path}/hub): pass `path` to a local copy"
    ]


def test_readme_names_every_entry_of_the_catalog() -> None:
    from evaltui.benchmarks import ENTRIES

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Standard benchmarks"):readme.index("## What a run writes")]
    assert [name for name in ENTRIES if f"| `{name}` |" not in section] == []


def test_benchmarks_show_prints_a_loglikelihood_entrys_requests_one_a_choice() -> None:
    r = _cli("benchmarks", "show", "mmlu", "--path", str(shared("mmlu")), "--split", "validation", "--subsets", "virology")
    assert r.returncode == 0, r.stderr
    assert 'mode = "loglikelihood"' in r.stdout and 'choices = [\n    " A",' in r.stdout
    bodies = [json.loads(line) for line in r.stdout.split("# The first record's requests", 1)[1].splitlines()[1:]]
    assert [b["prompt"][-9:] for b in bodies] == ["Answer: A", "Answer: B", "Answer: C", "Answer: D"]
    assert all(b["prompt"].startswith("The following are multiple choice questions (with answers) about virology.\n\n") for b in bodies)
    assert {(b["echo"], b["logprobs"], b["max_tokens"], b["temperature"]) for b in bodies} == {(True, 1, 1, 0)}
    chat = _cli("benchmarks", "show", "mmlu", "--path", str(shared("mmlu")), "--split", "validation", "--type", "openai-chat")
    assert chat.returncode == 2 and chat.stderr.strip().endswith("--type openai-completions or lightllm")


def test_the_sample_benchmarks_plan_loads_and_its_path_lines_read_local_copies(tmp_path: Path) -> None:
    """sample_configs/benchmarks.toml as shipped (its files from the Hub: nothing asked of it when the
    plan loads), then with its commented `path` (and `split`) lines switched on, read from the copies
    in ../shared/datasets they point at."""
    sample = Path(__file__).resolve().parents[1] / "sample_configs" / "benchmarks.toml"
    script = (
        "import sys; from evaltui.plan import load_plan; from evaltui.datasets import load_records\n"
        "p = load_plan(sys.argv[1])\n"
        "print([(d.benchmark, d.path, d.split) for d in p.datasets], p.models[0].type)\n"
        "print([len(load_records(p, d)) for d in p.datasets] if sys.argv[2:] else '')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "VLLM_API_KEY": "not-a-real-key", "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9"}
    shipped = subprocess.run([sys.executable, "-c", script, str(sample)], env=env, capture_output=True, text=True, timeout=120)
    assert shipped.returncode == 0, shipped.stderr
    assert shipped.stdout.splitlines()[0] == (
        "[('gsm8k_cot', '', None), ('mmlu', '', None), ('humaneval', '', None), ('ifeval', '', None)] openai-completions"
    )
    gsm8k = shared("gsm8k", "test.jsonl")  # skips without the shared copies
    local = sample.read_text(encoding="utf-8").replace("# path = ", "path = ").replace("# split = ", "split = ")
    local = local.replace('"../../shared/datasets/', f'"{gsm8k.parents[1]}/')
    (tmp_path / "local.toml").write_text(local, encoding="utf-8")
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path / "local.toml"), "count"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "[1319, 1542, 164, 541]"  # GSM8K test, MMLU's 57 val CSVs, HumanEval, IFEval


def test_a_plan_without_a_benchmark_imports_none_of_the_benchmarks_machinery() -> None:
    """Start-up of the other plans is unchanged: the catalog, huggingface_hub, pyarrow and IFEval's
    NLTK/langdetect are imported only for a benchmark's (or a .parquet dataset's) files."""
    demo = Path(__file__).resolve().parents[1] / "sample_configs" / "demo.toml"
    script = (
        "import sys; import evaltui.cli, evaltui.headless, evaltui.engine.run.runner\n"
        "from evaltui.plan import load_plan; from evaltui.datasets import load_records\n"
        "p = load_plan(sys.argv[1]); [load_records(p, d) for d in p.datasets]\n"
        "heavy = ('huggingface_hub', 'pyarrow', 'nltk', 'langdetect', 'evaltui.benchmarks', 'evaltui.scoring.ifeval')\n"
        "print(sorted({m for m in sys.modules for h in heavy if m == h or m.startswith(h + '.')}))\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(demo)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_fewshot_as_multiturn_is_for_chat_models_and_the_version_says_it(tmp_path: Path) -> None:
    gsm = str(shared("gsm8k", "test.jsonl"))
    base = {"abbr": "g", "benchmark": "gsm8k_cot", "path": gsm, "limit": 2}
    completions = {"abbr": "c", "type": "openai-completions", "url": "sim://?latency=0"}
    with pytest.raises(PlanError) as e:
        load_plan(write_plan(tmp_path, models=[SIM, completions], datasets=[{**base, "fewshot_as_multiturn": True}]))
    assert e.value.problems == [
        "plan.toml: datasets[0].fewshot_as_multiturn: the examples go as turns to chat models only (lm-eval's flag with a chat template); "
        "models c (openai-completions) take one text: give them a dataset without it"
    ]
    plan = load_plan(write_plan(tmp_path, models=[SIM], datasets=[base, {**base, "abbr": "t", "fewshot_as_multiturn": True, "num_fewshot": 2}]))
    plain, turns = plan.datasets
    assert version_label(plain) == "lm-eval gsm8k_cot v3" and version_label(turns).startswith("lm-eval gsm8k_cot v3+")
    assert turns.prompt == "" and [(m.role, m.content) for m in turns.messages or ()] == [
        ("user", "{fewshot_q0}"), ("assistant", "{fewshot_a0}"), ("user", "{fewshot_q1}"), ("assistant", "{fewshot_a1}"), ("user", "Q: {question}\nA:"),
    ]
