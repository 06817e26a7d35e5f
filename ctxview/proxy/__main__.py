"""``python -m ctxview.proxy``: the recording proxy's command line. No Django here."""

import sys

from ctxview.proxy.cli import main

if __name__ == "__main__":
    sys.exit(main())
