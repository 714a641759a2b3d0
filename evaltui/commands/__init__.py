"""Commands that read instead of running a plan: `evaltui show` (and its export), `evaltui
compare` and `evaltui report` over work dirs, `evaltui benchmarks` over the catalog. Headless,
read-only, each in a module of its own; cli.py hands them argv."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from evaltui.exitcode import ExitCode


def run_command(name: str, argv: list[str]) -> int:
    """`evaltui <name> …`: the command's exit code (0, or 2 for a command line or work dir it
    cannot use). A reader that stops reading (`evaltui show … | head`) ends it quietly."""
    main: Callable[[list[str]], int]
    if name == "show":
        from evaltui.commands.show import main
    elif name == "benchmarks":
        from evaltui.commands.benchmarks import main
    elif name == "report":
        from evaltui.commands.report.command import main
    else:
        from evaltui.commands.compare import main
    from evaltui.fsutil import Unreadable

    try:
        return main(argv)
    except Unreadable as e:  # a file of the work dir that is no file of its kind (a FIFO, /dev/zero, a folder, huge)
        print(f"evaltui {name}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # What is still buffered would raise again as Python flushes standard output on the
        # way out ("Exception ignored … BrokenPipeError"): it goes to /dev/null instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return ExitCode.OK
