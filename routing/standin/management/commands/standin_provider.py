from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from routing.standin.script import Script
from routing.standin.server import StandinServer


class Command(BaseCommand):
    help = (
        "Run the local stand-in provider on loopback: OpenAI Chat Completions (/v1/chat/completions), "
        "OpenAI Responses (/v1/responses) and Anthropic Messages (/v1/messages) with scripted behaviour."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=9100)
        parser.add_argument("--text", default=Script.text)
        parser.add_argument("--chunks", type=int, default=Script.chunks)
        parser.add_argument("--interval-ms", type=int, default=0)
        parser.add_argument("--latency-ms", type=int, default=0)
        parser.add_argument("--status", type=int, default=200, help="Answer every request with this status")

    def handle(self, *args: Any, **options: Any) -> None:
        script = Script(
            text=options["text"],
            chunks=options["chunks"],
            interval_ms=options["interval_ms"],
            latency_ms=options["latency_ms"],
            status=options["status"],
        )
        server = StandinServer((options["host"], options["port"]), script)
        self.stdout.write(f"stand-in provider listening on {server.url}")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
