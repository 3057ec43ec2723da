"""Fault profiles: the failures a simulated host carries, read from a JSON file in its work dir.

Schema (every key optional):

    {
      "ddtree_crashes": [                        # replaces the default list below when present
        {"compute_cap_major": 12, "budget": 8,  "trigger": "first_decode"},
        {"compute_cap_major": 12, "budget": 12, "trigger": "output_tokens_over", "tokens": 16}
      ],
      "flashinfer_sm12_warning": null,           # true/false forces FlashInfer's warning; null: cc 12.x and toolkit < 12.9
      "crash_after_requests": null,              # N: the first decode after N finished requests crashes
      "crash_error": "illegal_memory_access",    # error of that crash: illegal_memory_access | illegal_instruction
      "hang_after_requests": null,               # N: after N finished requests the server accepts requests but never answers
      "slow_start_s": 0,                         # extra simulated seconds of weight loading (at the start-up scale, FLEET_SIM_START_SPEED)
      "port_in_use": false,                      # the HTTP bind fails as if another process held the port
      "missing_model_path": false,               # the model path is treated as absent (e.g. /dev/shm wiped by a reboot)
      "corrupt_outputs": [                       # silently wrong tokens: no log line, no error, the same speed
        {"algorithm": "DDTREE", "budget": 15, "from_token": 2}
      ]
    }

The default DDTree crashes are the seed story on an RTX PRO 6000 (SM120): budget 8 dies with an
illegal instruction on its first decode after start-up, budget 12 survives a 16-token warm-up
and dies once a request decodes past 16 tokens.

`corrupt_outputs` (none by default) plays a verify kernel that accepts wrong tokens: a server of
that speculative algorithm (and DDTree budget, where given; any budget when left out) emits,
from output position `from_token` (0-based) on, a token other than the one the model's greedy
output holds there, while its speed, acceptance and logs stay as they were. Only fleet's lossless
check (fleet.host.agent.lossless) can tell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from fleet.host.errors import FaultProfileError

TRIGGER_FIRST_DECODE = "first_decode"
TRIGGER_OUTPUT_TOKENS_OVER = "output_tokens_over"
CRASH_ERRORS = ("illegal_instruction", "illegal_memory_access")


@dataclass(frozen=True)
class OutputCorruption:
    algorithm: str  # SGLang's --speculative-algorithm value: DFLASH, DDTREE, EAGLE, ...
    budget: int | None  # a DDTree budget; None: every budget of the algorithm
    from_token: int  # the first output position (0-based) that comes out wrong

    def matches(self, algorithm: str | None, budget: int | None) -> bool:
        return algorithm is not None and algorithm.upper() == self.algorithm.upper() and self.budget in (None, budget)


@dataclass(frozen=True)
class DDTreeCrash:
    compute_cap_major: int
    budget: int
    trigger: str
    tokens: int = 0

    def fires(self, *, first_decode: bool, max_output_tokens_after_step: int) -> bool:
        if self.trigger == TRIGGER_FIRST_DECODE:
            return first_decode
        return max_output_tokens_after_step > self.tokens


DEFAULT_DDTREE_CRASHES = (
    DDTreeCrash(12, 8, TRIGGER_FIRST_DECODE),
    DDTreeCrash(12, 12, TRIGGER_OUTPUT_TOKENS_OVER, 16),
)


@dataclass(frozen=True)
class FaultProfile:
    ddtree_crashes: tuple[DDTreeCrash, ...] = DEFAULT_DDTREE_CRASHES
    flashinfer_sm12_warning: bool | None = None
    crash_after_requests: int | None = None
    crash_error: str = "illegal_memory_access"
    hang_after_requests: int | None = None
    slow_start_s: float = 0.0
    port_in_use: bool = False
    missing_model_path: bool = False
    corrupt_outputs: tuple[OutputCorruption, ...] = ()
    source: str = field(default="(defaults)", compare=False)

    def corruption_for(self, algorithm: str | None, budget: int | None) -> OutputCorruption | None:
        """The corruption a server of this speculative algorithm and budget plays, if any."""
        return next((c for c in self.corrupt_outputs if c.matches(algorithm, budget)), None)

    def ddtree_crash_for(self, compute_cap_major: int, budget: int | None) -> DDTreeCrash | None:
        if budget is None:
            return None
        for crash in self.ddtree_crashes:
            if crash.compute_cap_major == compute_cap_major and crash.budget == budget:
                return crash
        return None

    def shows_flashinfer_warning(self, compute_cap: tuple[int, int], toolkit: tuple[int, int] | None) -> bool:
        if self.flashinfer_sm12_warning is not None:
            return self.flashinfer_sm12_warning
        return compute_cap[0] == 12 and (toolkit is None or toolkit < (12, 9))


def _expect(source: str, name: str, value: Any, kind: type | tuple[type, ...], expected: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; a count given as `true` is a mistake worth naming.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise FaultProfileError(f"{source}: {name}: expected {expected}, got {value!r}")
    return value


def parse_fault_profile(data: Mapping[str, Any], source: str) -> FaultProfile:
    if not isinstance(data, Mapping):
        raise FaultProfileError(f"{source}: expected a JSON object at the top level")
    known = set(FaultProfile.__dataclass_fields__) - {"source"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise FaultProfileError(f"{source}: unknown keys {unknown}; expected some of {sorted(known)}")
    values: dict[str, Any] = {"source": source}
    if "ddtree_crashes" in data:
        crashes = _expect(source, "ddtree_crashes", data["ddtree_crashes"], list, "a list of objects")
        values["ddtree_crashes"] = tuple(_parse_crash(item, f"{source}: ddtree_crashes[{i}]") for i, item in enumerate(crashes))
    for name in ("crash_after_requests", "hang_after_requests"):
        if data.get(name) is not None:
            count = _expect(source, name, data[name], int, "a non-negative integer or null")
            if count < 0:
                raise FaultProfileError(f"{source}: {name}: expected a non-negative integer, got {count}")
            values[name] = count
    if data.get("flashinfer_sm12_warning") is not None:
        values["flashinfer_sm12_warning"] = _expect(source, "flashinfer_sm12_warning", data["flashinfer_sm12_warning"], bool, "true, false or null")
    if "crash_error" in data:
        if data["crash_error"] not in CRASH_ERRORS:
            raise FaultProfileError(f"{source}: crash_error: expected one of {list(CRASH_ERRORS)}, got {data['crash_error']!r}")
        values["crash_error"] = data["crash_error"]
    if "slow_start_s" in data:
        slow = _expect(source, "slow_start_s", data["slow_start_s"], (int, float), "a number of seconds")
        if slow < 0:
            raise FaultProfileError(f"{source}: slow_start_s: expected >= 0, got {slow}")
        values["slow_start_s"] = float(slow)
    for name in ("port_in_use", "missing_model_path"):
        if name in data:
            values[name] = _expect(source, name, data[name], bool, "true or false")
    if "corrupt_outputs" in data:
        items = _expect(source, "corrupt_outputs", data["corrupt_outputs"], list, "a list of objects")
        values["corrupt_outputs"] = tuple(_parse_corruption(item, f"{source}: corrupt_outputs[{i}]") for i, item in enumerate(items))
    return FaultProfile(**values)


def _parse_corruption(item: Any, where: str) -> OutputCorruption:
    if not isinstance(item, Mapping):
        raise FaultProfileError(f"{where}: expected an object with algorithm, budget (optional), from_token (optional)")
    unknown = sorted(set(item) - {"algorithm", "budget", "from_token"})
    if unknown:
        raise FaultProfileError(f"{where}: unknown keys {unknown}; expected some of ['algorithm', 'budget', 'from_token']")
    if "algorithm" not in item:
        raise FaultProfileError(f"{where}: missing key 'algorithm'")
    algorithm = _expect(where, "algorithm", item["algorithm"], str, "a speculative algorithm such as DDTREE")
    budget = item.get("budget")
    if budget is not None:
        _expect(where, "budget", budget, int, "an integer DDTree budget or null")
    start = _expect(where, "from_token", item.get("from_token", 0), int, "a non-negative output position")
    if start < 0:
        raise FaultProfileError(f"{where}: from_token: expected >= 0, got {start}")
    return OutputCorruption(algorithm, budget, start)


def _parse_crash(item: Any, where: str) -> DDTreeCrash:
    if not isinstance(item, Mapping):
        raise FaultProfileError(f"{where}: expected an object with compute_cap_major, budget, trigger")
    try:
        major = _expect(where, "compute_cap_major", item["compute_cap_major"], int, "an integer")
        budget = _expect(where, "budget", item["budget"], int, "an integer")
        trigger = item["trigger"]
    except KeyError as missing:
        raise FaultProfileError(f"{where}: missing key {missing.args[0]!r}") from None
    if trigger == TRIGGER_FIRST_DECODE:
        return DDTreeCrash(major, budget, trigger)
    if trigger == TRIGGER_OUTPUT_TOKENS_OVER:
        tokens = _expect(where, "tokens", item.get("tokens"), int, "an integer number of output tokens")
        return DDTreeCrash(major, budget, trigger, tokens)
    raise FaultProfileError(f"{where}: trigger: expected {TRIGGER_FIRST_DECODE!r} or {TRIGGER_OUTPUT_TOKENS_OVER!r}, got {trigger!r}")


def load_fault_profile(path: str | Path | None) -> FaultProfile:
    """The profile at `path`; the defaults when `path` is None or the file does not exist."""
    if path is None:
        return FaultProfile()
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return FaultProfile()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FaultProfileError(f"{path}: not valid JSON: {exc}") from exc
    return parse_fault_profile(data, str(path))


def fault_profile_path(env: Mapping[str, str]) -> str | None:
    """FLEET_SIM_FAULTS, else `<FLEET_SIM_WORK_DIR>/sim-faults.json`, else none."""
    if env.get("FLEET_SIM_FAULTS"):
        return env["FLEET_SIM_FAULTS"]
    if env.get("FLEET_SIM_WORK_DIR"):
        return str(Path(env["FLEET_SIM_WORK_DIR"]) / "sim-faults.json")
    return None
