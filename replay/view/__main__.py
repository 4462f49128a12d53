"""`python -m replay.view OUT`: write OUT/view/ (open OUT/view/index.html in a browser)."""

import sys

from replay.view.cli import main

sys.exit(main())
