"""``python -m lsio info|bench|verify STORE``: see :mod:`lsio.cli`."""

import sys

from .cli import main

sys.exit(main())
