"""The headless core: a run from plan to leaderboard (runner), its typed event stream and the state folded from it."""
