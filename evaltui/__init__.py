"""evaltui: evaluate LLMs served over HTTP, live in the terminal."""

__version__ = "0.1.0"
