"""The follower (`evaltui watch`): a work dir another process writes, read into the same events."""
