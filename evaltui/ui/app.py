"""The interactive session: watch a run, retry what failed, read the leaderboard.

The app is the session around the run's screen (screens/run.py, which folds the events and
repaints the panes): the themes, the engine on its own thread (see engine_thread.py), quitting,
and the exit code. Commands go to the engine as portal calls (run, retry, cancel); the app never
calls into the engine per event, and the engine never waits on the app.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.screen import Screen

from evaltui.engine.stream.source import RunSource
from evaltui.exitcode import ExitCode
from evaltui.ui import keys
from evaltui.ui.engine_thread import EngineThread
from evaltui.ui.palette import KeyCommands
from evaltui.ui.screens.modals import ConfirmQuit, HelpScreen
from evaltui.ui.screens.run import RunScreen
from evaltui.ui.themes import BAR_EMPTY, DEFAULT_THEME, ThemeSet, load_themes, remember_theme, remembered_theme
from evaltui.ui.toast import toast

TICK = 0.2  # seconds between repaints of counters and bars: smooth, and cheap for the engine


class EvalApp(App[int]):
    CSS_PATH = ["app.tcss", "look.tcss"]
    COMMANDS = App.COMMANDS | {KeyCommands}
    # the run screen as the base screen of a mode: unlike get_default_screen's, it is mounted with
    # its panes before the app's on_mount, so the first tick (or a test's) finds them ready
    DEFAULT_MODE = "run"
    # the keys that mean the same on every screen; those about a model×dataset are the run screen's
    BINDINGS: ClassVar[list[BindingType]] = keys.bindings(keys.APP)

    def __init__(
        self,
        runner: RunSource,
        *,
        theme: str | None = None,
        themes: ThemeSet | None = None,
        start: bool = True,
        exit_when_done: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        """`runner` is the run's source: a Runner, or the Follower of `evaltui watch` (it keeps the
        name it has always had here). `start=False` leaves the engine idle (tests feed `sink` a
        scripted stream); `exit_when_done` ends the session when the run ends (benchmarks)."""
        super().__init__()
        self.runner = runner
        self.engine = EngineThread(runner)
        self.run_screen = RunScreen(runner, self.engine, clock=clock, wall_clock=wall_clock)
        self.add_mode(self.DEFAULT_MODE, lambda: self.run_screen)
        self._start = start
        self._exit_when_done = exit_when_done
        self._quitting = False
        self._jobs_at_finish = 0  # engine jobs asked for when the last RunFinished came in
        self._reported: set[int] = set()
        self.exit_code: int = ExitCode.FAILED
        self.themes = themes if themes is not None else load_themes()
        for t in self.themes.themes.values():
            self.register_theme(t)
        self._asked_theme = theme
        self.theme = self._pick_theme(theme)
        self.title = self._title(runner.title)
        runner.subscribe(self.run_screen.sink)

    def _title(self, title: str) -> str:
        """The plan's title; watching, after a short mark of it (at 80 columns every one counts)."""
        return ("watch · " if self.runner.watching else "") + (title or "evaltui")

    # ------------------------------------------------------------------ set-up
    def _pick_theme(self, asked: str | None) -> str:
        for name in (asked, remembered_theme(), DEFAULT_THEME):
            if name and name in self.available_themes:
                return name
        return "textual-dark"  # every theme file broken: Textual's own keeps the app usable

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {BAR_EMPTY: "$panel-lighten-2"}

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Of Textual's own, only its theme picker (every theme): its Quit is ours (which says
        what quitting keeps), its Keys panel our help, and Maximize and Screenshot are not this
        session's."""
        return (c for c in super().get_system_commands(screen) if c.title == "Theme")

    def on_mount(self) -> None:
        self.animation_level = "none"  # nothing here needs motion; it only costs repaints over SSH
        said = []
        if self._asked_theme and self._asked_theme != self.theme:
            said.append(f"no usable theme {self._asked_theme!r}: using {self.theme}")
        problems = self.themes.problems
        if problems:
            said.append(f"theme file skipped: {problems[0]}" if len(problems) == 1 else f"{len(problems)} theme files skipped: {'; '.join(problems)}")
        if said:
            toast(self, "; ".join(said), severity="warning", timeout=10)
        if self._asked_theme and self._asked_theme == self.theme:
            self._remember_theme()  # asked for by name (--theme) and used: the next session opens with it
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.set_interval(TICK, self.fold_pending)
        if self._start:
            self.engine.run()

    def on_unmount(self) -> None:
        self.engine.close()  # however the app ends, the engine stops and keeps its work

    def _theme_changed(self, theme: object) -> None:
        """After Textual restyled every widget for the new theme (it publishes the signal then)."""
        self._remember_theme()
        self.run_screen.restyle()

    def _remember_theme(self) -> None:
        """Save the theme in use unless it is already the remembered one (back to it with `t` too)."""
        if self.theme != remembered_theme():
            problem = remember_theme(self.theme)
            if problem:
                toast(self, problem, severity="warning")

    # ------------------------------------------------------------------ the tick
    def fold_pending(self, all_rows: bool = False) -> None:
        """Repaint the run screen from what the engine reported, take the results of the jobs
        that ended, and leave once quitting (or `exit_when_done`) and nothing runs any more."""
        if not self.screen_stack:  # closing: the screens are gone before the tick's timer is
            return
        changes = self.run_screen.fold_pending(all_rows=all_rows)
        title = self.run_screen.state.title
        if self.runner.watching and title and self._title(title) != self.title:  # a run began in the watched dir: its plan's
            self.title = self._title(title)
            self.run_screen.show_title(self.title)
        if changes.live is False:
            self._jobs_at_finish = len(self.engine.jobs)
        if self._jobs_ended() or changes.statuses:
            self.run_screen.refresh_keys()
        if (self._quitting or self._exit_when_done) and self._start and not self.engine.busy and self.engine.jobs:
            self.exit(self.exit_code)
        # The run ended while the quit question was open: `q` now leaves at once. Only once every
        # job is over, not at RunFinished: a retry asked for as the run wound down is a job whose
        # session has not begun yet, and the question is there to protect it.
        if isinstance(self.screen, ConfirmQuit) and self.engine.jobs and not self.engine.busy:
            self.screen.moot()

    def _jobs_ended(self) -> bool:
        """Take the result of each run/retry that ended since the last tick."""
        ended = False
        for job in self.engine.jobs:
            if not job.done() or id(job) in self._reported:
                continue
            self._reported.add(id(job))
            ended = True
            self._take_result(job, retry=self.run_screen.job_ended(job))
        return ended

    def _take_result(self, job: Future[int], *, retry: bool) -> None:
        error = job.exception()
        if error is not None:
            title = "retry refused" if retry else "the run stopped"
            toast(self, f"{title}: {error}", severity="error", timeout=15)
            return
        self.exit_code = ExitCode.INTERRUPTED if self._quitting else job.result()

    # ------------------------------------------------------------------ actions
    def action_next_theme(self) -> None:
        names = self.themes.cycle()
        if not names:
            toast(self, "no theme files were found", severity="warning")
            return
        at = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(at + 1) % len(names)]
        toast(self, f"theme: {self.theme}", timeout=2)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def _work_over(self) -> bool:
        """Nothing left to interrupt: nothing runs, or the last run (or retry) reported its end —
        its job's future completes a moment after RunFinished, while it lets go of the work dir —
        and no retry was asked for since. Watching, there is never any: the run is another's."""
        if self.runner.watching:
            return True
        self.fold_pending()
        return self._nothing_to_interrupt()

    def _nothing_to_interrupt(self) -> bool:
        """_work_over's answer from what the last tick folded."""
        ended = self.run_screen.state.finished is not None and not self.run_screen.state.live and len(self.engine.jobs) == self._jobs_at_finish
        return not self.engine.busy or ended

    def _leave(self) -> None:
        finished = self.run_screen.state.finished
        if finished is not None and not self.run_screen.state.live:
            self.exit_code = finished.exit_code
        self.exit(self.exit_code)

    async def action_quit(self) -> None:
        if self._quitting:
            # a second q (or ctrl+q) while stopping: leave now; what finished is already on disk
            self.exit_code = ExitCode.INTERRUPTED
            self.exit(ExitCode.INTERRUPTED)
            return
        if isinstance(self.screen, ConfirmQuit):
            self.screen.action_answer(True)  # asked twice while the question is open (ctrl+q): the answer is yes
            return
        if self._work_over():
            self._leave()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._quit_now()

        self.push_screen(ConfirmQuit(), answered)

    def _quit_now(self) -> None:
        """Cancel the engine; the tick leaves once the run has put its finished work away."""
        if self._work_over():  # it ended while the question was open: nothing was interrupted
            self._leave()
            return
        self._quitting = True
        self.exit_code = ExitCode.INTERRUPTED
        toast(self, "stopping: finished samples are kept…", timeout=30)
        self.engine.cancel()

