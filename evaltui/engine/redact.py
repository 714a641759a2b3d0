"""The secrets of one model a run must keep out of everything it writes or prints (masked by
`evaltui.redaction.redact`: whole or any 8 characters of them, in any form they are echoed in)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping

from evaltui.plan import ModelConfig
from evaltui.redaction import redact

__all__ = ["model_secrets", "redact", "undumpable"]


def model_secrets(model: ModelConfig, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The model's key and the credentials in its custom headers (`x-api-key`), as sent."""
    env = os.environ if env is None else env
    key = env.get(model.api_key_env) if model.api_key_env else None
    return tuple(s for s in ([key] if key else []) + list(model.secret_header_values()) if s)


def undumpable() -> None:
    """Make this process's /proc files (environ, memory) unreadable to other processes of the same user.

    Model-written code that code_exec runs gets a bare environment, but any process of the same
    user can read another's environment (API keys included) from /proc — unless that process is
    not dumpable, whose /proc files then belong to root. Called by the command line for a plan
    with code_exec (not by the engine a test or an app may embed), and by every Ray actor, which
    holds a model's key (a side effect: attaching a debugger needs root)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # no prctl: nothing to hide behind
        ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE
