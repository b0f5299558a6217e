"""What the client and console tests call: the app `fleetmem serve` runs, in-process over a
temporary data directory with tokens in two tenants, and a real HTTP server on 127.0.0.1 that
answers as a proxy in front of a down server does (502, an HTML page)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import SystemClock
from fleetmem.ports import Deps
from fleetmem.tokens import create_client
from fleetmem.transport.http_local import build_local_app
from fleetmem.wiring import HashEmbedder, SortableIds


@contextmanager
def served_app(data_dir: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    """The app and tokens: `writer` (read, write) and `reader` (read) in tenant acme, `other`
    (read, write) in tenant globex."""
    stores = open_local(data_dir)
    clock = SystemClock()
    deps = Deps.over(stores, clock=clock, ids=SortableIds(), embedder=HashEmbedder())

    def mint(tenant: str, client_id: str, scopes: tuple[str, ...]) -> str:
        return str(create_client(stores.clients, clock, tenant=tenant, client_id=client_id, scopes=scopes)[0])

    tokens = {
        "writer": mint("acme", "writer", ("read", "write")),
        "reader": mint("acme", "reader", ("read",)),
        "other": mint("globex", "other", ("read", "write")),
    }
    try:
        yield build_local_app(lambda: deps, data_dir=data_dir), tokens
    finally:
        stores.close()


class _ProxyPage(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        page = b"<html><body>Bad gateway</body></html>"
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def proxy_page() -> Iterator[str]:
    """The base URL of a server answering every POST with 502 and an HTML page."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
