"""An HTTP proxy in front of the S3 store that injects the faults real
object stores show: a 503 SlowDown, and replies whose headers arrive and
whose body is then cut by a connection reset, stalls, or ends short. Every `every`-th request of the chosen methods gets the
next fault; the rest pass through unchanged. Requests are forwarded with
their own headers (the signature covers the Host the client sent)."""

import http.client
import http.server
import socket
import struct
import threading
import time

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
INVALID_TOKEN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidToken</Code>'
                 b"<Message>The provided token is malformed or otherwise invalid.</Message></Error>")
EXPIRED_TOKEN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ExpiredToken</Code>'
                 b"<Message>The provided token has expired.</Message></Error>")
REFUSALS = {"503": (503, "Slow Down", SLOW_DOWN), "400": (400, "Bad Request", INVALID_TOKEN),
            "400-expired": (400, "Bad Request", EXPIRED_TOKEN)}
HOP_BY_HOP = {"transfer-encoding", "connection", "keep-alive"}


class FaultProxy:
    """Listens on 127.0.0.1 (`port`) in front of the store at `target`.
    `faults` are among "503", "400" (a session token refused),
    "400-expired" (one expired), "reset", "stall" and "truncate"; `injected`
    counts the faults sent, by kind."""

    def __init__(self, target, faults, every=3, methods=("GET", "HEAD"), stall_s=30.0, at=None, match="",
                 head_cut="first", on_request=None):
        self.target, self.faults, self.every, self.methods, self.stall_s = target, faults, every, methods, stall_s
        self.at = at  # the numbers (from 1) of the requests to fault, in place of every `every`-th
        self.match = match  # only requests whose path holds it are counted and faulted
        # A cut reply without a body (a HEAD's) ends after its first header
        # ("first"), or holds only its Last-Modified ("date": as a cut where
        # the size comes last, as S3's own replies order it).
        self.head_cut = head_cut
        self.on_request = on_request  # called with each request's method and path before it is forwarded
        self.injected = {f: 0 for f in faults}
        self.requests = 0
        self.log = []
        self.headers = []  # (method, path, {header name in lower case: value}) of each request
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.proxy = self
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url_query(self):
        """The query that sends a URL's requests through this proxy."""
        return f"endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def draw(self, method, what):
        """The fault for the next request of `method`, or None; `what` (its
        path and range) goes to `log` beside it."""
        with self._lock:
            fault = None
            if method in self.methods and self.match in what:
                self.requests += 1
                if (self.requests in self.at) if self.at is not None else self.requests % self.every == 0:
                    fault = self.faults[(self.requests // self.every) % len(self.faults)]
                    self.injected[fault] += 1
            self.log.append((method, what, fault))
            return fault

    def total(self):
        with self._lock:
            return sum(self.injected.values())

    def close(self):
        self._server.shutdown()
        self._server.server_close()


def _head(status, reason, headers):
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle(self):  # a connection this proxy reset ends here
        try:
            super().handle()
        except (OSError, ValueError):
            pass

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    def _forward(self):
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with proxy._lock:
            proxy.headers.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        fault = proxy.draw(self.command, f"{self.path} {self.headers.get('Range', '')}")
        if proxy.on_request is not None:
            proxy.on_request(self.command, self.path)
        if fault in REFUSALS:
            return self._refuse(*REFUSALS[fault])
        upstream = http.client.HTTPConnection("127.0.0.1", proxy.target, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            reply = upstream.getresponse()
            payload = reply.read()
            headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in HOP_BY_HOP]
            if self.command != "HEAD" and not any(k.lower() == "content-length" for k, _ in headers):
                headers.append(("Content-Length", str(len(payload))))
            head = _head(reply.status, reply.reason, headers)
            if fault is None:
                self.wfile.write(head + payload)
                return None
            if payload:  # half the body
                self.wfile.write((head + payload)[:len(head) + len(payload) // 2])
            elif proxy.head_cut == "date":
                dated = [(k, v) for k, v in headers if k.lower() == "last-modified"]
                self.wfile.write(_head(reply.status, reply.reason, dated)[:-2])
            else:  # its size and date never come
                self.wfile.write(head[:head.index(b"\r\n", head.index(b"\r\n") + 2) + 2])
            self.wfile.flush()
            if fault == "stall":
                time.sleep(proxy.stall_s)
            return self._close(reset=fault != "truncate")
        finally:
            upstream.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    def _refuse(self, status, reason, body):
        """An S3 error reply (a HEAD's without its body)."""
        self.wfile.write(_head(status, reason, [("Content-Type", "application/xml"),
                                                ("Content-Length", str(len(body)))]))
        if self.command != "HEAD":
            self.wfile.write(body)

    def _close(self, reset):
        """Ends the connection mid-reply: with a TCP reset, as a dropped
        peer does, or an orderly close, which leaves the body cut short."""
        self.wfile.flush()
        if reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
        self.connection.close()
