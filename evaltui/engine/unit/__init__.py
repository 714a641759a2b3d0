"""One (sample, epoch) unit answered: its tries against a backend and the checkpoint entry they end in."""
