"""The event bus: every event the engine reports goes through it to each consumer.

It folds each event into its RunState before handing it on, so the state is always what the
consumers have been told, and a consumer that subscribes late (the app, once the run began) is
first sent the events that rebuild that state (RunState.replay), then the live stream, with
nothing lost or doubled between. One lock orders it all: consumers may subscribe from another
thread, and readers of the state hold it while the engine's thread adds pairs. A consumer that
raises is said once (a Notice) and otherwise ignored: a broken consumer never stops the run.
"""

from __future__ import annotations

import threading

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.state import RunState


class EventBus:
    def __init__(self, state: RunState, sink: ev.Sink | None = None):
        self.state = state
        self.lock = threading.RLock()
        self._sinks: tuple[ev.Sink, ...] = (sink,) if sink else ()  # replaced, never mutated: emit iterates it
        self._failed_sinks: set[int] = set()  # ids of sinks whose failure was reported

    def subscribe(self, sink: ev.Sink, *, replay: bool = True) -> None:
        """Add a consumer of the event stream, at any time and from any thread; `replay=False`
        for one that only follows what happens from now on (the run log)."""
        with self.lock:
            if replay:
                for event in self.state.replay():
                    self._deliver(sink, event)
            self._sinks = (*self._sinks, sink)

    def unsubscribe(self, sink: ev.Sink) -> None:
        with self.lock:
            self._sinks = tuple(s for s in self._sinks if s is not sink)

    def emit(self, event: ev.Event) -> None:
        with self.lock:
            self.state.apply(event)
            for sink in self._sinks:  # (_deliver's try written out: this runs for every event and sink)
                try:
                    sink(event)
                except Exception as e:
                    self._failed(sink, event, e)

    def _deliver(self, sink: ev.Sink, event: ev.Event) -> None:
        try:
            sink(event)
        except Exception as e:
            self._failed(sink, event, e)

    def _failed(self, sink: ev.Sink, event: ev.Event, e: Exception) -> None:
        """A broken consumer must not stop the evaluation: said once, not once per event."""
        if id(sink) not in self._failed_sinks:
            self._failed_sinks.add(id(sink))
            self.emit(ev.Notice(f"an event consumer failed on {type(event).__name__}: {type(e).__name__}: {e}", "error"))
