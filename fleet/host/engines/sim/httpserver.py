"""A small HTTP/1.1 server on asyncio streams, answering the way uvicorn does: keep-alive,
Content-Length bodies, chunked transfer encoding for streamed responses, `server: uvicorn`
headers, and uvicorn's access log line per response.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from fleet.host.engines.sim import sgltext
from fleet.host.engines.sim.console import Console
from fleet.host.errors import BadRequest

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 256 * 1024 * 1024


def dumps(value: Any) -> bytes:
    # orjson / FastAPI style: compact separators, UTF-8 rather than \u escapes.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass
class HttpRequest:
    method: str
    target: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    client: str

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class Connection:
    """The response side of one request on a kept-alive connection."""

    def __init__(self, writer: asyncio.StreamWriter, request: HttpRequest, console: Console) -> None:
        self._writer = writer
        self._request = request
        self._console = console
        self.responded = False
        self.streaming = False
        self.keep_alive = request.headers.get("connection", "").lower() != "close"

    @property
    def closing(self) -> bool:
        return self._writer.transport.is_closing()

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        self.responded = True
        reason = HTTPStatus(status).phrase
        request = self._request
        self._console.access(sgltext.access_line(request.client, request.method, request.target, status, reason))
        lines = [f"HTTP/1.1 {status} {reason}", f"date: {_http_date()}", "server: uvicorn"]
        lines += [f"{name}: {value}" for name, value in headers]
        if not self.keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(self, status: int, body: bytes | Any, content_type: str = "application/json") -> None:
        """A whole response; an empty body goes without content-type, as Starlette's Response(status_code=...)."""
        payload = body if isinstance(body, bytes) else dumps(body)
        headers = [("content-length", str(len(payload)))]
        if payload:
            headers.append(("content-type", content_type))
        self._writer.write(self._head(status, headers) + payload)

    def start_stream(self, content_type: str = "text/event-stream; charset=utf-8") -> None:
        self.streaming = True
        self._writer.write(self._head(200, [("content-type", content_type), ("transfer-encoding", "chunked")]))

    def write_chunk(self, data: bytes) -> bool:
        """Send one chunk; False once the client has gone away."""
        if self._writer.transport.is_closing():
            return False
        self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        return True

    def end_stream(self) -> None:
        if not self._writer.transport.is_closing():
            self._writer.write(b"0\r\n\r\n")

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except ConnectionError:
            pass


Handler = Callable[[HttpRequest, Connection], Awaitable[None]]

_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True))
    return _date_cache[1]


async def _read_request(reader: asyncio.StreamReader, client: str) -> HttpRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest(f"malformed request line {lines[0]!r}")
    if not version.startswith("HTTP/1."):
        raise BadRequest(f"unsupported protocol {version!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest("request body too large")
        body = await reader.readexactly(length) if length else b""
    split = urlsplit(target)
    return HttpRequest(method.upper(), target, split.path, parse_qs(split.query), headers, body, client)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def serve(host: str, port: int, handler: Handler, console: Console) -> asyncio.base_events.Server:
    """Bind and start serving; raises OSError (e.g. EADDRINUSE) like uvicorn's create_server."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "unknown"
        try:
            while True:
                try:
                    request = await _read_request(reader, client)
                except (BadRequest, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    break
                if request is None:
                    break
                connection = Connection(writer, request, console)
                await handler(request, connection)
                await connection.drain()
                if not connection.keep_alive or writer.transport.is_closing():
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(on_connection, host, port, limit=MAX_HEADER_BYTES, reuse_address=True, backlog=2048)
