"""Something else on a node's port: it answers ``GET /v1/health`` as a node without proofs
would (with the owner's ``home`` key, which any account can compute) and tries its luck with
a proof, or relays the client's challenge to the owner's real node on another port; it logs
every request it gets, with its ``Authorization`` header, one JSON line each on stdout.
Standard library only, run as its own process (as another account where the test can):
``python -c "$(this file)" PORT HOME_KEY [RELAY_URL]``.
"""

import json
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
HOME_KEY = sys.argv[2]
RELAY = sys.argv[3] if len(sys.argv) > 3 else ""


class Squatter(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        print(
            json.dumps(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                }
            ),
            flush=True,
        )
        if RELAY and self.path.startswith("/v1/health"):
            with urllib.request.urlopen(RELAY + self.path, timeout=5) as r:  # the real node
                body = r.read()
        else:
            body = json.dumps(
                {
                    "status": "ok",
                    "version": "0.1.0",
                    "home": HOME_KEY,
                    "port": PORT,
                    "proof": "0" * 64,
                }
            ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _answer

    def log_message(self, *args) -> None:
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Squatter)
print(json.dumps({"listening": PORT}), flush=True)
server.serve_forever()
