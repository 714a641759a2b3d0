"""`executor = "ray"`: a model's units answered by Ray actors, code_exec as Ray tasks (imported only on that path)."""
