"""A file the parser refuses: a 400 naming the file (the spec's error body, `metadata.filename`)."""

from gateway.errors import GatewayError


class FileRefused(GatewayError):
    def __init__(self, name: str, why: str, *, status: int = 400):
        super().__init__(f"input_file '{name}': {why}", status=status, metadata={"filename": name})
