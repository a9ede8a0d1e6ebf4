"""A counting TCP proxy in front of PostgreSQL: how many statements does a worker send?

pg_stat_statements is not loaded on the benchmark's server, so the harness points a
worker at this proxy instead and counts what crosses it. After the startup packet
every frontend message is ``type (1 byte) + length (4 bytes, itself included) + body``;
the proxy counts simple-query (``Q``) and extended-protocol Execute (``E``) messages
and forwards every byte unchanged. An SSLRequest or GSSENCRequest is answered ``N``
(clients connect with sslmode=disable anyway). A ``Q`` carrying several statements
separated by semicolons counts once: this counts round trips of work, not SQL text.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
COUNTED = (b"Q", b"E")


@dataclass(frozen=True)
class Counts:
    query: int  # 'Q' messages
    execute: int  # 'E' messages

    @property
    def statements(self) -> int:
        return self.query + self.execute


class CountingProxy:
    """Listens on 127.0.0.1 (a free port) in a thread of its own, forwards to upstream."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.port = 0
        self._lock = threading.Lock()
        self._query = 0
        self._execute = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="bench-proxy")
        self._thread.daemon = True
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> int:
        """Start listening; the port clients should use."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self.port = future.result(timeout=10)
        return self.port

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def reset(self) -> None:
        with self._lock:
            self._query = 0
            self._execute = 0

    def counts(self) -> Counts:
        with self._lock:
            return Counts(self._query, self._execute)

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream_w: asyncio.StreamWriter | None = None
        try:
            upstream_r, upstream_w = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
            back = asyncio.create_task(self._pipe(upstream_r, client_w))
            try:
                await self._frontend(client_r, client_w, upstream_w)
            finally:
                upstream_w.close()
                await asyncio.gather(back, return_exceptions=True)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            client_w.close()
            self._tasks.discard(task)

    async def _frontend(
        self,
        client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        upstream_w: asyncio.StreamWriter,
    ) -> None:
        """Client to server: the startup packet(s), then typed messages, counted."""
        while True:
            header = await client_r.readexactly(4)
            body = await client_r.readexactly(int.from_bytes(header, "big") - 4)
            code = int.from_bytes(body[:4], "big")
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                client_w.write(b"N")
                await client_w.drain()
                continue
            upstream_w.write(header + body)
            await upstream_w.drain()
            break
        while True:
            head = await client_r.readexactly(5)
            body = await client_r.readexactly(int.from_bytes(head[1:5], "big") - 4)
            kind = head[:1]
            if kind in COUNTED:
                with self._lock:
                    if kind == b"Q":
                        self._query += 1
                    else:
                        self._execute += 1
            upstream_w.write(head + body)
            await upstream_w.drain()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Server to client: bytes as they come."""
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()
