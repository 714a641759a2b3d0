"""Every entry of `evaltui benchmarks`, by name, and the one-line refusal of a name that is none."""

from __future__ import annotations

import difflib

from evaltui.benchmarks.entries import bbh, choice, code, gsm8k, ifeval, minerva, mmlu, opencompass
from evaltui.benchmarks.entry import Entry

ENTRIES: dict[str, Entry] = {e.name: e for family in (gsm8k, mmlu, bbh, choice, ifeval, minerva, code, opencompass) for e in family.ENTRIES}


def lookup(name: str) -> Entry:
    """The entry named `name`; ValueError saying which names are close (and where the list is)."""
    entry = ENTRIES.get(name)
    if entry is not None:
        return entry
    lowered = {n.lower(): n for n in ENTRIES}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=4, cutoff=0.5)
    close += [lowered[n] for n in lowered if name.lower() and name.lower() in n and n not in close]
    names = list(dict.fromkeys(lowered.get(n, n) for n in close))[:5]
    hint = f"close names: {', '.join(names)}" if names else f"known: {', '.join(sorted(ENTRIES))}"
    raise ValueError(f"unknown benchmark {name!r} ({hint}; `evaltui benchmarks` lists them all)")
