"""GPU power during a server's runs: a sampler of nvidia-smi's `power.draw` on the server's own
GPUs, and each run's energy from it. Standard library only.

The sampler polls `nvidia-smi --query-gpu=index,power.draw --format=csv,noheader,nounits -i <gpus>`
every `SAMPLE_INTERVAL_S` while the server is up (one short process per poll, rather than `-lms`:
nothing to clean up when the agent dies, and a fake nvidia-smi answers it the same way), and the
agent takes one reading more at the start and at the end of each run, so that a run shorter than
the interval has readings of its own. `power.draw` is the driver's one-second average (driver 580:
equal to `power.draw.average`), parsed by fleet.host.nvidia_smi.parse_power.

A run's energy (fleet.host.energy: the trapezoid rule over its window, per GPU) goes into its
result's figures as `energy`: joules per GPU, their sum, the mean power per GPU, and output tokens
per joule of all the server's GPUs together. A simulated run's figures are in simulated time
(fleet.host.agent.results): its joules are the drawn power over its simulated duration (wall
joules / sim_speed), so that its tokens per joule go with its tok/s. Where no power could be read
(no nvidia-smi, a GPU that reports [N/A], a sim host that plays GPUs the machine does not have)
`energy` says why and carries no figure -- never 0 J.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleet.host.energy import energy_joules, tokens_per_joule
from fleet.host.nvidia_smi import parse_power, query_command
from fleet.host.errors import NvidiaSmiError

log = logging.getLogger("fleet.host.agent")

SAMPLE_INTERVAL_S = 0.5
QUERY_TIMEOUT_S = 5.0
FIELDS = ("index", "power.draw")
MAX_SAMPLES = 200_000  # per sampler: 14 hours of 8 GPUs at 0.5 s
MAX_FAILURES = 3  # consecutive failed polls before the sampler gives up (and says why)
SOURCE = "nvidia-smi power.draw"


def power_command(gpus: Sequence[int]) -> list[str]:
    return [*query_command("query-gpu", FIELDS), "-i", ",".join(str(g) for g in gpus)]


class PowerSampler:
    """Readings of `gpus` (machine indexes), kept in memory while the server is up."""

    def __init__(self, gpus: Sequence[int], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.gpus = tuple(gpus)
        self.interval_s = interval_s
        self.error: str | None = None if self.gpus else "no GPU of this machine to read (a sim server that plays its host file's GPUs)"
        self._samples: deque[tuple[float, int, float]] = deque(maxlen=MAX_SAMPLES)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._failures = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.error is not None:
            return
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="power-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(QUERY_TIMEOUT_S + 1.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s) and self.error is None:
            self.sample()

    def sample(self) -> None:
        """One reading of every GPU, now (thread-safe); a failure is counted, and after
        MAX_FAILURES in a row the sampler stops with the reason."""
        if self.error is not None:
            return
        before = time.time()
        try:
            done = subprocess.run(power_command(self.gpus), capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise OSError(f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[:200]}")
            readings = parse_power(done.stdout, FIELDS)
        except (OSError, subprocess.SubprocessError, NvidiaSmiError) as exc:
            with self._lock:
                self._failures += 1
                if self._failures >= MAX_FAILURES and self.error is None:
                    self.error = f"{' '.join(power_command(self.gpus))}: {exc}"
                    log.warning("power sampling stopped: %s", self.error)
            return
        at = (before + time.time()) / 2.0
        with self._lock:
            self._failures = 0
            for reading in readings:
                if reading.draw_w is not None and reading.index in self.gpus:
                    self._samples.append((at, reading.index, reading.draw_w))

    def samples(self, gpu: int) -> list[tuple[float, float]]:
        with self._lock:
            return [(t, w) for t, index, w in self._samples if index == gpu]

    def energy(self, windows: Sequence[tuple[float, float]], output_tokens: int | None, sim_speed: float | None, within: tuple[float, float] | None = None) -> dict[str, Any]:
        """The `energy` figures of a run measured over these wall-clock windows (see energy_figures)."""
        samples = {gpu: self.samples(gpu) for gpu in self.gpus}
        return energy_figures(samples, windows, output_tokens, sim_speed, self.error, self.interval_s, within)


def energy_figures(
    samples: Mapping[int, Sequence[tuple[float, float]]],
    windows: Sequence[tuple[float, float]],
    output_tokens: int | None,
    sim_speed: float | None,
    error: str | None = None,
    interval_s: float = SAMPLE_INTERVAL_S,
    within: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Joules per GPU over the windows (wall clock: a run's measured sections, as its tok/s
    counts them), their sum, the mean power per GPU and tokens per joule; in simulated time for
    a simulated run. Figures are null, with `unmeasured` saying why, where a GPU has no reading
    in a window -- or, given `within` (the run's whole span, which the agent's readings at its
    start and end frame), in that span: a run's many short passes share its readings."""
    scale = 1.0 / sim_speed if sim_speed else 1.0
    out: dict[str, Any] = {
        "source": SOURCE, "gpus": sorted(samples), "interval_s": interval_s, "time": "simulated" if sim_speed else "wall",
        "samples": sum(1 for s in samples.values() for t, _ in s if any(a <= t <= b for a, b in windows)),
        "joules_per_gpu": None, "joules": None, "mean_power_w": None, "tokens_per_joule": None, "unmeasured": None,
    }  # fmt: skip
    if error is not None or not samples or not windows:
        out["unmeasured"] = error or ("no GPU to read" if not samples else "nothing was measured")
        return out
    per_gpu: dict[str, float] = {}
    for gpu, readings in sorted(samples.items()):
        parts = [energy_joules(readings, a, b, within=within) if b >= a else None for a, b in windows]
        if any(j is None for j in parts):
            out["unmeasured"] = f"GPU {gpu}: no power reading while the run was measured"
            return out
        per_gpu[str(gpu)] = sum(j for j in parts if j is not None) * scale
    total = sum(per_gpu.values())
    seconds = sum(b - a for a, b in windows) * scale
    out.update(
        joules_per_gpu=per_gpu, joules=total, mean_power_w=total / len(per_gpu) / seconds if seconds > 0 else None,
        tokens_per_joule=tokens_per_joule(output_tokens, list(per_gpu.values())) if output_tokens else None,
    )  # fmt: skip
    return out


def window_of(outcomes: Iterable[tuple[float, float | None]]) -> tuple[float, float] | None:
    """The wall-clock window of a set of requests, from each one's (start, wall seconds it took)."""
    spans = [(start, start + (took or 0.0)) for start, took in outcomes]
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)
