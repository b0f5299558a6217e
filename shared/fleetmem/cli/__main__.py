"""`python -m fleetmem.cli`: the `fleetmem` command without its console script."""

import sys

from fleetmem.cli.app import main

sys.exit(main())
