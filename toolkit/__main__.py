"""``python -m toolkit``: the ``multigpu`` command."""

import sys

from toolkit.cli import main

sys.exit(main())
