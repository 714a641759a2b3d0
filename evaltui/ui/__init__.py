"""The Textual session (`evaltui PLAN.toml` on a terminal): the only package that imports textual."""
