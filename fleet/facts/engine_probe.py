"""What the engine's own Python interpreter sees: run ON THE HOST with that interpreter.

Standard library only, and written for old interpreters too (no f-strings needing 3.8+, no
`X | Y` annotations): it must report, not crash, whatever is (not) installed. It prints one line,
`PROBE_MARK` followed by a JSON object; every field is None when the thing is not there.

Only torch is imported: torch.version.cuda and the compiled arch list exist nowhere else. The
other packages are located with `find_spec` (nothing executed) and versioned from their
distribution metadata, because importing flashinfer queries the GPU and importing sglang pulls
in the whole engine (seconds, and side effects on a host that may be serving).
"""

import json
import platform
import sys

PROBE_MARK = "fleet-engine-probe:"

# module name -> distribution names that may provide it, most common first
PACKAGES = {
    "triton": ("triton", "pytorch-triton", "pytorch-triton-rocm"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "sglang": ("sglang",),
}


def _error_text(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def _package_version(module, distributions):
    try:
        import importlib.util

        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8: located, version unknown
        return "unknown"
    for name in distributions:
        try:
            return metadata.version(name)
        except Exception:
            continue
    return "unknown"


def _torch_facts():
    facts = {"torch_version": None, "torch_cuda": None, "torch_arch_list": None, "torch_error": None}
    try:
        import torch
    except Exception as exc:
        facts["torch_error"] = _error_text(exc)
        return facts
    facts["torch_version"] = str(getattr(torch, "__version__", "unknown"))
    facts["torch_cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
    # torch.cuda.get_arch_list() returns [] unless a GPU is usable; the compiled-in flags do not
    # need one, and reading them does not initialise the CUDA driver.
    arch_flags = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
    if arch_flags is not None:
        try:
            flags = arch_flags()
        except Exception as exc:
            facts["torch_error"] = "arch list: " + _error_text(exc)
        else:
            facts["torch_arch_list"] = flags.split() if flags else None
    return facts


def probe():
    report = {
        "executable": sys.executable,
        "python_version": platform.python_version(),
    }
    report.update(_torch_facts())
    for module, distributions in PACKAGES.items():
        report[module + "_version"] = _package_version(module, distributions)
    return report


if __name__ == "__main__":
    sys.stdout.write(PROBE_MARK + json.dumps(probe()) + "\n")
