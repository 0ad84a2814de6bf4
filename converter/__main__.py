"""``python -m converter``: the ``convert`` command (see :mod:`converter.cli`), for
environments where the console script is not on ``PATH``."""

import sys

from converter.cli import main

if __name__ == "__main__":
    sys.exit(main())
