"""`python -m evaltui.sim`: the simulator without the rest of the evaltui CLI."""

from evaltui.sim.cli import main

raise SystemExit(main())
