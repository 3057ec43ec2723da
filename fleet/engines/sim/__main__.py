import sys

from fleet.engines.sim.server import main

sys.exit(main())
