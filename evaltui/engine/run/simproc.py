"""Start the bundled simulator for `sim://` models, so the demo needs no server of the user's.

The simulator runs as a child process on a free loopback port — a real server on the other
core, reached through the same HTTP client code as a real LightLLM or vLLM. It is told the
references of the plan's datasets (its "knowledge") and each simulated model's accuracy, so two
simulated models get different, known scores.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from typing import IO

from evaltui.backends import backend_class
from evaltui.conversation import Script, as_text
from evaltui.conversation.solvers import answer_character, answer_index
from evaltui.datasets import load_records, render_sample
from evaltui.plan import DatasetConfig, ModelConfig, Plan
from evaltui.sim.url import sim_options

START_TIMEOUT = 30.0
#: The pipes' buffer: the answer key (~2 MB for 30,000 prompts) is made while the child starts
#: (~0.5 s of imports) instead of waiting on a full 64 KiB pipe until the child reads it.
KEY_BUFFER = 8 << 20
_json_string = json.encoder.encode_basestring_ascii  # a str's JSON as json.dumps writes it


class SimulatorError(Exception):
    """The bundled simulator did not come up; the message says what it printed."""


def sim_url_for(base: str, model: ModelConfig) -> str:
    """The real URL a `sim://` model talks to: its own path prefix on the shared simulator, then
    its protocol's API path."""
    return f"{base}/{model.abbr}{backend_class(model).api_path}"


def write_answer_key(plan: Plan, out: IO[str]) -> int:
    """One line per prompt the simulated models know, in the simulator's answer-key format."""
    count = 0
    for ds in plan.datasets:
        reply = _reply_template(ds)
        for index, record in enumerate(load_records(plan, ds)):
            s = render_sample(ds, index, record)
            prompts = [s.prompt] + ([f"{s.system}{ds.system_join}{s.prompt}"] if s.system else [])
            answer = reply.format_map(record) if reply else s.target
            if s.script is not None:
                prompts, answer = _conversation_key(ds, s.script, answer)
                if not answer:
                    continue  # nothing to know (MT-Bench's turns have no reference)
            if ds.mode == "loglikelihood":  # the context is what the model is sent, system and all
                right = _right_choice(answer, s.choices)
                if right is None:
                    continue  # no choice is right (a gold out of range): the simulator knows nothing of it
                prompts, answer = prompts[-1:], right
            for prompt in prompts:
                if ds.mode == "gen":  # json.dumps({"prompt": …, "answer": …}), without making a dict and an encoder for each of 30,000
                    out.write(f'{{"prompt": {_json_string(prompt)}, "answer": {_json_string(answer)}}}\n')
                else:
                    out.write(json.dumps({"prompt": prompt, "answer": answer, "choices": list(s.choices)}) + "\n")
                count += 1
    return count


def _conversation_key(ds: DatasetConfig, script: Script, target: str) -> tuple[list[str], str]:
    """What the simulator must know of a conversation: its first question as a chat model gets
    it (the last user message) and as a completions model does (the whole text), and the right
    reply — to a multiple choice, "ANSWER: X" with X the right option's letter as shown (shuffled)."""
    opening = script.request(0, ()).conversation
    prompts = list(dict.fromkeys([opening.question, as_text(opening, ds.system_join)]))
    letter = target.strip()
    if ds.steps and "multiple_choice" in ds.steps and len(letter) == 1 and letter.isalpha():
        right = answer_index(letter)
        shown = script.order.index(right) if script.order and right < len(script.order) else right
        return prompts, f"ANSWER: {answer_character(shown)}"
    return prompts, target


def _right_choice(target: str, choices: tuple[str, ...]) -> str | None:
    """A loglikelihood dataset's right continuation: the choice a numeric target indexes, or the
    choice the target is."""
    text = target.strip()
    if text.isdigit():
        return choices[int(text)] if int(text) < len(choices) else None
    return next((c for c in choices if target in (c, c.lstrip())), None)


def _reply_template(ds: DatasetConfig) -> str:
    """A benchmark's right reply, in the form its reference's scorer reads (`The answer is 18.`),
    while the dataset keeps the entry's target; "" for the target itself."""
    if not ds.benchmark:
        return ""
    from evaltui.benchmarks.catalog import lookup
    from evaltui.benchmarks.fill import entry_fields

    return lookup(ds.benchmark).reply if ds.target == entry_fields(ds.benchmark)["target"] else ""


class SimulatorProcess:
    """`python -m evaltui.sim` for the plan's sim:// models; `base_url` once started."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        """Start the child and return its base URL (SimulatorError if it does not come up).

        Call it from the thread that lives as long as the run: the child asks Linux to end it
        when its creator goes (`--parent-pid`). It gets its own session so a terminal's Ctrl-C
        reaches evaltui, which stops it in order, and not the simulator mid-start.
        """
        cmd = [sys.executable, "-m", "evaltui.sim", "--host", "127.0.0.1", "--port", "0", "--answer-key", "-", "--parent-pid", str(os.getpid())]
        for m in self.plan.models:
            if m.is_sim:
                opts = sim_options(m.urls[0])
                spec = ",".join(f"{k}={v:g}" for k, v in opts.items())
                cmd += ["--model", f"{m.abbr}:{spec}" if spec else m.abbr]
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_KEY", "_TOKEN", "_SECRET"))}
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True, env=env,
            start_new_session=True, bufsize=KEY_BUFFER,
        )
        assert self._proc.stdin is not None
        # The answer key goes through the pipe: no file holds the plan's references. A broken
        # pipe means it died early; its stderr says why, below.
        with contextlib.suppress(BrokenPipeError):
            write_answer_key(self.plan, self._proc.stdin)
        with contextlib.suppress(BrokenPipeError):
            self._proc.stdin.close()
        line = self._first_line()
        prefix = "listening on "
        if prefix not in line:
            err = self._stderr_tail()
            self.stop()
            raise SimulatorError(f"the simulator did not start: {line.strip() or err or 'no output'}")
        self.base_url = line.split(prefix, 1)[1].strip().rstrip("/")
        # Drain its pipes so a chatty simulator can never block on a full pipe.
        for stream in (self._proc.stdout, self._proc.stderr):
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
        return self.base_url

    def _first_line(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self._proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(START_TIMEOUT)
        return box[0] if box else ""

    def _stderr_tail(self) -> str:
        if self._proc is None or self._proc.stderr is None or self._proc.poll() is None:
            return ""
        return " ".join(self._proc.stderr.read().split()[-40:])

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self._proc = None


def _drain(stream: IO[str]) -> None:
    with contextlib.suppress(OSError, ValueError):  # closed when the simulator stops
        for _ in stream:
            continue
