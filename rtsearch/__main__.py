"""``python -m rtsearch``: the ``rtsearch`` command (`rtsearch.cli`)."""

import sys

from rtsearch.cli import main

sys.exit(main())
