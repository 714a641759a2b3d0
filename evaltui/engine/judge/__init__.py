"""Judge models at work: the verdicts a judged dataset needs, asked for and kept."""
