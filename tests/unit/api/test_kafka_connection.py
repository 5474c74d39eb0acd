"""``KafkaConnection``: a connection's bytes received into the buffers they are read from,
over real loopback sockets, on uvloop (franz's loop) and on asyncio's own: reads in
order across stage and in-place buffers, a stage that fills stops the socket being
read, idle waits end, and the end of the stream mid-frame is reported."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from api.kafka.connection import STAGE_BYTES, KafkaConnection

LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


def run(loop_name: str, body: Callable[..., Awaitable[Any]], *, idle_s: float = 5.0) -> Any:
    """``body(conn, client)`` against a listener on 127.0.0.1: ``conn`` the server side's
    KafkaConnection, ``client`` a blocking socket (set non-blocking where needed)."""
    loop = LOOPS[loop_name]()

    async def main() -> Any:
        accepted: asyncio.Future[KafkaConnection] = loop.create_future()

        async def on_connect(conn: KafkaConnection) -> None:
            accepted.set_result(conn)
            await asyncio.sleep(3600)

        server = await loop.create_server(lambda: KafkaConnection(on_connect, idle_s),
                                          "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        try:
            conn = await asyncio.wait_for(accepted, 5)
            return await body(conn, client)
        finally:
            client.close()
            server.close()
            if conn.task is not None:
                conn.task.cancel()

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_pipelined_frames_are_read_in_order_across_the_stage_and_in_place(loop_name: str) -> None:
    frames = [os.urandom(n) for n in (10, STAGE_BYTES - 3, 3 * STAGE_BYTES + 7, 1, 700_000)]
    wire = b"".join(len(f).to_bytes(4, "big") + f for f in frames)

    async def body(conn: KafkaConnection, client: socket.socket) -> list[bytes]:
        loop = asyncio.get_running_loop()
        sender = loop.run_in_executor(None, client.sendall, wire)
        got = []
        for _ in frames:
            size = int.from_bytes(await conn.read_exact(4), "big")
            buf = bytearray(size)
            await conn.read_into(buf)
            got.append(bytes(buf))
        await sender
        return got

    assert run(loop_name, body) == frames


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_full_stage_nobody_reads_stops_the_socket_being_read(loop_name: str) -> None:
    """A client that pipelines without end while the server serves one request: the
    server holds the stage (64 KiB) and its socket buffer, not what the client sends."""

    async def body(conn: KafkaConnection, client: socket.socket) -> tuple[int, bool, int]:
        client.setblocking(False)
        sent, chunk = 0, b"x" * 65536
        for _ in range(2000):  # bounded: 128 MiB at most
            try:
                sent += client.send(chunk)
            except BlockingIOError:
                await asyncio.sleep(0.05)  # let the server read what it will
                try:
                    sent += client.send(chunk)
                except BlockingIOError:
                    break
        await asyncio.sleep(0.1)
        return sent, conn._paused, len(conn._stage)

    sent, paused, stage = run(loop_name, body)
    assert paused and stage <= 2 * STAGE_BYTES
    assert sent < 64 * 1024 * 1024, "the server kept reading a connection nobody served"


@pytest.mark.parametrize("loop_name", LOOPS)
def test_an_idle_wait_ends_with_a_timeout_and_arriving_bytes_push_it_on(loop_name: str) -> None:
    async def body(conn: KafkaConnection, client: socket.socket) -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        client.sendall(b"\x00\x00")
        started = loop.time()

        async def trickle() -> None:  # a byte every 0.2 s: never idle for 0.5 s
            for b in b"\x00\x05":
                await asyncio.sleep(0.2)
                client.sendall(bytes([b]))

        feeder = asyncio.ensure_future(trickle())
        prefix = await conn.read_exact(4)
        await feeder
        with pytest.raises(TimeoutError):
            await conn.read_into(bytearray(5))  # nothing more comes
        return prefix, loop.time() - started

    prefix, waited = run(loop_name, body, idle_s=0.5)
    assert prefix == b"\x00\x00\x00\x05"
    assert 0.8 <= waited < 5


@pytest.mark.parametrize("loop_name", LOOPS)
def test_the_end_of_the_stream_mid_frame_is_reported(loop_name: str) -> None:
    async def body(conn: KafkaConnection, client: socket.socket) -> None:
        client.sendall(b"\x00\x00\x00\x10" + b"half")
        client.shutdown(socket.SHUT_WR)
        assert await conn.read_exact(4) == b"\x00\x00\x00\x10"
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await conn.read_into(bytearray(16))
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await conn.read_exact(4)  # and stays ended

    run(loop_name, body)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_answers_are_written_and_drained(loop_name: str) -> None:
    async def body(conn: KafkaConnection, client: socket.socket) -> bytes:
        loop = asyncio.get_running_loop()
        payload = os.urandom(4 << 20)
        reader = loop.run_in_executor(None, _recv_exactly, client, len(payload))
        conn.write(payload[:1000])
        conn.write(memoryview(payload)[1000:])
        await conn.drain()
        got = await reader
        assert got == payload
        return got[:4]

    run(loop_name, body)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(1 << 20, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
