"""``python -m toolkit``: the ``multigpu`` command."""

import sys

from toolkit.command.main import main

sys.exit(main())
