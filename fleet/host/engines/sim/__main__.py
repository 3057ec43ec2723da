import os
import sys

from fleet.host.engines.sim import vllmserver
from fleet.host.engines.sim.server import main

# FLEET_SIM_ENGINE=vllm: play `vllm serve`; else SGLang's launch_server.
sys.exit(vllmserver.main(sys.argv[1:], os.environ) if vllmserver.plays_vllm(os.environ) else main())
