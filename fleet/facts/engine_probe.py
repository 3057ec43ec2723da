"""What the engine's own Python interpreter sees: run ON THE HOST with that interpreter.

Standard library only, and written for old interpreters too (no f-strings needing 3.8+, no
`X | Y` annotations): it must report, not crash, whatever is (not) installed. It prints one line,
`PROBE_MARK` followed by a JSON object; every field is None when the thing is not there.

Only torch is imported: torch.version.cuda and the compiled arch list exist nowhere else. The
other packages are located with `find_spec` (nothing executed) and versioned from their
distribution metadata, because importing flashinfer queries the GPU and importing sglang pulls
in the whole engine (seconds, and side effects on a host that may be serving).

Importing torch costs seconds of CPU per host, so the report is cached on the host (issue 12),
in `~/.cache/fleet/engine-probe/<interpreter>.txt` (or under $XDG_CACHE_HOME), keyed by a
fingerprint: the boot id, the interpreter (its path, real path and inode/size/mtime) and every
directory on its `sys.path` (inode and mtime: installing, upgrading or removing a package adds
or removes entries there, which changes the directory's mtime). Any change -> probed afresh.
`--refresh` skips the cached report (and writes a new one). A cache that cannot be read or
written is no error: the probe runs as without one.

A cache hit imports nothing beyond `os` and `sys` (the interpreter loads them anyway): `json`
alone (with `re` and `enum`) is two thirds of a hit's time. The file holds the fingerprint, a
separator line and the report's JSON exactly as it is printed; the report is parsed on the
controller, never here. The rest is imported where a probe really runs.
"""

import os
import sys

PROBE_MARK = "fleet-engine-probe:"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
CACHE_VERSION = 2
CACHE_SEPARATOR = "\n--fleet-engine-probe-report--\n"

# module name -> distribution names that may provide it, most common first
PACKAGES = {
    "triton": ("triton", "pytorch-triton", "pytorch-triton-rocm"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "sglang": ("sglang",),
    "vllm": ("vllm",),
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
    import platform

    report = {
        "executable": sys.executable,
        "python_version": platform.python_version(),
    }
    report.update(_torch_facts())
    for module, distributions in PACKAGES.items():
        report[module + "_version"] = _package_version(module, distributions)
    return report


def _stat_line(path):
    try:
        st = os.stat(path)
    except OSError:
        return "%s absent" % path
    return "%s %d %d %r" % (path, st.st_ino, st.st_size, st.st_mtime)


def fingerprint(boot_id_path=BOOT_ID_PATH):
    """What the report depends on, as one string (see the module docstring)."""
    try:
        with open(boot_id_path) as handle:
            boot_id = handle.read().strip()
    except OSError:
        boot_id = "unknown"
    executable = sys.executable or "unknown"
    lines = ["v%d" % CACHE_VERSION, "boot " + boot_id, "exe " + executable, _stat_line(os.path.realpath(executable))]
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            lines.append(_stat_line(os.path.realpath(entry)))
    return "\n".join(lines)


def cache_path():
    """One file per interpreter (by its real path; a name shared by two interpreters only costs
    misses: the fingerprint names the interpreter). zlib, not hashlib: no OpenSSL to load."""
    import zlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    name = "%08x" % (zlib.crc32(os.path.realpath(sys.executable or "unknown").encode()) & 0xFFFFFFFF)
    return os.path.join(base, "fleet", "engine-probe", name + ".txt")


def cached_report(path, key):
    """The cached report's JSON text when the fingerprint is `key`, else None."""
    try:
        with open(path) as handle:
            text = handle.read()
    except (OSError, ValueError):
        return None
    stored, separator, report = text.partition(CACHE_SEPARATOR)
    # one line of JSON, whole (a file cut short is a miss, never a garbled answer)
    if separator and stored == key and report.startswith("{") and report.endswith("}") and "\n" not in report:
        return report
    return None


def store_report(path, key, report):
    """Atomically (temp file, rename); silently nothing when the cache is not writable."""
    import tempfile

    try:
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".probe-")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(key + CACHE_SEPARATOR + report)
            os.rename(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass


def main(argv, boot_id_path=BOOT_ID_PATH):
    # The fingerprint is taken before the probe: a package installed meanwhile makes the next run probe again.
    key = fingerprint(boot_id_path)
    path = cache_path()
    report = None if "--refresh" in argv else cached_report(path, key)
    if report is None:
        import json

        report = json.dumps(probe())
        store_report(path, key, report)
    sys.stdout.write(PROBE_MARK + report + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
