"""The shop app the task deploys: a tiny HTTP server over the SQLite file `orders.db` next to it.

    GET /health   -> {"status": "ok", "orders": N}
    GET /orders   -> [{"id", "sku", "qty", "status"}, ...]
    anything else -> 404
Run: python3 server.py PORT (it listens on 127.0.0.1 only).
"""

import json
import sqlite3
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DB = Path(__file__).with_name("orders.db")


def rows(query):
    db = sqlite3.connect(DB)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {"status": "ok", "orders": rows("SELECT COUNT(*) FROM orders")[0][0]})
        elif self.path == "/orders":
            self.answer(200, [{"id": i, "sku": s, "qty": q, "status": st}
                              for i, s, q, st in rows("SELECT id, sku, qty, status FROM orders ORDER BY id")])
        else:
            self.answer(404, {"error": "not found"})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
