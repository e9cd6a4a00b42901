"""A real S3 API on loopback for the object-store tests: moto's server mode, started per session.

Not mocked calls: the store talks HTTP to moto's S3 through s3fs, aiobotocore and botocore, as it
would to AWS. Skipped without the s3 extra and moto (the dev extra installs both), a failure
under CI.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests._ci import require_module

__all__ = ["MotoS3", "free_port", "moto_s3_server"]

REGION = "us-east-1"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass(frozen=True, slots=True)
class MotoS3:
    """A running moto S3 server: its endpoint, and storage options that reach it."""

    endpoint: str

    def options(self, **extra: Any) -> dict[str, Any]:
        """FsspecStore/s3fs storage options for this server (fake credentials, no env)."""
        return {
            "endpoint_url": self.endpoint,
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"region_name": REGION},
            **extra,
        }

    def make_bucket(self, name: str) -> str:
        """Create bucket ``name`` (if missing) and return it."""
        boto3 = require_module("boto3", "dev (moto[server])")
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=REGION,
        )
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=name)
        return name


def moto_s3_server() -> Iterator[MotoS3]:
    """Start moto's ThreadedMotoServer on 127.0.0.1 and a free port; stop it afterwards."""
    require_module("s3fs", "s3")
    server_mod = require_module("moto.server", "dev (moto[server])")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield MotoS3(endpoint=f"http://{host}:{port}")
    finally:
        server.stop()
