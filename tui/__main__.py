"""``python -m tui``: the same as the ``tfdist-tui`` console script."""

from tui.cli import main

raise SystemExit(main())
