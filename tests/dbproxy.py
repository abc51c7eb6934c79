"""A TCP proxy on a loopback port in front of PostgreSQL, to give a gateway a database outage without touching the
real server: `cut()` closes every connection and refuses new ones (the database is down), `freeze()` keeps them
open and relays nothing, new ones accepted and never answered (a frozen database), `restore()` relays again."""

import socket
import threading
import time

OPEN, CUT, FROZEN = "open", "cut", "frozen"


class TcpProxy:
    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.state = OPEN
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._unrelayed: set[socket.socket] = set()  # accepted while frozen (a socket takes no attributes)
        self._closed = False
        threading.Thread(target=self._accept, name="dbproxy-accept", daemon=True).start()

    def cut(self) -> None:
        self.state = CUT
        self._close_all()

    def freeze(self) -> None:
        self.state = FROZEN

    def restore(self) -> None:
        """Relay again; connections accepted while frozen (never relayed) are closed."""
        with self._lock:
            unrelayed = list(self._unrelayed)
        for sock in unrelayed:
            self._close(sock)
        self.state = OPEN

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.state == CUT:
                client.close()
                continue
            self._track(client)
            if self.state == FROZEN:
                with self._lock:
                    self._unrelayed.add(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                self._close(client)
                continue
            server.settimeout(None)
            self._track(server)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), name="dbproxy-pump", daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self.state == FROZEN:  # held, not relayed, until restore() or cut()
                    time.sleep(0.01)
                if self.state == CUT:
                    break
                sink.sendall(data)
        except OSError:
            pass
        self._close(source)
        self._close(sink)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
            self._unrelayed.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _close_all(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            self._close(sock)
