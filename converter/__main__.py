"""``python -m converter``: the ``convert`` command (see :mod:`converter.tools.cli`), for
environments where the console script is not on ``PATH``."""

import sys

from converter.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
