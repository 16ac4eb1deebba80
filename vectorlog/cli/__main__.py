"""`python -m vectorlog.cli`."""

import sys

from vectorlog.cli.main import main

sys.exit(main())
