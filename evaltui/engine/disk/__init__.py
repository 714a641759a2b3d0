"""The work dir's files: paths, lock, guard, status, checkpoints, logs, records read back, version fingerprints."""
