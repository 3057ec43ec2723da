"""`sim`: an SGLang server stand-in that starts, serves and fails the way SGLang does.

Standard library only (it ships to hosts with the agent); it uses fleet.host.engines.sglang (flags, argument
resolution, memory formulas, log formats per release) and fleet.host.modelcard for the model description.

    python -m fleet.host.engines.sim --model-path qwen3.6-27b --tp-size 1 --port 30000 [sglang.launch_server flags]

Sim-only settings (flags win over the environment):
- FLEET_SIM_SPEED / --sim-speed: wall seconds per simulated second (0.01: everything 100x faster).
  Every time the server reports (e2e_latency, throughputs, log elapsed) is wall-clock.
- FLEET_SIM_START_SPEED / --sim-start-speed: the same for the start-up phases alone (default: the
  time scale above, so nothing changes unless it is set): the sleeps of spawn, distributed init,
  weight loading (slow_start_s included), pools, CUDA graphs, a draft's load, uvicorn's start and the
  warm-up's /model_info polls before the ready line. Serving, /health's check and everything after
  the ready line keep FLEET_SIM_SPEED, and so do results: their figures and `sim_speed` are the
  serving scale's. The start-up durations a sim logs (load weight, graph capture, init engine)
  then read in the start-up scale; the controller plans and records a start at the host file's
  `engine.sim_start_speed` (fleet.plan start_scale_of). For tests that serve in real time but do
  not measure a start-up.
- FLEET_SIM_SEED / --sim-seed: seed of the generated tokens and acceptance (default 0).
- FLEET_SIM_NOISE / --sim-noise: run-to-run variation as hardware shows it (noise.py): `off` (default:
  the perf model's exact figures), `on` (throughput jitter, occasional slow runs, heavier-tailed TTFT),
  or a JSON object of noise.NoiseModel fields. Seeded by the sim seed; a run ends at each cache flush.
- FLEET_SIM_FAULTS / --sim-faults: fault profile JSON (see faults.py); default
  `$FLEET_SIM_WORK_DIR/sim-faults.json` when FLEET_SIM_WORK_DIR is set.
- FLEET_SIM_SGLANG_VERSION: the SGLang release the sim plays (its command line, argument resolution,
  memory formulas, log lines, /get_server_info version; default DEFAULT_SIM_RELEASE, 0.5.23; the launch
  sets it from the host's `engine.release`). FLEET_SIM_SGLANG_FORK: `ddtree` (default: the DDTree
  fork's flags and algorithm exist) or `upstream` (exactly the released parser). See cli.py.
- GPUs: from `nvidia-smi` (honouring CUDA_VISIBLE_DEVICES), else --sim-gpu-name/-count/-memory-mib/
  -compute-cap/-driver and --sim-cuda-toolkit (or FLEET_SIM_GPU_* / FLEET_SIM_CUDA_TOOLKIT).
  With FLEET_FAKE_GPU_DIR set, the server registers itself in `$FLEET_FAKE_GPU_DIR/procs/<pid>.json`.

Logs: SGLang's and uvicorn's lines on stderr, uvicorn's access log on stdout. Token counts come
from `fleet.host.tokens.count_tokens`, which fleet's workloads use to size prompts.
"""
