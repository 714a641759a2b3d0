"""Shared fixtures: the real simulated server on 127.0.0.1 and the shared datasets folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evaltui.engine.stream.pair import Failure
from evaltui.engine.stream.state import RunState
from evaltui.sim import SimConfig, SimThread

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"

requires_shared = pytest.mark.skipif(
    not SHARED_DATASETS.is_dir(), reason=f"the shared datasets folder {SHARED_DATASETS} is absent on this machine"
)


def failures_of(state: RunState, model: str, dataset: str) -> list[Failure]:
    """The failures a RunState keeps of one model×dataset, oldest first."""
    return [f for f in state.failures if f.model == model and f.dataset == dataset]


@pytest.fixture
def sim_factory() -> Iterator:
    """Start simulated servers (each on its own thread and loop); all stopped after the test."""
    started: list[SimThread] = []

    def start(config: SimConfig | None = None) -> SimThread:
        sim = SimThread(config or SimConfig()).start()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loopback traffic must never be sent to a proxy configured on the machine.
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")




@pytest.fixture(autouse=True)
def _private_config_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # The app remembers the chosen theme in the user's config dir: never the real one in tests.
    monkeypatch.setenv("EVALTUI_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
