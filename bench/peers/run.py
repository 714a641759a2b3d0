"""evaltui against Inspect AI, lm-evaluation-harness and OpenCompass on one workload, side by side.

    python bench/peers/run.py                          # N=2000, C=64, L=50 ms; installs into a temp folder
    python bench/peers/run.py --venvs /tmp/peers       # keep (and reuse) the peers' virtualenvs there
    python bench/peers/run.py --only evaltui,lm-eval --n 200

Each peer is installed from PyPI, at run time, into its own virtual environment (nothing of theirs
is in this repository; the glue below is their stock CLIs and a few lines of task definition).
All tools run as subprocesses against one simulator process with the same settings: the
OpenAI-compatible endpoints for Inspect AI (`openai-api` provider, chat) and lm-evaluation-harness
(`local-completions`), LightLLM `/generate` for evaltui and OpenCompass (its `LightllmAPI`). The
model name is "bench" everywhere, so the simulator's right/wrong decision is the same for every tool,
and the accuracy each reports must equal the simulator's ground truth. Columns as in
throughput.py; a peer's CPU and RSS include the worker processes it waits for.

OpenCompass is attempted within --install-timeout (default 20 min) and skipped with a note if it
does not install.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import workload as w  # noqa: E402

PEERS = {  # name: (pip requirements, the distribution whose version is reported)
    "inspect-ai": (["inspect-ai", "openai"], "inspect_ai"),
    "lm-eval": (["lm-eval[api]"], "lm_eval"),
    # pyarrow: OpenCompass pins numpy < 2, and pyarrow >= 20 needs numpy 2 without saying so to pip.
    "opencompass": (["opencompass", "pyarrow<20"], "opencompass"),
}

INSPECT_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import exact
from inspect_ai.solver import generate


@task
def arith(path: str):
    return Task(dataset=json_dataset(path, FieldSpec(input="question", target="answer")),
                solver=generate(), scorer=exact())
'''

LM_EVAL_TASK = '''
task: arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
target_delimiter: ""
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 16
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
'''

OPENCOMPASS_CONFIG = '''
from opencompass.datasets import CustomDataset
from opencompass.models import LightllmAPI
from opencompass.openicl.icl_evaluator import EMEvaluator
from opencompass.openicl.icl_inferencer import GenInferencer
from opencompass.openicl.icl_prompt_template import PromptTemplate
from opencompass.openicl.icl_retriever import ZeroRetriever

datasets = [dict(
    abbr="arith", type=CustomDataset, path={data!r},
    reader_cfg=dict(input_columns=["question"], output_column="answer"),
    infer_cfg=dict(prompt_template=dict(type=PromptTemplate, template="{{question}}"),
                   retriever=dict(type=ZeroRetriever), inferencer=dict(type=GenInferencer)),
    eval_cfg=dict(evaluator=dict(type=EMEvaluator)),
)]
models = [dict(
    abbr="bench", type=LightllmAPI, path="bench", url={url!r},
    meta_template=None, max_workers_per_task={c}, rate_per_worker=100000, retry=2,
    generation_kwargs=dict(do_sample=False, ignore_eos=False, max_new_tokens=16),
    max_out_len=16, batch_size={c},
)]
'''


def install(root: Path, name: str, timeout: float) -> Path | None:
    """The peer's venv python, installing it first unless a finished install is there."""
    venv = root / name
    marker = venv / ".bench-installed"
    if marker.exists():
        return venv / "bin" / "python"
    reqs, _ = PEERS[name]
    print(f"installing {name} into {venv} ...", flush=True)
    t0 = time.monotonic()
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *reqs], check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        print(f"  {name}: not installed within {timeout / 60:.0f} min; skipped", flush=True)
        return None
    except subprocess.CalledProcessError as exc:
        print(f"  {name}: install failed; skipped\n{(exc.stderr or '')[-2000:]}", flush=True)
        return None
    marker.write_text(f"installed in {time.monotonic() - t0:.0f} s\n")
    return venv / "bin" / "python"


def version(python: Path, dist: str) -> str:
    r = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                       capture_output=True, text=True, timeout=120)
    return r.stdout.strip() or "?"


def peer_env(python: Path, home: Path, **extra: str) -> dict[str, str]:
    env = dict(w.ENV)
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    env["HF_HOME"] = str(home / "hf")  # lm-eval's datasets cache: keep it out of the user's home
    env["HF_DATASETS_OFFLINE"] = env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


def run_inspect(python: Path, folder: Path, data: Path, sim: w.Sim, n: int, c: int, lat: float) -> w.Measure:
    task = folder / "inspect_task.py"
    task.write_text(INSPECT_TASK)
    logs = folder / "inspect-logs"
    argv = [str(python.parent / "inspect"), "eval", task.name, "-T", f"path={data}",
            "--model", f"openai-api/sim/{w.MODEL}", "--max-connections", str(c), "--max-tokens", "16",
            "--display", "none", "--log-format", "json", "--log-dir", str(logs), "--no-log-samples"]
    env = peer_env(python, folder, SIM_BASE_URL=f"{sim.url}/v1", SIM_API_KEY="unused")
    m, _ = w.run_client("inspect-ai", argv, sim, n, c, lat, cwd=folder, env=env)
    log = json.loads(next(logs.glob("*.json")).read_text())
    m.accuracy = 100.0 * log["results"]["scores"][0]["metrics"]["mean"]["value"]  # exact() reports "mean"
    return m


def run_lm_eval(python: Path, folder: Path, data: Path, sim: w.Sim, n: int, c: int, lat: float) -> w.Measure:
    tasks = folder / "lm_eval_tasks"
    tasks.mkdir(exist_ok=True)
    (tasks / "arith.yaml").write_text(LM_EVAL_TASK.format(data=data))
    out = folder / "lm-eval-out"
    args = (f"model={w.MODEL},base_url={sim.url}/v1/completions,num_concurrent={c},max_retries=3,"
            "tokenized_requests=False,tokenizer_backend=None")
    argv = [str(python.parent / "lm_eval"), "--model", "local-completions", "--model_args", args,
            "--tasks", "arith", "--include_path", str(tasks), "--output_path", str(out)]
    m, _ = w.run_client("lm-eval", argv, sim, n, c, lat, cwd=folder, env=peer_env(python, folder))
    result = json.loads(next(out.rglob("results_*.json")).read_text())
    m.accuracy = 100.0 * result["results"]["arith"]["exact_match,none"]
    return m


def run_opencompass(python: Path, folder: Path, data: Path, sim: w.Sim, n: int, c: int, lat: float) -> w.Measure:
    # The same records, the reference as a list: EMEvaluator takes a list of acceptable answers.
    oc_data = folder / "data_oc.jsonl"
    with open(data) as src, open(oc_data, "w") as dst:
        for line in src:
            rec = json.loads(line)
            dst.write(json.dumps({**rec, "answer": [rec["answer"]]}) + "\n")
    config = folder / "oc_config.py"
    config.write_text(OPENCOMPASS_CONFIG.format(data=str(oc_data), url=f"{sim.url}/{w.MODEL}/generate", c=c))
    work = folder / "oc-out"
    argv = [str(python.parent / "opencompass"), str(config), "-w", str(work)]
    m, _ = w.run_client("opencompass", argv, sim, n, c, lat, cwd=folder, env=peer_env(python, folder))
    result = json.loads(next(work.rglob("results/bench/arith.json")).read_text())
    m.accuracy = float(result["score"])
    return m


RUNNERS: dict[str, Callable[..., w.Measure]] = {
    "inspect-ai": run_inspect, "lm-eval": run_lm_eval, "opencompass": run_opencompass,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accuracy", type=float, default=0.8)
    ap.add_argument("--venvs", type=Path, help="folder for the peers' virtualenvs, kept and reused (default: a temp folder)")
    ap.add_argument("--install-timeout", type=float, default=1200, help="seconds per peer install (default 1200)")
    ap.add_argument("--only", default="evaltui,inspect-ai,lm-eval,opencompass", help="comma-separated tools")
    args = ap.parse_args()
    only = args.only.split(",")

    with tempfile.TemporaryDirectory(prefix="evaltui-peers-") as tmp:
        folder = Path(tmp)
        root = args.venvs or folder / "venvs"
        root.mkdir(parents=True, exist_ok=True)
        pythons = {name: install(root, name, args.install_timeout) for name in PEERS if name in only}
        data, key = w.write_data(folder, args.n)
        lat = args.latency + args.jitter / 2
        sim = w.start_sim(key, args.latency, args.jitter, args.seed, args.accuracy)
        rows, versions = [], {}
        try:
            if "evaltui" in only:
                w.run_evaltui(folder, data, sim, args.n, args.c, lat)  # warm-up: bytecode caches
                rows.append(w.run_evaltui(folder, data, sim, args.n, args.c, lat))
            for name, python in pythons.items():
                if python is None:
                    continue
                versions[name] = version(python, PEERS[name][1])
                sub = folder / name
                sub.mkdir()
                try:
                    rows.append(RUNNERS[name](python, sub, data, sim, args.n, args.c, lat))
                except (SystemExit, StopIteration, KeyError) as exc:
                    print(f"{name}: run failed: {str(exc)[-3000:]}", flush=True)
        finally:
            sim.stop()

    truth = w.ground_truth(args.n, args.accuracy)
    print(f"N={args.n}  C={args.c}  L={args.latency * 1000:.0f} ms + jitter [0, {args.jitter * 1000:.0f}] ms  "
          f"accuracy setting {args.accuracy} -> ground truth {truth:.2f} %")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(w.HEADER + "  agrees")
    for m in rows:
        agrees = m.accuracy is not None and abs(m.accuracy - truth) < 0.01
        print(w.row(m) + ("  yes" if agrees else "  NO"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
