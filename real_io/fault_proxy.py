"""A user-space TCP proxy that puts network faults on every link of a local cluster.

One process serves a whole cluster. A *link* is a listening port on 127.0.0.1 named by
its (source node, destination node) pair (node names as in faults/nodes.py) that
forwards each connection to one target HOST:PORT. Faults act on *directions* between
nodes, not on links: blocking ``a -> b`` holds the requests of ``a``'s connections to
``b`` and the responses on ``b``'s connections to ``a``, as a firewall dropping the
packets from ``a`` to ``b`` would. The simulation cuts the same directed pairs
(sim/network.py), computed once by faults/links.py ``cut_links``.

Why these choices:

- A blocked direction stops reading from its sender as well as forwarding, so the
  sender's kernel buffers fill and its writes stall (back-pressure): memory stays
  bounded (``QUEUE_CHUNKS`` queued chunks, one read and one being written, and asyncio's
  own buffers per direction of a connection), and what was held flows in order when the direction heals,
  as TCP delivers what it retransmits after a partition.
- A connection accepted while both directions between its two nodes are blocked is not
  connected onwards until one opens. A one-way cut lets connections be made: the
  scenario language's ``cut`` loses the messages from its sources to its destinations
  and lets the others through (the simulation's meaning, faults/links.py), which a
  firewall dropping one direction's packets would not (it drops the handshake too);
  the proxy follows the model, so both bindings run the same scenario. The kernel
  completes the client's handshake with the listener whatever the proxy does, so a
  client cut both ways sees a connection on which nothing arrives (as after a dropped
  SYN, minus the connect timeout). A target that refuses resets the client.
- ``delay`` holds each chunk for its time before forwarding it; chunks keep their order
  (a chunk never overtakes one before it, even if the delay shrinks meanwhile).
- A peer's reset or a failed write ends that connection (its other side is reset too,
  as TCP would tell it) and nothing else; a bad control command gets an error answer.

Faults are kept by owner, as the simulation's ``add_cuts``/``remove_cuts``: each fault id
has its own set of cut directions and its own delays, so overlapping faults heal
independently; ``block``/``delay`` without a fault id are the manual owner's.

The control port speaks one JSON object a line each way (docs/real-io.md lists the
commands; real_io/fault_proxy_client.py is its client): a request ``{"op": ..., ...}``
is answered ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``, and a line that is
no valid command is answered with an error, never by a crash.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Awaitable, Callable, Hashable, Iterable

Direction = tuple[str, str]
MANUAL: Hashable = None  # the owner of block()/delay() without a fault id

CHUNK_BYTES = 16 * 1024
QUEUE_CHUNKS = 16  # per direction of a connection: with one chunk read and one being written, 288 KiB held
READER_LIMIT_BYTES = 64 * 1024  # asyncio's StreamReader stops reading the socket past twice this
CONNECT_TIMEOUT_S = 10.0
_EOF = object()


class FaultState:
    """Which directions are blocked and delayed, by owner, and one gate per direction
    that pipes wait on while it is blocked."""

    def __init__(self) -> None:
        self.cuts: dict[Hashable, set[Direction]] = {}
        self.delays: dict[Hashable, dict[Direction, float]] = {}
        self._gates: dict[Direction, asyncio.Event] = {}

    def is_blocked(self, direction: Direction) -> bool:
        return any(direction in cut for cut in self.cuts.values())

    def delay_ms(self, direction: Direction) -> float:
        """The largest delay any owner set on the direction (overlapping faults do not add up)."""
        return max((d.get(direction, 0.0) for d in self.delays.values()), default=0.0)

    def gate(self, direction: Direction) -> asyncio.Event:
        found = self._gates.get(direction)
        if found is None:
            found = self._gates[direction] = asyncio.Event()
            if not self.is_blocked(direction):
                found.set()
        return found

    async def wait_any_open(self, *directions: Direction) -> None:
        """Return once some direction is open."""
        while all(self.is_blocked(d) for d in directions):
            waits = [asyncio.ensure_future(self.gate(d).wait()) for d in directions]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()

    async def wait_open(self, *directions: Direction) -> None:
        """Return once every direction is open at the same moment."""
        while True:
            for direction in directions:
                await self.gate(direction).wait()
            if not any(self.is_blocked(d) for d in directions):
                return

    def set_cuts(self, owner: Hashable, directions: Iterable[Direction]) -> None:
        cut = set(directions)
        if cut:
            self.cuts[owner] = cut
        else:
            self.cuts.pop(owner, None)
        self._refresh()

    def block(self, direction: Direction) -> None:
        self.cuts.setdefault(MANUAL, set()).add(direction)
        self._refresh()

    def unblock(self, direction: Direction) -> None:
        """Lift the manual block; a fault's cut of the same direction stays."""
        manual = self.cuts.get(MANUAL, set())
        manual.discard(direction)
        if not manual:
            self.cuts.pop(MANUAL, None)
        self._refresh()

    def set_delay(self, owner: Hashable, directions: Iterable[Direction], ms: float) -> None:
        delays = self.delays.setdefault(owner, {})
        for direction in directions:
            if ms > 0:
                delays[direction] = ms
            else:
                delays.pop(direction, None)
        if not delays:
            del self.delays[owner]

    def clear(self, owner: Hashable) -> bool:
        """End one owner's cuts and delays; whether it had any."""
        had = self.cuts.pop(owner, None) is not None
        had = self.delays.pop(owner, None) is not None or had
        self._refresh()
        return had

    def heal(self) -> list:
        """End everything; the fault ids that had something (the manual owner left out)."""
        owners = set(self.cuts) | set(self.delays)
        self.cuts.clear()
        self.delays.clear()
        self._refresh()
        return sorted((o for o in owners if o is not MANUAL), key=repr)

    def _refresh(self) -> None:
        for direction, gate in self._gates.items():
            if self.is_blocked(direction):
                gate.clear()
            else:
                gate.set()


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a peer's reset is passed on."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


@dataclass
class _Pipe:
    """One direction of one connection: a reader task fills a bounded queue, a writer
    task empties it, each waiting while the direction is blocked."""
    direction: Direction
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(QUEUE_CHUNKS))
    held_bytes: int = 0  # read from the sender, not yet handed to the receiver's socket


class Connection:
    """One client connection accepted on a link and, once the handshake may go on, its
    connection to the target."""

    def __init__(self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.link = link
        self.client = (reader, writer)
        self.server: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.pipes = (_Pipe((link.src, link.dst)), _Pipe((link.dst, link.src)))
        self.task: asyncio.Task | None = None
        self.aborted = False

    @property
    def held_bytes(self) -> int:
        return sum(p.held_bytes for p in self.pipes)

    async def run(self) -> None:
        faults = self.link.faults
        try:
            await faults.wait_any_open(*(p.direction for p in self.pipes))
            host, port = self.link.target
            try:
                self.server = await asyncio.wait_for(
                    asyncio.open_connection(host, port, limit=READER_LIMIT_BYTES), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError):
                return  # the target refused or is gone: the client is reset (finally)
            if self.aborted:
                # reset while the connect completed: Python 3.11's wait_for can swallow the
                # cancellation then (fixed in 3.12), and the pumps would run on forever
                return
            (client_reader, client_writer), (server_reader, server_writer) = self.client, self.server
            forward, backward = self.pipes
            pumps = [self._read(client_reader, forward), self._write(forward, server_writer),
                     self._read(server_reader, backward), self._write(backward, client_writer)]
            tasks = [asyncio.ensure_future(p) for p in pumps]
            try:
                await asyncio.gather(*tasks)
                for _, writer in (self.client, self.server):
                    writer.close()
            finally:
                for task in tasks:
                    task.cancel()
        except (OSError, EOFError):
            pass  # a peer's reset or a broken write: the whole connection ends
        finally:
            self.abort()

    def abort(self) -> None:
        """Reset both sides now (``reset`` and the end of a failed connection)."""
        self.aborted = True
        _reset(self.client[1])
        _reset(self.server[1] if self.server else None)
        self.link.connections.discard(self)

    async def _read(self, reader: asyncio.StreamReader, pipe: _Pipe) -> None:
        faults, loop = self.link.faults, asyncio.get_running_loop()
        while True:
            await faults.wait_open(pipe.direction)  # blocked: the sender's bytes stay in its socket
            data = await reader.read(CHUNK_BYTES)
            if not data:
                await pipe.queue.put(_EOF)
                return
            pipe.held_bytes += len(data)
            due = loop.time() + faults.delay_ms(pipe.direction) / 1000.0
            await pipe.queue.put((due, data))

    async def _write(self, pipe: _Pipe, writer: asyncio.StreamWriter) -> None:
        faults, loop = self.link.faults, asyncio.get_running_loop()
        while True:
            item = await pipe.queue.get()
            if item is not _EOF:
                due, data = item
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
            await faults.wait_open(pipe.direction)
            if item is _EOF:
                if writer.can_write_eof():
                    writer.write_eof()  # a half close passes on; the other direction goes on
                return
            writer.write(data)
            pipe.held_bytes -= len(data)
            await writer.drain()


CLOSE_WAIT_S = 1.0  # how long closing a link waits for its accept callbacks and listener


class Link:
    """A listener for the (src, dst) pair forwarding every connection to ``target``."""

    def __init__(self, src: str, dst: str, target: tuple[str, int], faults: FaultState):
        self.src, self.dst, self.target, self.faults = src, dst, target, faults
        self.connections: set[Connection] = set()
        self.handlers: set[asyncio.Task] = set()  # the accept callbacks, until they return
        self.listener: asyncio.AbstractServer | None = None
        self.port = 0

    async def open(self, port: int) -> None:
        self.listener = await asyncio.start_server(self._accept, "127.0.0.1", port, limit=READER_LIMIT_BYTES)
        self.port = self.listener.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self, reader, writer)
        self.connections.add(connection)
        handler = asyncio.current_task()
        assert handler is not None
        self.handlers.add(handler)
        # a task of its own that ``reset`` may cancel: asyncio logs a cancelled accept callback
        connection.task = asyncio.ensure_future(connection.run())
        try:
            await asyncio.wait([connection.task])
        finally:
            self.handlers.discard(handler)

    def reset(self) -> int:
        """Reset every connection of the link; how many there were."""
        connections = list(self.connections)
        for connection in connections:
            if connection.task is not None:
                connection.task.cancel()
            connection.abort()
        return len(connections)

    async def close(self) -> None:
        """Stop listening, reset every connection and wait until their callbacks have
        returned (at the process's end asyncio.run would cancel them, and log it)."""
        if self.listener is not None:
            self.listener.close()
        self.reset()
        if self.handlers:
            await asyncio.wait(list(self.handlers), timeout=CLOSE_WAIT_S)
        if self.listener is not None:
            # Python 3.11's wait_closed also waits for every transport the listener made,
            # which a connection reset while its accept callback had not yet run still
            # holds: bounded, so that a remove_link never hangs the control port.
            try:
                await asyncio.wait_for(self.listener.wait_closed(), CLOSE_WAIT_S)
            except asyncio.TimeoutError:
                pass

    def describe(self) -> dict:
        return {"src": self.src, "dst": self.dst, "port": self.port,
                "target": f"{self.target[0]}:{self.target[1]}",
                "connections": len(self.connections),
                "held_bytes": sum(c.held_bytes for c in self.connections)}


class FaultProxy:
    """Every link of the cluster and the faults on them."""

    def __init__(self) -> None:
        self.faults = FaultState()
        self.links: dict[Direction, Link] = {}

    async def add_link(self, src: str, dst: str, target: tuple[str, int], port: int = 0) -> int:
        if (src, dst) in self.links:
            raise ValueError(f"a link {src} -> {dst} exists already (port {self.links[(src, dst)].port})")
        link = Link(src, dst, target, self.faults)
        await link.open(port)
        self.links[(src, dst)] = link
        return link.port

    async def remove_link(self, src: str, dst: str) -> None:
        link = self.links.pop((src, dst), None)
        if link is None:
            raise KeyError(f"no link {src} -> {dst}")
        await link.close()

    def reset(self, a: str, b: str) -> int:
        """Reset the connections of both links between the two nodes; how many."""
        return sum(self.links[pair].reset() for pair in ((a, b), (b, a)) if pair in self.links)

    async def close(self) -> None:
        for pair in list(self.links):
            await self.remove_link(*pair)


# --- the control port ---------------------------------------------------------------

CONTROL_LINE_BYTES = 1024 * 1024  # a set_cuts of every pair of a large cluster fits
MAX_NAME_CHARS = 200
MAX_DELAY_MS = 3_600_000.0
PARENT_POLL_S = 0.2


class CommandError(Exception):
    """A control command that cannot be carried out; its text is the error answer."""


def _node(request: dict, key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise CommandError(f"{key!r} must be a node name (a non-empty string of at most {MAX_NAME_CHARS} chars)")
    return value


def _pair(request: dict) -> Direction:
    return _node(request, "src"), _node(request, "dst")


def _fault_id(request: dict) -> Hashable:
    value = request.get("fault_id")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise CommandError("'fault_id' must be an integer or a string")
    return value


def _ms(request: dict) -> float:
    value = request.get("ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_DELAY_MS:
        raise CommandError(f"'ms' must be a number from 0 to {MAX_DELAY_MS:.0f}")
    return float(value)


def _links(request: dict) -> list[Direction]:
    value = request.get("links")
    if not isinstance(value, list):
        raise CommandError("'links' must be a list of [src, dst] pairs")
    pairs = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2:
            raise CommandError("'links' must be a list of [src, dst] pairs")
        pairs.append(_pair({"src": item[0], "dst": item[1]}))
    return pairs


def _target(request: dict) -> tuple[str, int]:
    value = request.get("target")
    host, _, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError("'target' must be HOST:PORT")
    return host, int(port)


def _port(request: dict) -> int:
    value = request.get("port", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 65536:
        raise CommandError("'port' must be an integer from 0 to 65535 (0: any free port)")
    return value


def _state(proxy: FaultProxy) -> dict:
    def owned(by: dict) -> list:
        return sorted(({"fault_id": owner, **entry(value)} for owner, value in by.items()), key=repr)

    def entry(value: Any) -> dict:
        if isinstance(value, set):
            return {"links": sorted([list(d) for d in value])}
        return {"delays": sorted([[*d, ms] for d, ms in value.items()])}
    return {"links": [proxy.links[p].describe() for p in sorted(proxy.links)],
            "cuts": owned(proxy.faults.cuts), "delays": owned(proxy.faults.delays)}


async def _add_link(proxy: FaultProxy, r: dict) -> dict:
    src, dst = _pair(r)
    return {"port": await proxy.add_link(src, dst, _target(r), _port(r))}


async def _remove_link(proxy: FaultProxy, r: dict) -> dict:
    await proxy.remove_link(*_pair(r))
    return {}


def _delay(proxy: FaultProxy, r: dict) -> dict:
    proxy.faults.set_delay(_fault_id(r) if "fault_id" in r else MANUAL, [_pair(r)], _ms(r))
    return {}


def _block(proxy: FaultProxy, r: dict) -> dict:
    proxy.faults.block(_pair(r))
    return {}


def _unblock(proxy: FaultProxy, r: dict) -> dict:
    proxy.faults.unblock(_pair(r))
    return {}


def _set_cuts(proxy: FaultProxy, r: dict) -> dict:
    proxy.faults.set_cuts(_fault_id(r), _links(r))
    return {}


def _set_delays(proxy: FaultProxy, r: dict) -> dict:
    proxy.faults.set_delay(_fault_id(r), _links(r), _ms(r))
    return {}


Handler = Callable[[FaultProxy, dict], "dict | Awaitable[dict]"]
COMMANDS: dict[str, Handler] = {
    "ping": lambda proxy, r: {},
    "add_link": _add_link,
    "remove_link": _remove_link,
    "state": lambda proxy, r: _state(proxy),
    "block": _block,
    "unblock": _unblock,
    "delay": _delay,
    "set_cuts": _set_cuts,
    "set_delays": _set_delays,
    "clear": lambda proxy, r: {"had": proxy.faults.clear(_fault_id(r))},
    "heal": lambda proxy, r: {"ended": proxy.faults.heal()},
    "reset": lambda proxy, r: {"connections": proxy.reset(*_pair(r))},
}


async def answer(proxy: FaultProxy, line: bytes) -> dict:
    """The answer to one control line. Every failure is an answer: the proxy serves a
    cluster's every link, so a bad command must not take it down."""
    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise CommandError("a command is a JSON object")
        op = request.get("op")
        handler = COMMANDS.get(op) if isinstance(op, str) else None
        if handler is None:
            raise CommandError(f"unknown op {request.get('op')!r}; known: {', '.join(sorted(COMMANDS))}")
        result = handler(proxy, request)
        # (isinstance, not iscoroutine: mypy narrows both ways; a handler answers a dict or a coroutine)
        answer = result if isinstance(result, dict) else await result
        return {"ok": True, **answer}
    except KeyError as error:  # no such link (str() would quote it)
        return {"ok": False, "error": error.args[0]}
    except (CommandError, ValueError) as error:  # ValueError: bad JSON or UTF-8, a link twice
        return {"ok": False, "error": str(error)}
    except RecursionError:  # JSON nested deeper than the parser goes
        return {"ok": False, "error": "the command is nested too deeply"}
    except OSError as error:  # a port in use
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}


async def _control(proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # longer than CONTROL_LINE_BYTES: the stream cannot be resynchronised
                writer.write(b'{"ok": false, "error": "command line too long"}\n')
                await writer.drain()
                return
            if not line:
                return
            if line.strip():
                writer.write(json.dumps(await answer(proxy, line)).encode() + b"\n")
                await writer.drain()
    except OSError:
        pass  # the controller went away
    finally:
        writer.close()


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    """Stop when the parent is gone: a launcher killed with SIGKILL leaves no proxy behind
    (the orphan is re-parented, so its parent id changes)."""
    while not stop.is_set():
        if os.getppid() != parent:
            stop.set()
        await asyncio.sleep(PARENT_POLL_S)


async def serve(host: str, port: int, parent: int | None) -> int:
    proxy = FaultProxy()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    control = await asyncio.start_server(partial(_control, proxy), host, port, limit=CONTROL_LINE_BYTES)
    bound_host, bound_port = control.sockets[0].getsockname()[:2]
    watcher = asyncio.ensure_future(_watch_parent(parent, stop) if parent is not None else stop.wait())
    print(f"fault proxy control on {bound_host}:{bound_port}", flush=True)
    await stop.wait()
    watcher.cancel()
    control.close()
    await proxy.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_io.fault_proxy", description=__doc__.split("\n")[0])
    parser.add_argument("--control-host", default="127.0.0.1")
    parser.add_argument("--control-port", type=int, default=0, help="0 (the default): any free port")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit once this process is no longer the parent (default: the parent at start; "
                             "a launcher passes its own pid, so that dying before the proxy looks is noticed too)")
    parser.add_argument("--outlive-parent", action="store_true",
                        help="keep running when the parent exits (a detached cluster: isrlab cluster down stops it)")
    args = parser.parse_args(argv)
    try:
        parent = None if args.outlive_parent else os.getppid() if args.parent_pid is None else args.parent_pid
        return asyncio.run(serve(args.control_host, args.control_port, parent))
    except OSError as error:
        print(f"fault proxy: cannot listen on {args.control_host}:{args.control_port}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
