"""A conversation as evaltui sends it, and each of its requests as predictions keep it.

One home for the words every part speaks: the templates fill a `Conversation` from a record
(templates.py), the backends send it — a chat request's `messages` (and `tools`), or one text
for a completions server (conversation/text.py) — the engine checkpoints each request's
`Turn`, and an evaluator that scores turn by turn (MT-Bench's judge) reads them back with
`turns_of`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant")

#: What a request of a conversation is: a user turn (the first question or one after it),
#: self_critique's critique (a request of its own: the question and the answer to critique),
#: or its revision (the conversation so far, asked to improve the answer).
Kind = Literal["turn", "critique", "revision"]
KINDS: tuple[Kind, ...] = ("turn", "critique", "revision")


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        """The message as a chat request carries it."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class Conversation:
    """The messages of one request, in order (a system message first, if any; a user message
    last: the one the model answers), and the tools it offers (OpenAI's function definitions,
    as a record holds them; none: no `tools` key is sent)."""

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()

    def chat_messages(self) -> list[dict[str, str]]:
        return [m.as_dict() for m in self.messages]

    @property
    def system(self) -> str:
        """The system message's text ("" when there is none)."""
        first = self.messages[0] if self.messages else None
        return first.content if first is not None and first.role == "system" else ""

    @property
    def question(self) -> str:
        """The last user message: what this request asks."""
        return next((m.content for m in reversed(self.messages) if m.role == "user"), "")


def user(text: str) -> Message:
    return Message("user", text)


def assistant(text: str) -> Message:
    return Message("assistant", text)


@dataclass(frozen=True, slots=True)
class Turn:
    """One request of a conversation with its answer, as a predictions entry keeps it under
    `turns`: its kind, the user message it added (for a critique, the whole request) and the
    model's reply (as sent back: a shuffled multiple choice's letters are the ones it saw)."""

    kind: Kind
    prompt: str
    answer: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "prompt": self.prompt, "answer": self.answer}

    @classmethod
    def from_dict(cls, data: Any) -> Turn | None:
        """A turn read back from a file; None for anything else."""
        if not isinstance(data, dict):
            return None
        kind, prompt, answer = data.get("kind", "turn"), data.get("prompt"), data.get("answer")
        if kind not in KINDS or not isinstance(prompt, str) or not isinstance(answer, str):
            return None
        return cls(kind, prompt, answer)


def turns_of(entry: dict[str, Any], epoch: int = 0) -> list[Turn]:
    """Every request of one (sample, epoch)'s conversation with its answer, in order, from a
    predictions entry (or a checkpoint line): [] for a sample that is not a conversation, or an
    epoch without one. The user turns alone are `[t for t in turns_of(e) if t.kind == "turn"]`;
    the answer evaluators score (the last one, mapped back for a shuffled multiple choice) is
    the entry's `prediction`."""
    by_epoch = entry.get("epoch_turns")
    raw: Any = entry.get("turns") if epoch == 0 else None
    if isinstance(by_epoch, list):
        raw = by_epoch[epoch] if 0 <= epoch < len(by_epoch) else None
    if not isinstance(raw, list):
        return []
    turns = [Turn.from_dict(t) for t in raw]
    return [t for t in turns if t is not None]


def turn_messages(turns: Sequence[Turn]) -> list[dict[str, str]]:
    """A conversation's requests as messages, each user message then its answer (a critique's
    and a revision's marked with their kind): what a record shows of a conversation whose log
    line is missing (its checkpoint line keeps the turns, not the opening before the first)."""
    out: list[dict[str, str]] = []
    for t in turns:
        marked = {} if t.kind == "turn" else {"kind": t.kind}
        out += [{"role": "user", "content": t.prompt, **marked}, {"role": "assistant", "content": t.answer, **marked}]
    return out


def answers(turns: Sequence[Turn]) -> list[str]:
    return [t.answer for t in turns]
