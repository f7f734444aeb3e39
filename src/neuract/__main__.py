"""``python -m neuract VERB ...``: the same as the ``neuract`` command."""

import sys

from neuract.cli import main

sys.exit(main())
