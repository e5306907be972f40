"""One client connection's bytes: size-prefixed frames read into buffers of their own,
and responses written with flow control.

A request of a megabyte (a producer's batches) is received straight into the buffer
that then holds it while it is decoded, validated and written to the segment file: the
socket's bytes are copied once, by the kernel, where a stream reader would copy them
into its own buffer and out again. Other reads go into a scratch buffer the listener's
connections share (a read's bytes are taken out of it before any other read), and the
small frames (most requests but produce) are copied out of it whole.

The channel is muted as in Kafka's SocketServer (2.7.0 Processor: a channel is muted
from the moment a request is read until its response is sent): once a whole frame is
read, the socket is not read again until the server takes it (it reads one frame ahead
of the one it handles, no more), so a client's requests are handled one at a time and
in order, and a client that pipelines requests buffers them in its own socket, not in
the broker. A frame the server is already waiting for does not mute the socket: the
server takes it before the socket is read again. A frame is read no further than its
own end.

A size prefix below zero or above ``socket.request.max.bytes`` is refused before
anything is allocated (Kafka's InvalidReceiveException).

Memory follows what arrived, not what was announced. The start of a frame shorter than
``STAGING_BYTES`` is carried in a buffer of exactly its length until more of it comes;
a longer one needs the frame's whole size from the listener's ``MemoryPool``
(``queued.max.request.bytes``, KIP-72) before it gets a buffer of its own, and when the
pool refuses, the connection is not read (muted, as Kafka's Selector mutes a channel
whose receive cannot get memory) until memory comes back. A client that announces
100 MB and sends two bytes costs six bytes (with one 1 MiB buffer per such frame, 1,500
of them took a broker from 35 MiB to 1.5 GiB). The reservation goes back to the pool
when the server asks for the next frame, or when the connection closes.

A reserved frame of up to ``FIRST_ALLOCATION`` bytes (a producer's request is at most
about a megabyte) is received into a buffer of the listener's ``FramePool`` and handed
to the server as a view of it; the buffer goes back to the pool when the server asks
for the next frame, and is used again only once nothing holds a view of it any more. A
fresh megabyte per request cost the broker its zeroing and its page faults, as much as
the batch's CRC. A larger frame's buffer starts at ``FIRST_ALLOCATION`` and doubles as
its bytes come.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable, cast

from real_io.listener_limits import MemoryPool
from real_io.protocol import apis
from real_io.protocol.errors import ProtocolError

STAGING_BYTES = 16384  # a frame's start is carried, unreserved, while it is shorter
SCRATCH_BYTES = 2 * STAGING_BYTES  # what is carried, and room for a read of STAGING_BYTES at least
FIRST_ALLOCATION = 1 << 20
POOLED_BUFFERS = 4

Frame = bytearray | memoryview


class FramePool:
    """Buffers of ``FIRST_ALLOCATION`` bytes for frames, shared by a listener's
    connections; at most ``limit`` are kept while no frame uses them."""

    def __init__(self, limit: int = POOLED_BUFFERS):
        self.limit = limit
        self.free: list[bytearray] = []
        # every connection's reads outside a frame's buffer: a read's bytes are taken out
        # of it before the next read of any connection begins
        self.scratch = bytearray(SCRATCH_BYTES)

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


_NO_POOL = MemoryPool(0)


class FrameConnection(asyncio.BufferedProtocol):
    # From connection_made, which the loop calls before any other method (and the
    # server uses a connection only from its on_open call there on).
    transport: asyncio.Transport

    def __init__(self, max_request_bytes: int, on_open: Callable[["FrameConnection"], None],
                 pool: FramePool | None = None, memory: MemoryPool = _NO_POOL,
                 on_lost: Callable[[], None] | None = None, whole_frames: bool = False):
        """``whole_frames``: a frame larger than FIRST_ALLOCATION gets a buffer of its
        whole size at once instead of one that doubles as its bytes come (each doubling
        copies what came so far). For a peer broker's answers (real_io.peer_channels),
        whose size the broker's own request bounded; a client's requests keep the
        doubling, so that an announced size costs nothing until its bytes come."""
        self.max_request_bytes = max_request_bytes
        self._whole_frames = whole_frames
        self._on_open = on_open
        self._on_lost = on_lost
        self._pool = pool if pool is not None else FramePool()
        self._memory = memory
        # bytes read that are neither whole frames nor in a frame's buffer: a partial size
        # prefix, or the start of a frame below STAGING_BYTES (or one waiting for memory)
        self._carry: bytes | bytearray = b""
        self._frame: Frame | None = None  # a reserved frame, read into a buffer of its own
        self._frame_size = 0
        self._filled = 0
        self._reserved = 0  # what the frame being read holds of the memory pool
        self._pooled: bytearray | None = None  # the FramePool buffer it is read into
        self._awaiting_memory = False  # muted until the memory pool grants the carried frame its size
        self._abandoned = False  # the connection was lost inside a frame
        # whole frames the server has not taken yet, each with its reservation and pool buffer
        self._ready: deque[tuple[Frame, int, bytearray | None]] = deque()
        self._handed: list[tuple[int, bytearray | None]] = []  # those of frames the server holds
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
        # A stream server's transport reads and writes (a socket transport).
        self.transport = cast(asyncio.Transport, transport)
        self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):  # a frame past FIRST_ALLOCATION, grown as its bytes come
                assert type(frame) is bytearray  # (a pool buffer's view is its frame's full size)
                frame.extend(bytes(min(self._frame_size, 2 * len(frame)) - len(frame)))
            return memoryview(frame)[self._filled:]
        scratch, carry = self._pool.scratch, self._carry
        if carry:
            scratch[:len(carry)] = carry
        return memoryview(scratch)[len(carry):]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == self._frame_size:
                self._ready.append((self._frame, self._reserved, self._pooled))
                self._frame, self._reserved, self._pooled = None, 0, None
        else:
            self._take_frames(len(self._carry) + nbytes)
        if self._ready or self._error is not None:
            waiter = self._waiter
            if waiter is None or waiter.done() or len(self._ready) > 1 or self._error is not None:
                self.transport.pause_reading()  # muted until the server asks for the next frame
            # else the server waits for this very frame and takes it before the socket is
            # read again (its wake-up runs ahead of the next read): muting the socket only
            # to unmute it at once cost two epoll_ctl calls per request.
            self._wake()

    def _take_frames(self, staged: int) -> None:
        """The whole frames among the listener's scratch buffer's first ``staged`` bytes,
        copied out; what follows them is carried (copied too: the scratch buffer serves
        every connection's next read), or, a frame's start of ``STAGING_BYTES`` or more,
        goes into a buffer of its own once the memory pool grants the frame's size."""
        scratch, position = self._pool.scratch, 0
        self._carry = b""
        while staged - position >= 4:
            try:
                size = apis.frame_size(scratch[position:position + 4], self.max_request_bytes)
            except ProtocolError as refused:
                self._error = refused
                return
            start = position + 4
            if staged - start >= size:  # the whole frame is here
                self._ready.append((scratch[start:start + size], 0, None))
                position = start + size
                continue
            if staged - position < STAGING_BYTES:
                break  # carried as it came, until more of it comes
            self._frame_size = size
            if self._memory.try_allocate(size):
                self._start_frame(memoryview(scratch)[start:staged])
            else:
                self._carry = scratch[position:staged]
                self._awaiting_memory = True
                self.transport.pause_reading()
                self._memory.wait(self._memory_granted)
            return
        if position < staged:
            self._carry = scratch[position:staged]

    def _start_frame(self, have: memoryview) -> None:
        """The reserved frame's first bytes into its buffer: one of the pool's for a frame
        of up to FIRST_ALLOCATION, else FIRST_ALLOCATION bytes that double as it comes."""
        size = self._frame_size
        self._reserved = size
        frame: Frame
        if size <= FIRST_ALLOCATION:
            self._pooled = self._pool.take()
            frame = memoryview(self._pooled)[:size]
        else:
            frame = bytearray(size if self._whole_frames else FIRST_ALLOCATION)
        frame[:len(have)] = have
        self._frame, self._filled = frame, len(have)

    def _memory_granted(self) -> None:
        """Called by the memory pool, in line, once memory came back."""
        if not self._awaiting_memory or self._lost:
            return
        if not self._memory.try_allocate(self._frame_size):
            self._memory.wait(self._memory_granted)
            return
        self._awaiting_memory = False
        carry, self._carry = self._carry, b""
        self._start_frame(memoryview(carry)[4:])
        if not self._ready and self._error is None:
            self._unmute()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return True  # keep the transport: the answers to frames already read still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._release_unfinished()  # a frame being read never finishes now
        if self._on_lost is not None:
            self._on_lost()
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
                frame, reserved, pooled = self._ready.popleft()
                if reserved or pooled is not None:
                    self._handed.append((reserved, pooled))
                if not self._ready and self._error is None:
                    self._unmute()
                return frame
            if self._error is not None:
                raise self._error
            if self._eof or self._lost:
                if self._frame is not None or self._carry or self._abandoned:
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
        """The memory and pool buffers of the frames handed out, back to their pools."""
        handed = self._handed
        if handed:
            for reserved, pooled in handed:
                if pooled is not None:
                    self._pool.give(pooled)
                if reserved:
                    self._memory.release(reserved)
            handed.clear()

    def _release_unfinished(self) -> None:
        """What the frame being read holds, back: it will not be finished."""
        if self._awaiting_memory:
            self._awaiting_memory = False
            self._memory.cancel(self._memory_granted)
        if self._frame is not None:
            if self._pooled is not None:
                self._pool.give(self._pooled)
            if self._reserved:
                self._memory.release(self._reserved)
            self._frame, self._reserved, self._pooled = None, 0, None
            self._abandoned = True

    def _release_all(self) -> None:
        """Everything the connection holds, back: the server reads no more frames."""
        self._release_unfinished()
        self._carry = b""
        self._handed.extend((reserved, pooled) for _, reserved, pooled in self._ready)
        self._ready.clear()
        self._give_back()

    def _unmute(self) -> None:
        if not (self._eof or self._lost or self._awaiting_memory) and not self.transport.is_reading():
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
        self._release_all()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self.transport.close()
