"""A hostile run against a session on object storage (moto's S3 on loopback, behind a
fault-injecting proxy): what a failure the store cannot absorb must never do silently."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from budget import Budget
from budget._errors import StoreError
from spill import FsspecStore
from tests._faultproxy import Fault, FaultProxy, fault_proxy
from tests._s3 import MotoS3

pytestmark = pytest.mark.slow  # moto, a proxy and botocore's backoff: the slow lane

BUCKET = "hostile"


@pytest.fixture
def proxy(moto_s3: MotoS3) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the loopback S3 server."""
    with fault_proxy(moto_s3.endpoint) as running:
        yield running


def _messages(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(n):
        call = {"type": "tool_use", "id": f"t{i}", "name": "cat", "input": {}}
        text = f"output {i} line\n" * 5000
        out.append({"role": "assistant", "content": [call]})
        out.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": text}
        ]})  # fmt: skip
    return out


def test_close_that_cannot_write_the_queued_log_records_raises_naming_the_session(
    moto_s3: MotoS3, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Every log PUT refused through the last request and close: close raises StoreError."""
    url = f"s3://{moto_s3.make_bucket(BUCKET)}/{secrets.token_hex(6)}/session"
    options = moto_s3.options(endpoint_url=proxy.endpoint)
    options["config_kwargs"] = {
        "retries": {"mode": "standard", "total_max_attempts": 2},
        "connect_timeout": 2,
        "read_timeout": 2,
    }
    session = Budget(FsspecStore(url, cache_dir=tmp_path / "cache", **options))
    session.prepare(_messages(1))
    log_put = Fault("slowdown", lambda method, path: method == "PUT" and "/log/" in path, 100)
    proxy.faults.append(log_put)
    session.prepare(_messages(2))  # its records are queued: the append failed
    with pytest.raises(StoreError, match=f"session {url}"):
        session.close()  # the records would be gone: said, never only an event
