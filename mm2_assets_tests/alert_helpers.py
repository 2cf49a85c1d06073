"""A loopback webhook that receives the alerts our sinks send, for tests that assert them."""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Any

from mm2_assets.mm2.alerting import Alert, AlertSink


class HangingSink(AlertSink):
    """A sink whose every `send` hangs for a minute and then fails (a receiver that accepts
    the connection and never answers): loaded by class path in the code server."""

    def send(self, alert: Alert) -> None:
        """Hang, then fail."""
        time.sleep(60)
        raise TimeoutError("no answer")


class Webhook:
    """A JSON webhook receiver on loopback."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.up = True
        """While False, every POST is answered `down_status` (503: the receiver is down) and
        kept in `refused`."""
        self.down_status = 503
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                alert = json.loads(self.rfile.read(length))
                (hook.received if hook.up else hook.refused).append(alert)
                self.send_response(204 if hook.up else hook.down_status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/mm2?token=s3cret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def kinds(self) -> list[str]:
        return [a["kind"] for a in self.received]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [a for a in self.received if a["kind"] == kind]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
