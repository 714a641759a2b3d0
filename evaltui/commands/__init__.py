"""Commands that read work dirs instead of running a plan: `evaltui show` (and its export) and
`evaltui compare`. Headless, read-only, each in a module of its own; cli.py hands them argv."""

from __future__ import annotations

from collections.abc import Callable


def run_command(name: str, argv: list[str]) -> int:
    """`evaltui <name> …`: the command's exit code (0, or 2 for a command line or work dir it cannot use)."""
    main: Callable[[list[str]], int]
    if name == "show":
        from evaltui.commands.show import main
    else:
        from evaltui.commands.compare import main
    return main(argv)
