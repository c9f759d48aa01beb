"""A real `chargeonce serve` for the tests, and a fault proxy that loses answers."""
from __future__ import annotations

import http.server
import os
import queue
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[3]
SHOP = "pytest"
SECRET = "sk_pytest_0123456789abcdef"
# The test merchant listens on loopback over http: allowed explicitly.
WEBHOOK_ARGS = ["--webhook-allow-http", "--webhook-allow-networks", "127.0.0.0/8"]
BASE_ARGS = ["--sim-slow", "2s", "--rate-limit", "0", "--no-demo-shop", *WEBHOOK_ARGS]


def binary() -> str:
    return os.environ.get("CHARGEONCE_BIN") or str(REPO / "target" / "debug" / "chargeonce")


class Server:
    """``chargeonce shops add`` then ``chargeonce serve`` on a temporary SQLite store
    (``other_shops``: more ``(shop, secret)`` pairs added the same way)."""

    def __init__(
        self,
        extra_args: Optional[List[str]] = None,
        webhook_url: Optional[str] = None,
        webhook_secret: Optional[str] = None,
        other_shops: Sequence[Tuple[str, str]] = (),
    ) -> None:
        self.dir = tempfile.mkdtemp(prefix="chargeonce-py-")
        db = self.database_url = f"sqlite://{self.dir}/db.sqlite"
        bin_ = binary()
        subprocess.run(
            [bin_, "shops", "add", SHOP, "--secret", SECRET, "--database-url", db],
            check=True, capture_output=True, timeout=60,
        )
        for shop, secret in other_shops:
            subprocess.run(
                [bin_, "shops", "add", shop, "--secret", secret, "--database-url", db],
                check=True, capture_output=True, timeout=60,
            )
        if webhook_url:
            subprocess.run(
                [bin_, "shops", "set-webhook", "--shop", SHOP, "--url", webhook_url,
                 "--secret", webhook_secret or "whsec_pytest_0123456789", "--database-url", db,
                 *WEBHOOK_ARGS],
                check=True, capture_output=True, timeout=60,
            )
        self.log = open(os.path.join(self.dir, "server.log"), "w+")
        self.proc = subprocess.Popen(
            [bin_, "serve", "--database-url", db, "--sim-ledger", f"{self.dir}/sim.sqlite",
             "--test-sim-ledger", f"{self.dir}/test-sim.sqlite",
             "--listen", "127.0.0.1:0", "--operator-listen", "127.0.0.1:0",
             *BASE_ARGS, *(extra_args or [])],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
        )
        self.operator_url = ""
        self.url = self._wait_for_url()
        # The rest of stdout must not fill the pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def make_key(self, mode: str = "test", scope: str = "full", shop: str = SHOP) -> str:
        """``chargeonce shops keys add`` against this server's store: the new
        key's secret (``sk_test_...`` for ``mode="test"``)."""
        made = subprocess.run(
            [binary(), "shops", "keys", "add", "--shop", shop, "--mode", mode, "--scope", scope,
             "--database-url", self.database_url],
            check=True, capture_output=True, text=True, timeout=60,
        )
        # "secret key (shown once, store it now): sk_test_..."
        match = re.search(r"secret key \(shown once, store it now\): (\S+)", made.stdout)
        if match is None:
            raise RuntimeError(f"chargeonce shops keys add printed no secret: {made.stdout!r} {made.stderr!r}")
        return match.group(1)

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + 30
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    self.log.seek(0)
                    raise RuntimeError(f"chargeonce serve exited: {self.log.read()[-2000:]}")
                continue
            # The operator listener's line comes first (the console, /metrics, /sim).
            operator = re.search(r"operator listener at (http://\S+)", line)
            if operator:
                self.operator_url = operator.group(1)
                continue
            match = re.search(r"listening on (http://\S+)", line)
            if match:
                return match.group(1)
        raise RuntimeError("chargeonce serve printed no address")

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _read_message(sock: socket.socket, buffer: bytes) -> "tuple[Optional[bytes], bytes, bytes]":
    """One HTTP/1.1 message with a Content-Length body (or none): (head, body, rest)."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b"", buffer
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head, rest[:length], rest[length:]


class Recorded(NamedTuple):
    """One request as the proxy received it."""

    method: str
    path: str  # without the query
    key: Optional[str]  # the Idempotency-Key header, None when absent
    body: bytes  # exactly the bytes of the body


class FaultProxy:
    """A threaded HTTP/1.1 proxy: one request per connection (``Connection: close``).

    ``lose(method, path, headers) -> bool`` decides per request; when true the
    request is forwarded, the server's whole answer read, and the client's
    connection closed without a byte of it.

    Every request received is recorded, in order of arrival, before it is
    forwarded: see :meth:`recorded`.
    """

    def __init__(self, upstream: str, lose: Callable[[str, str, dict], bool]) -> None:
        host, port = upstream.replace("http://", "").rstrip("/").split(":")
        self.upstream = (host, int(port))
        self.lose = lose
        self.lost = 0
        self._recorded: List[Recorded] = []
        self._record_lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            head, body, _ = _read_message(client, b"")
            if head is None:
                return
            lines = head.split(b"\r\n")
            method, target, _version = lines[0].decode("latin-1").split(" ", 2)
            headers = {}
            kept = [lines[0]]
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                lname = name.strip().lower().decode("latin-1")
                headers[lname] = value.strip().decode("latin-1")
                if lname not in ("connection", "keep-alive"):
                    kept.append(line)
            kept.append(b"Connection: close")
            path = target.split("?", 1)[0]
            with self._record_lock:
                self._recorded.append(Recorded(method, path, headers.get("idempotency-key"), body))
            drop = self.lose(method, path, headers)
            with socket.create_connection(self.upstream, timeout=60) as upstream:
                upstream.sendall(b"\r\n".join(kept) + b"\r\n\r\n" + body)
                answer = b""
                while True:
                    chunk = upstream.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            if drop:
                self.lost += 1
                return
            client.sendall(answer)
        except OSError:
            pass
        finally:
            client.close()

    def recorded(self, key: Optional[str] = None) -> List[Recorded]:
        """The requests received so far (a copy); with ``key``, only those with
        that ``Idempotency-Key``."""
        with self._record_lock:
            return [r for r in self._recorded if key is None or r.key == key]

    def stop(self) -> None:
        self.running = False
        self.listener.close()


def webhook_receiver() -> "Tuple[http.server.ThreadingHTTPServer, queue.Queue[Tuple[Dict[str, str], bytes]]]":
    """A merchant's webhook receiver on loopback: every POST is answered 200 and
    queued as ``(lowercased headers, raw body)``. Stop it with ``shutdown()``."""
    received: "queue.Queue[Tuple[Dict[str, str], bytes]]" = queue.Queue()

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            received.put(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, received
