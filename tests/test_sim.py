"""The simulated model server: wire formats, skill, routing and faults, over real sockets."""

from __future__ import annotations

import json
import random
import time

import httpx
import pytest

from evaltui.sim import (
    AnswerKey,
    Faults,
    ModelProfile,
    SimConfig,
    SimThread,
    answers_correctly,
    wrong_answer,
)
from evaltui.sim.answers import DONT_KNOW, WRONG_CODE, token_id, tokenize

MCQ_PROMPT = "Question: 2+2=?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:"
MCQ_CHOICES = [" A", " B", " C", " D"]


def make_key() -> AnswerKey:
    key = AnswerKey()
    key.add_gen("What is 6*7?", "#### 42")
    key.add_gen("Pick one: A, B, C or D?", "C")
    key.add_gen("Write add(a, b).", "def add(a, b):\n    return a + b\n")
    key.add_gen("Capital of France?", "Paris")
    key.add_gen("Count to five.", "one two three four five")
    key.add_ppl(MCQ_PROMPT, MCQ_CHOICES, " B")
    return key


def client(sim: SimThread, **kw) -> httpx.Client:
    return httpx.Client(base_url=sim.url, trust_env=False, timeout=10.0, **kw)


@pytest.fixture(scope="module")
def sim():
    cfg = SimConfig(
        models={"strong": ModelProfile(accuracy=1.0), "weak": ModelProfile(accuracy=0.0)},
        answer_key=make_key(),
    )
    with SimThread(cfg) as s:
        yield s


@pytest.fixture
def http(sim):
    sim.reset_stats()
    with client(sim) as c:
        yield c


def opencompass_ppl(resp: dict) -> float:
    """OpenCompass's LightLLM client code, verbatim, then the mean NLL it ranks by."""
    ids = resp["prompt_token_ids"][1:]
    lps = [item[1] for item in resp["prompt_logprobs"]]
    lp = [lp[str(t)] for t, lp in zip(ids, lps, strict=False)]
    return -sum(lp) / len(lp)


# --- plain endpoints -------------------------------------------------------

def test_health_models_and_stats(http):
    r = http.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert r.headers["content-type"] == "application/json"
    assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["strong", "weak"]
    body = http.get("/weak/v1/models").json()
    assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["weak"]
    stats = http.get("/sim/stats").json()
    assert stats["requests_total"] == 0  # health/models/stats are not model requests
    assert http.post("/sim/reset").json() == {"status": "ok"}


def test_error_bodies(http):
    r = http.get("/nope")
    assert r.status_code == 404
    err = r.json()["error"]
    assert set(err) == {"message", "type", "code"} and "/nope" in err["message"]
    r = http.post("/generate", content=b"{not json")
    assert r.status_code == 400 and "invalid JSON" in r.json()["error"]["message"]
    r = http.post("/v1/chat/completions", json={"messages": "hi"})
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = http.post("/generate", json={"inputs": "x", "parameters": {"max_new_tokens": -1}})
    assert r.status_code == 400 and "max_new_tokens" in r.json()["error"]["message"]
    r = http.get("/generate")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and "error" in r.json()


# --- LightLLM --------------------------------------------------------------

def test_lightllm_generate_list(http):
    r = http.post("/generate", json={"inputs": "What is 6*7?", "parameters": {"do_sample": False}})
    assert r.status_code == 200
    body = r.json()
    assert body["generated_text"] == ["#### 42"]
    assert body["finish_reason"] == "stop"
    assert body["count_output_tokens"] == len(tokenize("#### 42")) == 2
    assert body["prompt_tokens"] == len(body["prompt_token_ids"]) == len(tokenize("What is 6*7?")) + 1
    assert body["prompt_token_ids"][0] == 1
    assert body["prompt_token_ids"][1:] == [token_id(p) for p in tokenize("What is 6*7?")]


def test_lightllm_generate_string_mode_and_no_logprobs():
    cfg = SimConfig(answer_key=make_key(), generated_text_as_string=True, prompt_logprobs=False)
    with SimThread(cfg) as s, client(s) as c:
        body = c.post("/generate", json={"inputs": "Capital of France?"}).json()
    assert body["generated_text"] == "Paris"
    assert "prompt_logprobs" not in body and "prompt_token_ids" not in body


def test_prompt_logprobs_layout_and_opencompass_ranking(http):
    for model, expected in (("strong", " B"), ("weak", " C")):  # weak prefers the next choice
        scores = []
        for choice in MCQ_CHOICES:
            body = http.post(f"/{model}/generate", json={
                "inputs": MCQ_PROMPT + choice, "parameters": {"max_new_tokens": 1}}).json()
            ids, plp = body["prompt_token_ids"], body["prompt_logprobs"]
            assert len(plp) == len(ids) - 1
            for i, item in enumerate(plp):  # item i is [token_i, {str(token_i+1): logprob}]
                assert item[0] == ids[i] and list(item[1]) == [str(ids[i + 1])]
            scores.append(opencompass_ppl(body))
        assert MCQ_CHOICES[scores.index(min(scores))] == expected
    # Text not in the key: every token -1.0.
    body = http.post("/generate", json={"inputs": "unrelated text here"}).json()
    assert opencompass_ppl(body) == pytest.approx(1.0)


def test_omit_content_type():
    cfg = SimConfig(answer_key=make_key(), omit_content_type=True)
    with SimThread(cfg) as s, client(s) as c:
        r = c.post("/generate", json={"inputs": "Capital of France?"})
        assert "content-type" not in r.headers
        assert json.loads(r.content)["generated_text"] == ["Paris"]
        r = c.get("/missing")
        assert r.status_code == 404 and "content-type" not in r.headers
        assert "error" in json.loads(r.content)


def test_max_new_tokens_truncation_and_params_logged(http):
    body = http.post("/generate", json={
        "inputs": "Count to five.", "parameters": {"max_new_tokens": 3, "temperature": 0.5}}).json()
    assert body["generated_text"] == ["one two three"]
    assert body["finish_reason"] == "length" and body["count_output_tokens"] == 3
    r = http.post("/v1/chat/completions", json={
        "model": "m", "max_tokens": 2, "temperature": 0,
        "messages": [{"role": "user", "content": "Count to five."}]}).json()
    assert r["choices"][0]["message"]["content"] == "one two"
    assert r["choices"][0]["finish_reason"] == "length"
    r = http.post("/v1/completions", json={"prompt": "Count to five.", "max_tokens": 1}).json()
    assert r["choices"][0]["text"] == "one" and r["choices"][0]["finish_reason"] == "length"
    log = list(http.get("/sim/stats").json()["log"])
    assert log[0]["params"] == {"max_new_tokens": 3, "temperature": 0.5}
    assert log[1]["params"] == {"max_tokens": 2, "temperature": 0}
    assert log[2]["params"] == {"max_tokens": 1}
    assert [e["endpoint"] for e in log] == ["generate", "chat", "completions"]


# --- OpenAI ----------------------------------------------------------------

def test_openai_chat(http):
    r = http.post("/v1/chat/completions", json={
        "model": "strong", "max_tokens": 64, "temperature": 0.0,
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "What is 6*7?"}]})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "strong"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "#### 42"}
    assert choice["finish_reason"] == "stop"
    u = body["usage"]
    assert u["completion_tokens"] == 2 and u["total_tokens"] == u["prompt_tokens"] + 2
    # Content given as a list of parts is keyed by its text.
    r = http.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}]})
    assert r.json()["choices"][0]["message"]["content"] == "Paris"


def test_openai_chat_stream(http):
    r = http.post("/v1/chat/completions", json={
        "stream": True, "messages": [{"role": "user", "content": "Capital of France?"}]})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Paris"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("max_tokens", [0, 1])
def test_completions_echo_logprobs(http, max_tokens):
    prompt = MCQ_PROMPT + " B"
    r = http.post("/strong/v1/completions", json={
        "model": "ignored", "prompt": prompt, "max_tokens": max_tokens, "echo": True, "logprobs": 1})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion"
    choice = body["choices"][0]
    assert choice["text"].startswith(prompt)
    lp = choice["logprobs"]
    n_prompt = len(tokenize(prompt))
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) \
        == len(lp["text_offset"]) == n_prompt + max_tokens
    assert "".join(lp["tokens"]) == choice["text"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(isinstance(x, float) for x in lp["token_logprobs"][1:])
    for tok, off in zip(lp["tokens"], lp["text_offset"], strict=False):
        assert choice["text"][off:off + len(tok)] == tok
    if max_tokens == 0:
        assert choice["text"] == prompt and choice["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] == n_prompt


def test_completions_echo_ranks_like_lightllm(http):
    for model, expected in (("strong", " B"), ("weak", " C")):
        scores = []
        for choice in MCQ_CHOICES:
            text = MCQ_PROMPT + choice
            lp = http.post("/v1/completions", json={
                "model": model, "prompt": text, "max_tokens": 1, "echo": True, "logprobs": 0,
            }).json()["choices"][0]["logprobs"]
            # Keep the prompt's tokens only (max_tokens=1 adds a generated one).
            vals = [v for v, off in zip(lp["token_logprobs"], lp["text_offset"], strict=False)
                    if off < len(text) and v is not None]
            scores.append(-sum(vals) / len(vals))
        assert MCQ_CHOICES[scores.index(min(scores))] == expected


# --- skill and routing -------------------------------------------------------

def test_model_name_from_path_prefix_then_body_then_default(http):
    ask = {"inputs": "What is 6*7?"}
    assert http.post("/strong/generate", json=ask).json()["generated_text"] == ["#### 42"]
    assert http.post("/weak/generate", json=ask).json()["generated_text"] == ["#### 43"]
    # The path prefix wins over the body's model.
    msg = {"model": "weak", "messages": [{"role": "user", "content": "What is 6*7?"}]}
    r = http.post("/strong/v1/chat/completions", json=msg).json()
    assert r["choices"][0]["message"]["content"] == "#### 42"
    r = http.post("/v1/chat/completions", json=msg).json()
    assert r["choices"][0]["message"]["content"] == "#### 43"
    http.post("/generate", json=ask)
    http.post("/org/some-model/v1/completions", json={"prompt": "x"})
    models = [e["model"] for e in http.get("/sim/stats").json()["log"]]
    assert models == ["strong", "weak", "strong", "weak", "default", "org/some-model"]


def test_accuracy_matches_answers_correctly():
    key = AnswerKey()
    prompts = [f"Question {i}: what is {i} + {i}?" for i in range(200)]
    for i, p in enumerate(prompts):
        key.add_gen(p, f"The answer is {2 * i}.")
    cfg = SimConfig(models={"m37": ModelProfile(accuracy=0.37)}, answer_key=key)
    with SimThread(cfg) as s, client(s) as c:
        right = sum(
            c.post("/m37/generate", json={"inputs": p}).json()["generated_text"][0]
            == f"The answer is {2 * i}."
            for i, p in enumerate(prompts)
        )
        stats = s.stats
    expected = sum(answers_correctly("m37", p, 0.37) for p in prompts)
    assert right == expected
    assert 40 < expected < 110  # the hash rule really is near the rate
    assert stats.requests_total == 200 and len(stats.attempts) == 200


def test_answers_correctly_rule():
    assert answers_correctly("m", "p", 1.0) and answers_correctly("m", "p", 1.5)
    assert not answers_correctly("m", "p", 0.0) and not answers_correctly("m", "p", -1)
    import hashlib
    h = int.from_bytes(hashlib.sha256(b"m\0p").digest()[:8], "big") / 2**64
    assert answers_correctly("m", "p", h + 1e-9) and not answers_correctly("m", "p", h)


@pytest.mark.parametrize("right, wrong", [
    ("A", "B"), ("D", "A"), ("C", "D"), ("E", "F"), ("Z", "A"), (" B", " C"),
    ("#### 1,234", "#### 1,235"), ("#### 999", "#### 1000"), ("it is 7, not 3 or 4.5", "it is 7, not 3 or 5.5"),
    ("x = -5", "x = -4"), ("def f():\n    return 1\n", WRONG_CODE), ("  return x", WRONG_CODE),
    ("Paris", DONT_KNOW), ("", DONT_KNOW),
])
def test_wrong_answer_rules(right, wrong):
    assert wrong_answer(right) == wrong


def test_wrong_answers_served(http):
    get = lambda p: http.post("/weak/generate", json={"inputs": p}).json()["generated_text"][0]  # noqa: E731
    assert get("Pick one: A, B, C or D?") == "D"
    assert get("Write add(a, b).") == WRONG_CODE
    assert get("Capital of France?") == DONT_KNOW
    assert get("Not in the key at all") == DONT_KNOW
    assert http.post("/strong/generate", json={"inputs": "Unknown"}).json()["generated_text"] == [DONT_KNOW]


def test_answer_key_jsonl_roundtrip(tmp_path):
    key = make_key()
    path = tmp_path / "key.jsonl"
    key.dump_jsonl(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {"prompt": MCQ_PROMPT, "choices": MCQ_CHOICES, "answer": " B"} in lines
    again = AnswerKey()
    assert again.load_jsonl(path) == len(key) == 6
    assert again.gen_answer("What is 6*7?") == "#### 42"
    assert again.match_ppl(MCQ_PROMPT + " D") == (MCQ_PROMPT, MCQ_CHOICES, 3, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "answer": "b"}\n{"prompt": "c", "choices": ["x"], "answer": "y"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: .*not one of the choices"):
        AnswerKey().load_jsonl(bad)


def test_config_validation():
    with pytest.raises(ValueError, match="accuracy"):
        ModelProfile(accuracy=1.5)
    with pytest.raises(ValueError, match="rate_500"):
        Faults(rate_500=-0.1)
    with pytest.raises(ValueError, match="fail_first_kind"):
        Faults(fail_first_kind="teapot")
    assert Faults(fail_first_kind=503).fail_first_kind == "503"


# --- faults ------------------------------------------------------------------

def fault_sim(**faults) -> SimThread:
    return SimThread(SimConfig(answer_key=make_key(), faults=Faults(**faults)))


def ask(c: httpx.Client, prompt: str = "What is 6*7?", **kw) -> httpx.Response:
    return c.post("/generate", json={"inputs": prompt}, **kw)


@pytest.mark.parametrize("kind, status", [
    ("429", 429), ("500", 500), ("400", 400), ("401", 401), ("403", 403), ("404", 404),
    ("408", 408), ("413", 413), ("422", 422), ("503", 503),
])
def test_fail_first_status(kind, status):
    with fault_sim(fail_first=2, fail_first_kind=kind, retry_after=0.05) as s, client(s) as c:
        for _ in range(2):
            r = ask(c)
            assert r.status_code == status
            err = r.json()["error"]
            assert err["message"].startswith(f"simulated {status}") and err["code"] == status
            if status == 429:
                assert r.headers["retry-after"] == "0.05"
        assert ask(c).json()["generated_text"] == ["#### 42"]  # attempt N+1 succeeds
        assert ask(c, "Capital of France?").status_code == status  # counted per prompt
        stats = s.stats
    assert stats.attempts[("default", "What is 6*7?")] == 3
    assert stats.faults[kind] == 3
    if status == 422:
        assert "simulated 422: prompt too long" in r.json()["error"]["message"]


def test_fail_first_malformed():
    with fault_sim(fail_first=1, fail_first_kind="malformed") as s, client(s) as c:
        r = ask(c)
        assert r.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.content)
        assert ask(c).json()["generated_text"] == ["#### 42"]
        assert s.stats.faults["malformed"] == 1


def test_fail_first_drop():
    with fault_sim(fail_first=2, fail_first_kind="drop") as s, client(s) as c:
        for _ in range(2):
            with pytest.raises(httpx.TransportError):
                ask(c)
        assert ask(c).json()["generated_text"] == ["#### 42"]
        stats = s.stats
    assert stats.faults["drop"] == 2 and stats.in_flight == 0 and len(stats.log) == 3


def test_fail_first_slow_and_client_gone():
    with fault_sim(fail_first=1, fail_first_kind="slow", slow_seconds=30.0) as s:
        with client(s) as c:
            with pytest.raises(httpx.ReadTimeout):
                ask(c, timeout=0.3)
        with client(s) as c:
            assert ask(c).json()["generated_text"] == ["#### 42"]
        # The abandoned slow request is settled as soon as its client went away.
        for _ in range(250):
            if s.stats.in_flight == 0:
                break
            time.sleep(0.02)
        stats = s.stats
    assert stats.in_flight == 0 and stats.faults["slow"] == 1 and len(stats.log) == 2


def test_slow_reply_arrives():
    with fault_sim(rate_slow=1.0, slow_seconds=0.05) as s, client(s) as c:
        assert ask(c).json()["generated_text"] == ["#### 42"]
        assert s.stats.faults["slow"] == 1


def test_max_prompt_chars():
    with fault_sim(max_prompt_chars=20) as s, client(s) as c:
        long_prompt = "x" * 21
        r = ask(c, long_prompt)
        assert r.status_code == 400
        assert r.json()["error"]["message"] == "prompt is too long: 21 characters > 20"
        assert ask(c).status_code == 200  # 12 characters
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": long_prompt}]})
        assert r.status_code == 400


def test_rate_faults_are_seeded_and_ordered():
    n, seed = 60, 7
    # Predict: draws happen only for non-zero rates, in the order 429, 500, malformed.
    rng = random.Random(seed)
    expected = []
    for _ in range(n):
        if rng.random() < 0.2:
            expected.append(429)
        elif rng.random() < 0.2:
            expected.append(500)
        elif rng.random() < 0.2:
            expected.append("malformed")
        else:
            expected.append(200)
    for _ in range(2):  # a fresh server with the same seed repeats the sequence
        with fault_sim(rate_429=0.2, rate_500=0.2, rate_malformed=0.2, seed=seed,
                       retry_after=1.0) as s, client(s) as c:
            got = []
            for _ in range(n):
                r = ask(c)
                if r.status_code == 200:
                    try:
                        r.json()
                        got.append(200)
                    except json.JSONDecodeError:
                        got.append("malformed")
                else:
                    got.append(r.status_code)
                    if r.status_code == 429:
                        assert r.headers["retry-after"] == "1"
            stats = s.stats
        assert got == expected
    assert stats.faults["429"] == expected.count(429) > 0
    assert stats.faults["500"] == expected.count(500) > 0
    assert stats.faults["malformed"] == expected.count("malformed") > 0


def test_rate_drop():
    with fault_sim(rate_drop=0.5, seed=3) as s, client(s) as c:
        outcomes = []
        for _ in range(20):
            try:
                outcomes.append(ask(c).status_code)
            except httpx.TransportError:
                outcomes.append("drop")
        stats = s.stats
    assert outcomes.count("drop") == stats.faults["drop"] > 0
    assert outcomes.count(200) == 20 - stats.faults["drop"] > 0


def test_stats_log_tail(http):
    for i in range(3):
        http.post("/generate", json={"inputs": f"p{i}"})
    assert [e["prompt"] for e in http.get("/sim/stats?log=2").json()["log"]] == ["p1", "p2"]
    assert [e["prompt"] for e in http.get("/sim/stats?log=10").json()["log"]] == ["p0", "p1", "p2"]
    body = http.get("/sim/stats?log=0").json()
    assert body["log"] == [] and body["requests_total"] == 3
    assert http.get("/sim/stats?log=x").status_code == 400


def test_rate_400_rejects_without_retry_after_and_counts_attempts_per_prompt():
    with fault_sim(rate_400=0.5, seed=5) as s, client(s) as c:
        codes = [ask(c, f"p{i % 4}").status_code for i in range(40)]
        body = c.get("/sim/stats?log=0").json()
    assert set(codes) == {200, 400} and body["faults"]["400"] == codes.count(400)
    # The stats endpoint counts attempts per (model, prompt): what a retry bound is checked against.
    assert sorted((a["prompt"], a["count"]) for a in body["attempts"]) == [(f"p{i}", 10) for i in range(4)]


def test_stats_request_window(http):
    """The window a benchmark divides the floor by: first request received to last reply done."""
    assert http.get("/sim/stats").json()["first_received"] is None
    t0 = time.monotonic()
    for i in range(3):
        http.post("/generate", json={"inputs": f"w{i}"})
    t1 = time.monotonic()
    body = http.get("/sim/stats?log=0").json()
    log = http.get("/sim/stats").json()["log"]
    assert t0 <= body["first_received"] == log[0]["t_received"]
    assert body["first_received"] < body["last_done"] == log[-1]["t_done"] <= t1
    http.post("/sim/reset")
    assert http.get("/sim/stats").json()["last_done"] is None


def test_the_answer_key_is_written_as_json_dumps_writes_it(tmp_path):
    """write_answer_key writes a gen dataset's lines without json.dumps (30,000 of them at a run's
    start): each is the text json.dumps makes of its {"prompt", "answer"}, quotes, escapes and
    non-ASCII text alike; the other modes' lines (with choices) are json.dumps's own."""
    import io

    import tomli_w

    from evaltui.engine.run.simproc import write_answer_key
    from evaltui.plan import load_plan

    rows = [{"question": 'say "hi"\\ \t né 漢 \U0001f600', "answer": "#### 1\n"}, {"question": "plain", "answer": "x"}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(json.dumps({"question": "pick", "label": "1"}) + "\n", encoding="utf-8")
    plan = {
        "models": [{"abbr": "m", "type": "lightllm", "url": "sim://"}],
        "datasets": [
            {"abbr": "d", "path": "d.jsonl", "prompt": "Q: {question}", "target": "{answer}", "system": "Be brief ✓."},
            {"abbr": "c", "path": "c.jsonl", "prompt": "{question}", "target": "{label}", "mode": "ppl", "choices": [" a", " b"], "evaluator": {"type": "ppl"}},
        ],
    }
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan), encoding="utf-8")
    out = io.StringIO()
    count = write_answer_key(load_plan(path), out)
    lines = out.getvalue().splitlines()
    assert count == len(lines) == 5
    assert lines == [json.dumps(json.loads(line)) for line in lines]
    assert json.loads(lines[0]) == {"prompt": 'Q: say "hi"\\ \t né 漢 \U0001f600', "answer": "#### 1\n"}
    assert json.loads(lines[1]) == {"prompt": 'Be brief ✓.\n\nQ: say "hi"\\ \t né 漢 \U0001f600', "answer": "#### 1\n"}
    assert list(json.loads(lines[-1])) == ["prompt", "answer", "choices"]
