"""run_code's script: write the shop's SQLite file, then start its server in the background (the sandbox's
teardown stops it). It does not wait for the server: the probe step retries until it answers."""

import sqlite3
import subprocess
import sys
from pathlib import Path

ORDERS = [("BOLT-M6", 20, "shipped"), ("NUT-M6", 20, "shipped"), ("BOLT-M6", 5, "open")]


def run(input):
    app = Path("shop")  # run_code's working directory is /app; load_artifact put the app in /app/shop
    port = int(input["args"]["port"])
    db = sqlite3.connect(app / "orders.db")
    db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, qty INTEGER NOT NULL, "
               "status TEXT NOT NULL)")
    db.executemany("INSERT INTO orders (sku, qty, status) VALUES (?, ?, ?)", ORDERS)
    db.commit()
    db.close()
    subprocess.Popen([sys.executable, str(app / "server.py"), str(port)], stdin=subprocess.DEVNULL,
                     stdout=open(app / "server.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    return {"port": port, "orders": len(ORDERS)}
