"""A (sample, epoch) unit's key, as every index of the engine keys units (engine/disk/units.py)."""

from __future__ import annotations

from evaltui.engine.disk.units import sample_keys, samples_keys, unit_key, unit_of


def test_a_samples_epochs_are_one_span_of_keys_and_each_key_reads_back() -> None:
    assert [unit_key(3, e, 4) for e in range(4)] == list(sample_keys(3, 4)) == [12, 13, 14, 15]
    assert all(unit_of(unit_key(i, e, 4), 4) == (i, e) for i in range(5) for e in range(4))
    assert unit_key(7, 0, 1) == 7  # one epoch: the key is the index, as checkpoints always had it
    assert samples_keys(range(2, 5), 3) == range(6, 15)
