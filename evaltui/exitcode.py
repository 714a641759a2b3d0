"""The exit codes (SPEC §2), one IntEnum for every command: the run, `watch`, `show`, `compare`, `serve-sim`.

An IntEnum, so a code is still the integer a shell sees (`sys.exit(ExitCode.USAGE)` exits 2)
and compares equal to it; the names say what each means where it is returned.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # every model×dataset (the command's work) was done: all scored, all shown
    FAILED = 1  # it ran, but not all is done: a model×dataset failed or was not scored (or was left before the end)
    USAGE = 2  # the plan, the command line or the work dir cannot be used: one line on stderr, no traceback
    INTERRUPTED = 130  # Ctrl-C, SIGTERM, SIGHUP: finished work is kept, a re-run resumes

    def __str__(self) -> str:  # an f-string prints the number, as for a plain int (3.10 printed its name)
        return str(self.value)
