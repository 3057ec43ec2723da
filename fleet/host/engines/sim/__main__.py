import sys

from fleet.host.engines.sim.server import main

sys.exit(main())
