"""A small app for the Preview tests, run inside a Session's sandbox.

Usage: python3 preview_app.py PORT MARKER_DIR NAME

Python standard library only (the sandbox image has nothing else). It
listens on 127.0.0.1:PORT with HTTP/1.1 keep-alive and answers:

  /echo        any method: the request as JSON (method, path, host, some
               headers, body)
  /cookie      two Set-Cookie headers
  /page.html   a small HTML page
  /gzip.html   a gzip-encoded HTML page
  /sse         text/event-stream: "one" at once, "two" after /sse-next
  /stream      an endless body; writes MARKER_DIR/stream-released when the
               reader goes away
  /hang        never answers; writes MARKER_DIR/hang-released when the
               peer closes the connection
  /download    ?n=BYTES of zeros, with a Content-Length
  /hello       a few bytes
  WebSocket    any path with Upgrade: websocket: a minimal RFC 6455 echo
               server that first sends {"host","origin","protocol","path"}
               and picks the "vite-hmr" subprotocol when offered
  otherwise    "app NAME PATH" as text
"""

import base64
import gzip
import hashlib
import http.server
import json
import os
import struct
import sys
import threading

PORT, MARKERS, NAME = int(sys.argv[1]), sys.argv[2], sys.argv[3]
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
sse_next = threading.Event()


def mark(name):
    os.makedirs(MARKERS, exist_ok=True)
    with open(os.path.join(MARKERS, name), "w") as f:
        f.write("released\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, *args):
        pass

    def reply(self, status, ctype, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        path = self.path.split("?", 1)[0]
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket(path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if path == "/echo":
            out = {
                "name": NAME,
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("Host"),
                "cookie": self.headers.get("Cookie"),
                "origin": self.headers.get("Origin"),
                "authorization": self.headers.get("Authorization"),
                "x_api_key": self.headers.get("X-Api-Key"),
                "accept_encoding": self.headers.get("Accept-Encoding"),
                "body": body.decode("utf-8", "replace"),
            }
            self.reply(200, "application/json", json.dumps(out).encode())
        elif path == "/cookie":
            self.reply(200, "text/plain", b"ok", [
                ("Set-Cookie", "app=one; Path=/; HttpOnly; SameSite=Lax"),
                ("Set-Cookie", "second=two; Max-Age=60"),
            ])
        elif path == "/page.html":
            page = "<!doctype html><html><head><title>%s</title></head><body>page %s</body></html>" % (NAME, NAME)
            self.reply(200, "text/html; charset=utf-8", page.encode())
        elif path == "/gzip.html":
            page = "<!doctype html><html><head><title>gz</title></head><body>" + "compressed %s " % NAME * 2000 + "</body></html>"
            self.reply(200, "text/html", gzip.compress(page.encode()), [("Content-Encoding", "gzip")])
        elif path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"data: one\n\n")
            self.wfile.flush()
            sse_next.wait(60)
            self.wfile.write(b"data: two\n\n")
            self.close_connection = True
        elif path == "/sse-next":
            sse_next.set()
            self.reply(200, "text/plain", b"next")
        elif path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"s" * 65536
            try:
                while True:
                    self.wfile.write(chunk)
            except OSError:
                mark("stream-released")
            self.close_connection = True
        elif path == "/hang":
            try:
                while self.connection.recv(65536):
                    pass
            except OSError:
                pass
            mark("hang-released")
            self.close_connection = True
        elif path == "/download":
            n = int(self.path.split("n=", 1)[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = bytes(256 << 10)
            while n > 0:
                self.wfile.write(chunk[: min(n, len(chunk))])
                n -= len(chunk)
        elif path == "/hello":
            self.reply(200, "text/plain", b"hello\n")
        else:
            self.reply(200, "text/plain", ("app %s %s" % (NAME, path)).encode())

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = handle_any

    # ---- RFC 6455 --------------------------------------------------------
    def websocket(self, path):
        key = self.headers.get("Sec-WebSocket-Key", "").encode()
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest()).decode()
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        protocol = "vite-hmr" if "vite-hmr" in offered else ""
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        if protocol:
            self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        hello = {"host": self.headers.get("Host"), "origin": self.headers.get("Origin"), "protocol": protocol, "path": path}
        self.send_frame(1, json.dumps(hello).encode())
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                break
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack("!H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytearray(self.rfile.read(n))
            for i in range(len(data)):
                data[i] ^= mask[i % 4]
            if opcode == 8:
                self.send_frame(8, bytes(data[:2]))
                break
            if opcode == 9:
                self.send_frame(10, bytes(data))
            elif opcode in (1, 2):
                self.send_frame(opcode, bytes(data))
        self.close_connection = True

    def send_frame(self, opcode, data):
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        self.wfile.write(head + data)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


Server(("127.0.0.1", PORT), Handler).serve_forever()
