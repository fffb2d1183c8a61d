"""``python -m secretferry.devserver``."""

import sys

from secretferry.devserver.cli import main

sys.exit(main())
