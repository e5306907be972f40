"""A TCP proxy between a client and ZooKeeper that a test can stall and cut, to lose a
connection at a chosen moment: a request held before the server (never applied) or an
answer held after it (applied, answer lost)."""
from __future__ import annotations

import socket
import threading
import time


class Proxy:
    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.hold_requests = threading.Event()  # client -> server bytes wait
        self.hold_answers = threading.Event()  # server -> client bytes wait
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._generation = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._pairs.append((client, server))
                generation = self._generation
            threading.Thread(target=self._pipe, args=(client, server, self.hold_requests, generation),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.hold_answers, generation),
                             daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, hold: threading.Event, generation: int) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while hold.is_set() and generation == self._generation:
                    time.sleep(0.002)
                if generation != self._generation:
                    break  # cut while held: these bytes are never delivered
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Drop every connection now (with what is held); new ones flow freely."""
        with self._lock:
            self._generation += 1
            pairs, self._pairs = self._pairs, []
        self.hold_requests.clear()
        self.hold_answers.clear()
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()
