"""The command lines' parser: a refusal is one line on stderr and exit 2.

README promises one line for every refusal; argparse's own prints its usage first (`--help`
still has it). Low in the package, so the plan command line, `watch`, `show`, `compare` and
`serve-sim` share it without importing each other.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from evaltui.exitcode import ExitCode


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{self.prog}: {message}\n")
