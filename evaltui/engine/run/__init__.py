"""One run driven: runner, sessions, each model's worker pool, what is left to run, how shards end, the scorer."""
