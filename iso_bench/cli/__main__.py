"""``python -m iso_bench.cli``: the ``iso-bench`` command line."""

import sys

from iso_bench.cli import main

sys.exit(main())
