"""One client connection's bytes: size-prefixed frames read into buffers of their own,
and responses written with flow control.

A request of a megabyte (a producer's batches) is received straight into the buffer
that then holds it while it is decoded, validated and written to the segment file: the
socket's bytes are copied once, by the kernel, where a stream reader would copy them
into its own buffer and out again. Small frames (most requests but produce) arrive
through a small staging buffer and are copied out of it whole.

The channel is muted as in Kafka's SocketServer (2.7.0 Processor: a channel is muted
from the moment a request is read until its response is sent): once a whole frame is
read, the socket is not read again until the server takes it (it reads one frame ahead
of the one it handles, no more), so a client's requests are handled one at a time and
in order, and a client that pipelines requests buffers them in its own socket, not in
the broker. A frame the server is already waiting for does not mute the socket: the
server takes it before the socket is read again. A frame is read no further than its
own end.

A size prefix below zero or above ``socket.request.max.bytes`` is refused before
anything is allocated (Kafka's InvalidReceiveException). A frame's buffer grows as its
bytes arrive (first at most ``FIRST_ALLOCATION``, then doubling), so a client that
announces a large frame and sends little costs little.

A frame of up to ``FIRST_ALLOCATION`` bytes (a producer's request is at most about a
megabyte) is received into a buffer of the listener's ``FramePool`` and handed to the
server as a view of it; the buffer goes back to the pool when the server asks for the
next frame, and is used again only once nothing holds a view of it any more. A fresh
megabyte per request cost the broker its zeroing and its page faults, as much as the
batch's CRC.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable

from real_io.protocol import apis
from real_io.protocol.errors import ProtocolError

STAGING_BYTES = 16384
FIRST_ALLOCATION = 1 << 20
POOLED_BUFFERS = 4


class FramePool:
    """Buffers of ``FIRST_ALLOCATION`` bytes for frames, shared by a listener's
    connections; at most ``limit`` are kept while no frame uses them."""

    def __init__(self, limit: int = POOLED_BUFFERS):
        self.limit = limit
        self.free: list[bytearray] = []

    def take(self) -> bytearray:
        free = self.free
        while free:
            buffer = free.pop()
            if _unviewed(buffer):
                return buffer
            # still viewed (a request's batch not yet let go): left to the views that hold it
        return bytearray(FIRST_ALLOCATION)

    def give(self, buffer: bytearray) -> None:
        if len(self.free) < self.limit:
            self.free.append(buffer)


def _unviewed(buffer: bytearray) -> bool:
    """Whether no memoryview of ``buffer`` is alive: a bytearray with one cannot change
    its length (BufferError). Its length is restored; the byte appended fits its
    allocation after the first time."""
    try:
        buffer.append(0)
    except BufferError:
        return False
    del buffer[-1]
    return True


class FrameConnection(asyncio.BufferedProtocol):
    def __init__(self, max_request_bytes: int, on_open: Callable[["FrameConnection"], None],
                 pool: FramePool | None = None):
        self.max_request_bytes = max_request_bytes
        self._on_open = on_open
        self._pool = pool if pool is not None else FramePool()
        self._pooled: list[bytearray] = []  # pool buffers of the frames read and not yet done with
        self.transport: asyncio.Transport | None = None
        self._staging: bytearray | None = None  # allocated for a read, dropped once empty
        self._staged = 0  # bytes in the staging buffer not yet taken into a frame
        self._frame: bytearray | memoryview | None = None  # a frame read past the staging buffer
        self._frame_size = 0
        self._filled = 0
        self._ready: deque[bytearray | memoryview] = deque()  # whole frames the server has not taken yet
        self._error: Exception | None = None  # a refused size prefix: after the ready frames
        self._eof = False
        self._lost = False
        self._waiter: asyncio.Future | None = None
        self._wait_deadline = 0.0  # (loop time) when the current wait for a frame times out
        self._idle_timer: asyncio.TimerHandle | None = None
        self._write_paused = False
        self._drain_waiter: asyncio.Future | None = None

    # -- the transport's side --------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):  # the frame's (own) buffer is full but the frame is not
                frame.extend(bytes(min(self._frame_size, 2 * len(frame)) - len(frame)))  # type: ignore[union-attr]
            return memoryview(frame)[self._filled:]
        if self._staging is None:
            self._staging = bytearray(STAGING_BYTES)
        return memoryview(self._staging)[self._staged:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == self._frame_size:
                self._ready.append(self._frame)
                self._frame = None
        else:
            self._staged += nbytes
            self._take_staged_frames()
        if self._ready or self._error is not None:
            waiter = self._waiter
            if waiter is None or waiter.done() or len(self._ready) > 1 or self._error is not None:
                self.transport.pause_reading()  # muted until the server asks for the next frame
            # else the server waits for this very frame and takes it before the socket is
            # read again (its wake-up runs ahead of the next read): muting the socket only
            # to unmute it at once cost two epoll_ctl calls per request.
            self._wake()

    def _take_staged_frames(self) -> None:
        staging, staged, position = self._staging, self._staged, 0
        while staged - position >= 4:
            try:
                size = apis.frame_size(staging[position:position + 4], self.max_request_bytes)
            except ProtocolError as refused:
                self._error = refused
                break
            start = position + 4
            if staged - start >= size:  # the whole frame is here
                self._ready.append(staging[start:start + size])
                position = start + size
                continue
            have = staged - start  # the frame continues in a buffer of its own
            if size <= FIRST_ALLOCATION:
                pooled = self._pool.take()
                self._pooled.append(pooled)
                frame = memoryview(pooled)[:size]
            else:
                frame = bytearray(max(FIRST_ALLOCATION, have))
            frame[:have] = memoryview(staging)[start:staged]
            self._frame, self._frame_size, self._filled = frame, size, have
            position = staged
            break
        if position:  # keep a partial size prefix at the front
            staging[:staged - position] = staging[position:staged]
        self._staged = staged - position
        if not self._staged:
            self._staging = None  # an idle connection keeps no buffer

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return True  # keep the transport: the answers to frames already read still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake()
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the server's side -----------------------------------------------------------
    async def read_frame(self, timeout_s: float) -> bytearray | memoryview | None:
        """The next request's payload; None when the client closed between frames.
        ProtocolError for a refused size or a frame the client left unfinished,
        TimeoutError after ``timeout_s`` without a whole frame. Asking for it says the
        server is done with the previous payload (it must hold no view of it)."""
        self._give_back()
        while True:
            if self._ready:
                frame = self._ready.popleft()
                if not self._ready and self._error is None:
                    self._unmute()
                return frame
            if self._error is not None:
                raise self._error
            if self._eof or self._lost:
                if self._frame is not None or self._staged:
                    raise ProtocolError("the client closed the connection inside a frame")
                return None
            self._unmute()
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            self._wait_deadline = loop.time() + timeout_s
            if self._idle_timer is None:
                self._idle_timer = loop.call_at(self._wait_deadline, self._check_idle)
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _check_idle(self) -> None:
        """The idle timer: one per connection, armed when a wait begins and none is
        armed, and moved on when it finds a later wait than the one it was armed for
        (a timer per wait, armed and cancelled for every request, cost more than the
        check). Times out a wait that reached its deadline."""
        self._idle_timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # not waiting: the next wait arms the timer again
        loop = asyncio.get_running_loop()
        if loop.time() >= self._wait_deadline:
            waiter.set_exception(asyncio.TimeoutError())
        else:
            self._idle_timer = loop.call_at(self._wait_deadline, self._check_idle)

    def _give_back(self) -> None:
        """The pool buffers of the frames handed out, back to the pool, but the one a
        frame being read or waiting in ``_ready`` still fills."""
        pooled = self._pooled
        keep = (1 if self._frame is not None and type(self._frame) is memoryview else 0) + sum(
            1 for frame in self._ready if type(frame) is memoryview)
        while len(pooled) > keep:
            self._pool.give(pooled.pop(0))

    def _unmute(self) -> None:
        if not (self._eof or self._lost) and not self.transport.is_reading():
            self.transport.resume_reading()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("connection lost")
        if self._write_paused:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._drain_waiter
            finally:
                self._drain_waiter = None

    def close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self.transport.close()
