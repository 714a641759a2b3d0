"""`evaltui report WORK_DIR`: a run as one HTML file, checked in a real browser (Debian's
chromium, headless): the DOM its scripts leave shows the leaderboard, the charts and samples."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from browser import Node, dump_dom, needs_chromium
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan
from watchkit import fixture_copy, start_writer, wait_for, watch_plan

from evaltui.cli import main
from evaltui.sim import Faults, ModelProfile, SimConfig

HOSTILE = "<img src=x onerror=\"document.title='owned'\"></script><script>document.title='owned'</script>"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models × two datasets: `m` answers half right and is refused sample 4 (a 400, the
    prompt too long); sample 2's question carries markup that must stay text."""
    from evaltui.sim import SimThread

    tmp = tmp_path_factory.mktemp("report")
    rows = arithmetic(30)
    rows[2] = {**rows[2], "question": rows[2]["question"] + " " + HOSTILE}
    rows[4] = {**rows[4], "question": rows[4]["question"] + " [pad]" * 40}
    sim = SimThread(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5)}, faults=Faults(max_prompt_chars=200))).start()
    try:
        data = write_jsonl(tmp / "d.jsonl", rows)
        models = [chat("m", sim.url), lightllm("n", sim.url)]
        datasets = [gsm_dataset("d", data, fail_on_error=0.5), gsm_dataset("e", data, fail_on_error=0.5)]
        code, _, runner = run_plan(write_plan(tmp, models=models, datasets=datasets))
    finally:
        sim.stop()
    assert code == 0
    return runner.workdir.root


@pytest.fixture(scope="module")
def report(finished_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", str(finished_run), "-o", str(out)]) == 0
    return out


def _result(root: Path, model: str, dataset: str) -> dict[str, Any]:
    return json.loads((root / "results" / model / f"{dataset}.json").read_text())


def _half(root: Path, model: str, dataset: str) -> float:
    low, high = _result(root, model, dataset)["uncertainty"]["accuracy"]["ci95"]
    return float(high - low) / 2


def _cards(dom: Node) -> list[Node]:
    return dom.one(id="sample-list").all("details", class_="sample")


@needs_chromium
def test_the_page_shows_the_leaderboard_the_charts_and_a_sample(finished_run: Path, report: Path) -> None:
    dom = dump_dom(report)
    board = dom.one("table", id="leaderboard-table").rows()
    assert board[0][:4] == ["dataset", "version", "metric", "mode"] and set(board[0][4:]) == {"m", "n"}
    by_dataset = {r[0]: dict(zip(board[0][4:], r[4:], strict=True)) for r in board[1:]}
    for model, dataset in (("m", "d"), ("n", "d"), ("n", "e")):  # each score with its interval's half-width, as the result file has it
        result = _result(finished_run, model, dataset)
        low, high = result["uncertainty"]["accuracy"]["ci95"]
        assert by_dataset[dataset][model] == f"{result['accuracy']:.2f} ±{(high - low) / 2:.2f}"
    assert by_dataset["d"]["n"].startswith("96.67 ±")  # n: right but for the refused sample
    assert by_dataset["Average"]["n"].startswith("96.67 ±")  # the average's half-width: √Σh² / k
    half = ((_half(finished_run, "n", "d") ** 2 + _half(finished_run, "n", "e") ** 2) ** 0.5) / 2
    assert by_dataset["Average"]["n"] == f"96.67 ±{half:.2f}"
    assert board[0][4] == "n"  # ranked best first
    assert len(dom.one("svg", class_="scores-chart").all("rect", class_="bar")) == 4  # models × datasets
    failures = dom.one("table", id="failures-table").rows()
    assert failures[0] == ["model", "dataset", "http"] and ["m", "d", "1"] in failures and ["n", "e", "1"] in failures
    assert len(dom.one("svg", class_="failures-chart").all("rect", class_="bar")) == 2
    latency = dom.one("table", id="latency-table").rows()
    assert [r[0] for r in latency[1:]] == ["m", "n"] and latency[1][1] == "58"  # 60 units, 2 refused
    assert all(re.fullmatch(r"[\d.]+ ms", cell) for cell in latency[1][2:5])
    for name in ("throughput-chart", "latency-chart"):
        assert dom.one("svg", class_=name).all("path", class_="line")
    cards = _cards(dom)
    assert len(cards) == 30 and cards[0].attrs["data-index"] == "0" and "open" in cards[0].attrs  # the first pair's, m/d
    first = cards[0].text
    assert "Q0: what is 0 + 7?" in first and "gold" in first and "attempts" in first
    refused = next(c for c in cards if c.attrs["data-index"] == "4")
    assert refused.attrs["data-verdict"] == "f" and "http 400" in refused.text and "prompt is too long" in refused.text
    hostile = next(c for c in cards if c.attrs["data-index"] == "2")
    assert HOSTILE in hostile.text  # shown as the text it is
    assert not dom.all("img") and dom.one("head").one("title").text.endswith("evaltui report")  # never run as markup


@needs_chromium
def test_the_sample_browser_filters_searches_and_pages_from_the_link(report: Path) -> None:
    wrong = _cards(dump_dom(report, "pair=0&filter=w"))
    assert wrong and {c.attrs["data-verdict"] for c in wrong} == {"w"}
    failed = _cards(dump_dom(report, "pair=3&filter=f"))  # n/e
    assert [c.attrs["data-index"] for c in failed] == ["4"]
    found = dump_dom(report, "pair=1&q=Q17:")  # m/e
    assert [c.attrs["data-index"] for c in _cards(found)] == ["17"]
    assert "1 of 30 samples matching" in found.one(id="sample-status").text


def test_a_report_is_one_file_that_fetches_nothing(report: Path) -> None:
    page = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # no script, style or image from elsewhere
    assert "fetch(" not in page and "XMLHttpRequest" not in page
    assert page.count("<script>") == 1 and HOSTILE not in page  # the data is packed or escaped, never markup


def test_report_refuses_what_is_not_a_work_dir_and_a_file_inside_it(tmp_path: Path, finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err
    assert main(["report", str(finished_run), "-o", str(finished_run / "report.html")]) == 2
    assert "inside the work dir" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "-o", str(tmp_path / "r.html")]) == 2
    assert "nothing to report yet" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


@needs_chromium
def test_an_opencompass_work_dir(tmp_path: Path) -> None:
    root = fixture_copy("finished", tmp_path)
    out = tmp_path / "oc.html"
    assert main(["report", str(root), "-o", str(out)]) == 0
    dom = dump_dom(out)
    board = dom.one("table", id="leaderboard-table").rows()
    assert board[1][:4] == ["gsm8k", "1d7fe4", "accuracy", "gen"] and board[1][4:] == ["75.00", "50.00"]
    assert "No timings" in dom.one(id="latency").text
    cards = _cards(dom)
    assert cards[0].attrs["data-verdict"] == "r" and "Natalia sold 48 clips" in cards[0].text and "72" in cards[0].text
    mmlu = _cards(dump_dom(out, "pair=1"))  # qwen-7b/mmlu: its two parts, one after the other
    assert [c.attrs["data-index"] for c in mmlu] == ["0", "1", "2", "3", "4", "5"]


def test_a_run_in_progress_gives_a_snapshot(tmp_path: Path, sim_factory: Any) -> None:
    sim = sim_factory(SimConfig(models={"m": ModelProfile(accuracy=1.0, latency=0.05)}))
    plan = watch_plan(tmp_path, sim.url, records=(400,), max_workers=2)
    writer = start_writer(plan, tmp_path / "writer.log")
    try:
        checkpoint = tmp_path / "out" / "predictions" / "m" / "tmp_d0.jsonl"
        wait_for(lambda: checkpoint.exists() and checkpoint.read_bytes().count(b"\n") > 20)
        out = tmp_path / "live.html"
        assert main(["report", str(tmp_path / "out"), "-o", str(out)]) == 0
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
    page = out.read_text()
    summary = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page).group(1))  # type: ignore[union-attr]
    assert summary["live"] is True and any("a run in progress" in line for line in summary["said"])
    (pair,) = summary["pairs"]
    assert pair["status"] == "running" and 20 <= len(pair["verdicts"]) < 400 and set(pair["verdicts"]) == {"u"}  # answered, not yet scored
    assert time.time() - json.loads(json.dumps(summary["timeline"]["start"])) < 600
