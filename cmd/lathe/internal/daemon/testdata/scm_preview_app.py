"""The app of the Source Control and Preview browser test, run inside a
Session's sandbox: python3 scm_preview_app.py PORT

Every GET answers a small HTML page with a button to pick, and sets the
cookie preview_app=baked on its own (the Preview's) origin: partitioned,
since in the workbench's frame it is a third-party cookie. It prints
"listening on PORT" once it accepts connections.
"""

import http.server
import sys

PORT = int(sys.argv[1])
PAGE = b"""<!doctype html><html><head><title>demo app</title></head>
<body><h1 id="greeting">Hello from the app</h1>
<button id="go" class="primary" data-lathe-source="src/App.jsx:12:5">Press me</button></body></html>"""


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Set-Cookie", "preview_app=baked; Path=/; SameSite=None; Secure; Partitioned")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("listening on %d" % PORT, flush=True)
server.serve_forever()
