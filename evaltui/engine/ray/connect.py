"""Connecting this process to Ray for `executor = "ray"`, with a bounded wait and a one-line reason when it cannot.

Ray is an optional extra (`pip install 'evaltui[ray]'`): only the Ray path imports it, and
this module imports it only inside `connect`, so the command line can say in one line that it
is missing. The address is `--ray-address`, else `RAY_ADDRESS`, else none: Ray then starts an
instance on this machine for the run (what `ray.init()` does), which ends with it.

`ray.init` waits minutes for a cluster that does not answer, so the address is tried first
with a plain TCP connection (a refused or unreachable one fails within CONNECT_TIMEOUT), and
`ray.init` itself runs in a thread that is waited for at most JOIN_TIMEOUT. Starting an
instance here is not bounded that way: the processes Ray starts die with the thread that
started them (Linux's parent-death signal is a thread's), so that is done by the caller's own
thread, which must outlive the run.
"""

from __future__ import annotations

import http.client
import logging
import os
import socket
import threading
from collections.abc import Iterable
from typing import Any

CONNECT_TIMEOUT = 5.0  # s for the TCP connection to the cluster's address
JOIN_TIMEOUT = 60.0  # s for ray.init to join a cluster that accepted the connection (or start one here)
DEFAULT_PORTS = {"ray://": 10001, "": 6379}  # Ray Client's port, the GCS's


class RayUnavailable(Exception):
    """Ray cannot be used: not installed, or no cluster answered. The message is one line."""


def address_from(option: str | None) -> str | None:
    """The cluster to join: `--ray-address`, else RAY_ADDRESS, else None (a Ray instance of this run's own)."""
    return option or os.environ.get("RAY_ADDRESS") or None


def require_ray() -> Any:
    """The `ray` module, or RayUnavailable saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(f"Ray is not installed ({e}); install it with: pip install 'evaltui[ray]' (or pip install 'ray>=2.10')") from None
    return ray


def connect(address: str | None, *, join_timeout: float = JOIN_TIMEOUT, hide: Iterable[str] = ()) -> None:
    """Join the cluster at `address` (None: start one here, from this thread), unless this
    process already has; RayUnavailable when Ray is missing or no cluster answered in time.

    `hide`: environment variables (the plan's API keys) kept out of the processes a Ray instance
    started here runs — its GCS, raylet and workers inherit this process's environment, and unlike
    the actors they are dumpable: code_exec's programs on this machine could read them in /proc.
    The actors are handed the key by the driver instead (model.py)."""
    ray = require_ray()
    if ray.is_initialized():
        return
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            # Quiet: Ray's INFO and WARNING lines (its banner, token authentication) and its workers'
            # output are not this run's (they stay in Ray's logs, on each node); the run's own
            # Notices say what became of its actors.
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False if address is None else None)
            outcome.append(None)
        except Exception as e:  # whatever it was, it is the reason given
            outcome.append(e)

    if address is None:
        hidden = {name: os.environ.pop(name) for name in set(hide) if name in os.environ}
        try:
            join()  # starts Ray's processes: in this thread, which outlives the run
        finally:
            os.environ.update(hidden)
    else:
        if address not in ("auto", "local"):
            _reachable(address)
        thread = threading.Thread(target=join, name="evaltui-ray-connect", daemon=True)
        thread.start()
        thread.join(join_timeout)
    where = f"at {address}" if address else "on this machine"
    if not outcome:
        raise RayUnavailable(f"no Ray cluster answered {where} within {join_timeout:g} s (is it a Ray head node's address, e.g. HOST:6379?)")
    error = outcome[0]
    if error is None:
        _quiet(ray)
        return
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    hint = ""
    if address is not None and os.environ.get("RAY_AUTH_MODE") is None:
        hint = " (a cluster with token authentication needs RAY_AUTH_MODE=token here, and its token: ~/.ray/auth_token or RAY_AUTH_TOKEN)"
    raise RayUnavailable(f"cannot join the Ray cluster {where}: {first}{hint}")


def _quiet(ray: Any) -> None:
    """Keep the cluster's error messages off this process's stdout.

    A Ray driver prints what the cluster reports (a worker that died, …) on stdout, which is the
    run's own (`--json`, the interactive screen). They stay in Ray's logs on each node, and the
    run says what became of its actors in its own words. Ray's private hook: should it move, its
    messages are printed again, nothing worse."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    if worker is not None and callable(getattr(worker, "print_to_stdstream", None)):
        worker.print_to_stdstream = lambda data, ignore_prefix: None


def disconnect() -> None:
    """Leave the cluster (and stop the instance `connect` started here, if it did); idempotent."""
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()


def _reachable(address: str) -> None:
    """RayUnavailable unless something accepts a TCP connection at the address's host and port."""
    scheme = "ray://" if address.startswith("ray://") else ""
    rest = address[len(scheme) :].split("/", 1)[0]
    host, sep, port_text = rest.rpartition(":")
    if not sep:
        host, port_text = rest, str(DEFAULT_PORTS[scheme])
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise RayUnavailable(f"the Ray address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379, or ray://10.0.0.5:10001)") from None
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else e.strerror or str(e)
        raise RayUnavailable(f"no Ray cluster answers at {address}: {why} (start one with `ray start --head`, or check --ray-address / RAY_ADDRESS)") from None
    status = _http_status(host, port)
    if status is not None:
        raise RayUnavailable(
            f"{address} answers HTTP ({status}), not as a Ray cluster does (Ray's dashboard, :8265, or a model server?): "
            "give the head node's address, HOST:6379 (ray:// HOST:10001 for Ray Client)"
        )


def _http_status(host: str, port: int) -> int | None:
    """The status an HTTP/1 server answers a GET with; None for anything else. A Ray GCS (or
    Ray Client) speaks gRPC, HTTP/2 only: it answers with frames http.client cannot read, and
    ray.init would wait JOIN_TIMEOUT for a web server while Ray's native log lines reach stderr."""
    connection = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()
