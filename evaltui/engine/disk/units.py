"""A (sample, epoch) unit's key: `index * epochs + epoch` — the index itself for one epoch.

The work dir's line indexes (checkpoint.LineIndex), a resume's flags (run/runs.py's UnitFlags, a
byte per key), what is left to run (run/todo.py) and the details screen all key units this way:
a sample's epochs lie next to each other, so its units are one span of keys and N samples × K
epochs fit an array of N × K entries.
"""

from __future__ import annotations


def unit_key(index: int, epoch: int, epochs: int) -> int:
    """The key of epoch `epoch` of sample `index`, in a dataset run for `epochs` epochs."""
    return index * epochs + epoch


def unit_of(key: int, epochs: int) -> tuple[int, int]:
    """The (index, epoch) a key stands for."""
    return divmod(key, epochs)


def sample_keys(index: int, epochs: int) -> range:
    """The keys of every epoch of sample `index`, in epoch order."""
    return range(index * epochs, (index + 1) * epochs)


def samples_keys(indices: range, epochs: int) -> range:
    """The keys of every epoch of the consecutive samples `indices` (a shard's range)."""
    return range(indices.start * epochs, indices.stop * epochs)
