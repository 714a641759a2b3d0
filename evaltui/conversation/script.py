"""A sample's conversation before it is sent: the requests it will make, each built from the
answers before it.

The first request is the `opening` (a system message, few-shot turns, the question). What
follows it is a list of user turns (a dataset's `turns`) or of self-critiques: a user turn is
sent with the whole conversation so far and the model's answer to the turn before; a critique
is two requests, the critique alone (Inspect's: the question and the answer) and the revision,
the conversation so far with the critique template as the next user message. Each request
depends only on the record and the answers before it, so a conversation cut short (a kill, a
failed turn) goes on from its last answer: `request(k, answers)` rebuilds the k-th.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaltui.conversation.model import Conversation, Kind, Message, assistant, user
from evaltui.conversation.solvers import critique_prompt, revision_prompt, unshuffled

#: A follow-up that is a self-critique (its critique and revision), where a user turn is its text.
CRITIQUE = None


@dataclass(frozen=True, slots=True)
class Request:
    kind: Kind
    conversation: Conversation

    @property
    def prompt(self) -> str:
        """The user message this request adds (a critique's whole request)."""
        return self.conversation.question


@dataclass(frozen=True, slots=True)
class Script:
    opening: tuple[Message, ...]  # ends with the first question (a user message)
    follow: tuple[str | None, ...] = ()  # later user turns; CRITIQUE for a self-critique
    question: str = ""  # what self_critique's templates call the question (Inspect's input_text)
    tools: tuple[dict[str, Any], ...] = ()
    order: tuple[int, ...] = ()  # a shuffled multiple choice: the record's option shown at each place

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """The kind of each request, in order."""
        kinds: list[Kind] = ["turn"]
        for item in self.follow:
            kinds += ["turn"] if item is not CRITIQUE else ["critique", "revision"]
        return tuple(kinds)

    def __len__(self) -> int:
        return 1 + sum(1 if item is not CRITIQUE else 2 for item in self.follow)

    def request(self, k: int, answers: Sequence[str]) -> Request:
        """The k-th request (from 0), given the answers to the ones before it (`answers[:k]`)."""
        messages = list(self.opening)
        if k == 0:
            return Request("turn", Conversation(tuple(messages), self.tools))
        last, at = answers[0], 1  # the main conversation's latest answer; the next request's number
        for item in self.follow:
            if item is not CRITIQUE:
                messages += [assistant(last), user(item)]
                if at == k:
                    return Request("turn", Conversation(tuple(messages), self.tools))
            else:
                if at == k:
                    return Request("critique", Conversation((user(critique_prompt(self.question, last)),)))
                at += 1
                messages += [assistant(last), user(revision_prompt(self.question, last, answers[at - 1]))]
                if at == k:
                    return Request("revision", Conversation(tuple(messages), self.tools))
            last = answers[at]
            at += 1
        raise IndexError(f"request {k} of a conversation of {len(self)}")

    def log_messages(self, answers: Sequence[str], facts: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The conversation as the per-sample log keeps it: every message in order ({role,
        content}), each answer with what `facts` says of its request (usage, took, …) and the
        requests of a critique marked `"kind": "critique"` (a request of its own). A request that
        was not answered (the conversation failed there) ends it with its question alone."""
        out = [m.as_dict() for m in self.opening]
        for k, kind in enumerate(self.kinds):
            marked = {} if kind == "turn" else {"kind": kind}
            if k > 0:
                out.append({**self.request(k, answers).conversation.messages[-1].as_dict(), **marked})
            if k >= len(answers):
                break
            out.append({"role": "assistant", "content": answers[k], **marked, **(facts[k] if k < len(facts) else {})})
        return out

    def prediction(self, answers: Sequence[str]) -> str:
        """What evaluators score: the last answer (a shuffled multiple choice's, as the letter
        of the option in the record: solvers.unshuffled)."""
        last = answers[-1]
        return unshuffled(last, self.order) if self.order else last
