"""A conversation as one text, for the protocols that take one (OpenAI completions, LightLLM's
/generate): what a base model is sent where a chat model gets messages.

    one question        system + system_join + question            (or the question alone)
    anything longer     system + system_join, then each message as
                        "User: …\\n\\n" or "Assistant: …\\n\\n", then "Assistant:"

A conversation of one question is sent byte for byte as a `prompt` dataset's request always was,
so a plan that moves to `messages` keeps its requests. A longer one (few-shot turns, a second
turn, a revision) is a transcript with its speakers named, ending where the model's answer
starts: without the names a base model cannot tell its earlier answers from the questions.
Nothing stops it writing the next "User:" turn itself: a dataset's `stop = ["\\nUser:"]`
ends its reply there.
"""

from __future__ import annotations

import re

from evaltui.conversation.model import Conversation

USER, ASSISTANT = "User: ", "Assistant: "
CUE = "Assistant:"
_LABELS = {"user": USER, "assistant": ASSISTANT}


def as_text(conversation: Conversation, join: str = "\n\n") -> str:
    """The one text a completions request carries for `conversation` (see the module's docstring)."""
    messages = conversation.messages
    system = conversation.system
    rest = messages[1:] if messages and messages[0].role == "system" else messages
    head = f"{system}{join}" if system else ""
    if len(rest) == 1 and rest[0].role == "user":
        return head + rest[0].content
    return head + "".join(f"{_LABELS[m.role]}{m.content}\n\n" for m in rest) + CUE


_SPEAKER = re.compile(r"(?:^|\n\n)(User|Assistant): ")


def user_texts(text: str) -> list[str]:
    """The user messages of a transcript `as_text` wrote (the simulator reads a completions
    request so); [] for a text that is not one. A message holding "\\n\\nUser: " itself is
    split there: good enough for a stand-in server."""
    if not text.endswith(CUE):
        return []
    body = text[: -len(CUE)]
    marks = list(_SPEAKER.finditer(body))
    out = []
    for i, m in enumerate(marks):
        if m.group(1) == "User":
            end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
            out.append(body[m.end() : end].removesuffix("\n\n"))
    return out
