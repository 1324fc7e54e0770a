"""``python -m iso_bench.cli``: the ``iso-bench`` command line (as before it became a package)."""

import sys

from iso_bench.cli import main

sys.exit(main())
