"""``python -m secretferry.devserver``: the same as ``secretferry dev-server``.

Through ``secretferry.cli`` so that a missing ``devserver`` extra is one line saying how to get it.
"""

import sys

from secretferry import cli

sys.exit(cli.main(["dev-server", *sys.argv[1:]]))
