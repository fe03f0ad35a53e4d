"""``python -m codii_sql.cli``: the command line."""

import sys

from .main import main

sys.exit(main())
