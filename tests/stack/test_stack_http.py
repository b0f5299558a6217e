"""The stack's own HTTP stand-ins (the Lambda Invoke API, Bedrock) answer without Nagle's algorithm.

Their answer goes out as two writes (headers, then body). With Nagle on, the body waits for the
client's delayed ACK of the headers on a keep-alive connection, which added tens of milliseconds to
every edge -> verb invoke on the stack (`scripts/stack bench --compare-v1` in docs/deploy.md) and that
AWS's Invoke API does not add. No stack engine is started here."""

from __future__ import annotations

import socket

import httpx

from tests.stack.stack import InvokeRouter, _Quiet, _Server


def test_every_stand_in_answers_with_nodelay_on_a_keep_alive_connection() -> None:
    seen: list[int] = []

    class Recording(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            self.send(200, b"{}", {})

    server = _Server(Recording)
    try:
        with httpx.Client(timeout=10) as client:  # one connection, kept alive across the two posts
            for _ in range(2):
                assert client.post(server.url, content=b"{}").status_code == 200
    finally:
        server.stop()
    assert len(seen) == 2 and all(seen)


def test_the_invoke_api_stand_in_is_such_a_stand_in() -> None:
    router = InvokeRouter({})
    try:
        assert issubclass(router.server.RequestHandlerClass, _Quiet)
        r = httpx.post(f"{router.url}/2015-03-31/functions/nothing/invocations", content=b"{}", timeout=10)
        assert r.status_code == 404 and r.headers["x-amzn-ErrorType"] == "ResourceNotFoundException"
    finally:
        router.stop()
