"""Conversations: what a request of several messages is, how it is sent, and what is kept of it.

    model     Message, Conversation (one request's messages and tools), Turn (a request and its
              answer, as predictions keep it) and turns_of (every turn of an entry read back)
    script    Script: a sample's requests, each built from the record and the answers before it
    text      a conversation as one text, for completions and LightLLM's /generate
    solvers   Inspect AI's multiple_choice, chain_of_thought and self_critique templates
    tools     a reply's tool calls as its answer, and two lists of them compared

Below the templates and the backends (both speak it), above nothing of evaltui's but fastjson.
"""

from evaltui.conversation.model import KINDS, ROLES, Conversation, Kind, Message, Role, Turn, answers, assistant, turn_messages, turns_of, user
from evaltui.conversation.script import CRITIQUE, Request, Script
from evaltui.conversation.text import as_text

__all__ = [
    "CRITIQUE", "KINDS", "ROLES", "Conversation", "Kind", "Message", "Request", "Role", "Script", "Turn", "answers", "as_text", "assistant",
    "turn_messages", "turns_of", "user",
]
