"""`sim://` model URLs: the options a plan may give the bundled simulator, checked.

Beside the simulator (which the engine starts with these options) and below the plan (which
checks them), so both read one definition.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

SIM_OPTIONS = {"accuracy": (0.0, 1.0), "latency": (0.0, 600.0), "jitter": (0.0, 600.0), "token_latency": (0.0, 60.0)}


def sim_options(url: str) -> dict[str, float]:
    """Options of a `sim://?accuracy=0.9&latency=0.05` URL, checked."""
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.fragment:
        raise ValueError(f"a simulated model URL looks like 'sim://?accuracy=0.9&latency=0.05' (got {url!r})")
    out: dict[str, float] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in SIM_OPTIONS:
            raise ValueError(f"unknown sim:// option {key!r} (known: {', '.join(SIM_OPTIONS)})")
        try:
            val = float(value)
        except ValueError:
            raise ValueError(f"sim:// option {key} must be a number (got {value!r})") from None
        lo, hi = SIM_OPTIONS[key]
        if not lo <= val <= hi:
            raise ValueError(f"sim:// option {key} must be between {lo:g} and {hi:g} (got {value})")
        out[key] = val
    return out
