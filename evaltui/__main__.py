from evaltui.cli import entry

entry()
