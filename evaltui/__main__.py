from evaltui.cli import main

raise SystemExit(main())
