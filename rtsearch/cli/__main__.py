"""``python -m rtsearch.cli``: the ``rtsearch`` command."""

import sys

from rtsearch.cli import main

sys.exit(main())
