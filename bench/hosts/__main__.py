"""``python -m bench.hosts``: see :mod:`bench.hosts.start`."""

from __future__ import annotations

import sys

from bench.hosts.start import main

if __name__ == "__main__":
    sys.exit(main())
