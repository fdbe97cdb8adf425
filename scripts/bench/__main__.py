"""``python -m scripts.bench``: ``make bench``'s runner (see ``runner.py``)."""

import sys

from .runner import main

sys.exit(main())
