"""Where the simulated server's lines go, formatted as SGLang's processes print them: SGLang's and
uvicorn's error log on stderr, uvicorn's access log on stdout (its LOGGING_CONFIG), one flush per
line so that a reader tailing the log sees it at once. `--log-level` (and `--log-level-http` for
uvicorn's lines) filter as Python logging does.
"""

from __future__ import annotations

import sys
from typing import Iterable, TextIO

from fleet.host.engines.sim import sgltext

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR, "critical": 50}


class Console:
    def __init__(self, tp_size: int, err: TextIO | None = None, out: TextIO | None = None, log_level: str = "info", http_log_level: str | None = None) -> None:
        self.tp_size = tp_size
        self._err = err or sys.stderr
        self._out = out or sys.stdout
        self._level = LEVELS.get(log_level.lower(), INFO)
        self._http_level = LEVELS.get((http_log_level or log_level).lower(), INFO)

    def main(self, message: str, level: int = INFO) -> None:
        """A line of the main process (tokenizer manager, HTTP server): no rank prefix."""
        if level >= self._level:
            self._write(self._err, sgltext.log_line(message))

    def rank(self, rank: int, message: str, level: int = INFO) -> None:
        """A line of scheduler rank `rank` (prefixed " TP{rank}" when tp > 1)."""
        if level >= self._level:
            self._write(self._err, sgltext.log_line(message, sgltext.rank_prefix(rank, self.tp_size)))

    def ranks(self, message: str) -> None:
        """The same INFO line from every TP rank, as each model runner logs it."""
        for rank in range(self.tp_size):
            self.rank(rank, message)

    def http(self, message: str, level: int = INFO) -> None:
        """uvicorn's own lines ("Started server process", the bind error), under --log-level-http."""
        if level >= self._http_level:
            self._write(self._err, sgltext.log_line(message))

    def access(self, message: str) -> None:
        if INFO >= self._http_level:
            self._write(self._out, sgltext.log_line(message))

    def raw(self, lines: Iterable[str]) -> None:
        """Lines printed without SGLang's formatter: tracebacks' bodies, other libraries' output."""
        self._write(self._err, "\n".join(lines))

    def flush(self) -> None:
        for stream in (self._err, self._out):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):
            # The reader of our log went away (closed pipe); SGLang's logging ignores that too.
            pass
