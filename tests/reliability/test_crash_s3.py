"""Crash on object storage: sessions on FsspecStore SIGKILLed between body and log writes resume
with byte-identical request copies and lose nothing.

Each child (``tests/_s3_crash_child.py``) is a fresh interpreter talking HTTP to this process's
moto S3 server on loopback, with its own empty body cache (another machine picking the session
up). A reference child replays the conversation uninterrupted and numbers every object write.
Each trial's child then kills itself with SIGKILL at one of those writes: right after a body's
PUT was answered (before the log object that records it), or right before a log object's PUT;
a second child resumes the session from the request that was in flight and replays to the end.
Every request copy either child produced must equal the reference's byte for byte, the final
decisions must be the reference's, and every logged decision's body must be stored under its
content hash, read back by a third store with an empty cache.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import xxhash

from benchmarks.soak import verify_store
from spill import FsspecStore
from tests._s3 import MotoS3
from tests.conversations import conversation

pytestmark = pytest.mark.slow  # a dozen interpreters, each importing s3fs and replaying a session

REPO = Path(__file__).resolve().parents[2]
BUCKET = "crash"
SEED = 21
ROUNDS = 16
TRIALS = 6


def _child(s3: MotoS3, url: str, tmp_path: Path, start: int, kill_at: int, mode: str) -> Any:
    """Run one child to its end or its kill; (its reports, its return code)."""
    args = {
        "url": url,
        "options": s3.options(),
        "cache": str(tmp_path / f"cache-{secrets.token_hex(4)}"),
        "seed": SEED,
        "rounds": ROUNDS,
        "start": start,
        "kill_at": kill_at,
        "mode": mode,
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests._s3_crash_child", json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=180,
    )
    said = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    errors = [m["error"] for m in said if "error" in m]
    assert not errors, (errors, done.stderr[-3000:])
    return said, done.returncode


def _bad_bodies(s3: MotoS3, url: str) -> int:
    """Body objects whose content does not match the ref they are named by."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **s3.options())
    bad = 0
    for key in fs.find(f"{root}/bodies"):
        name = str(key).rsplit("/", 1)[-1].removesuffix(".txt")
        bad += xxhash.xxh3_128_hexdigest(fs.cat_file(key)) != name
    return bad


def test_object_store_sessions_killed_between_body_and_log_writes_resume_byte_identical(
    moto_s3: MotoS3, tmp_path: Path, record_property: Any
) -> None:
    """SIGKILLed after a body's PUT (before its log object) or before a log object's PUT, a
    session on S3 resumes elsewhere with the unbroken run's bytes, and no body is lost."""
    moto_s3.make_bucket(BUCKET)
    run = secrets.token_hex(6)
    msgs, steps = conversation(SEED, ROUNDS)
    said, code = _child(moto_s3, f"s3://{BUCKET}/{run}/reference", tmp_path, 0, 0, "before")
    assert code == 0
    reference = {m["done"]: m["digest"] for m in said if "done" in m}
    assert len(reference) == len(steps)
    [final] = [m for m in said if "final" in m]
    writes = [(str(kind), int(req)) for kind, req in final["writes"]]
    bodies = [i + 1 for i, (kind, _) in enumerate(writes) if kind == "body"]
    logs = [i + 1 for i, (kind, _) in enumerate(writes) if kind == "log"]
    assert bodies and logs

    rng = random.Random(SEED)
    kills: dict[str, int] = {}
    compared = verified = 0
    for trial in range(TRIALS):
        url = f"s3://{BUCKET}/{run}/trial-{trial}"
        # Alternately between a body and its log object, from both sides of that gap.
        kill_at, mode = (
            (rng.choice(bodies), "after") if trial % 2 == 0 else (rng.choice(logs), "before")
        )
        said, code = _child(moto_s3, url, tmp_path, 0, kill_at, mode)
        assert code == -signal.SIGKILL, f"trial {trial}: the child was not killed ({code})"
        [killed] = [m["killed"] for m in said if "killed" in m]
        kills[f"{killed[0]}_{killed[1]}"] = kills.get(f"{killed[0]}_{killed[1]}", 0) + 1
        assert _bad_bodies(moto_s3, url) == 0
        started = [m["start"] for m in said if "start" in m]
        for m in said:
            if "done" in m:
                assert m["digest"] == reference[m["done"]], f"trial {trial} request {m['done']}"
                compared += 1
        resumed, code = _child(moto_s3, url, tmp_path, started[-1], 0, "before")
        assert code == 0
        for m in resumed:
            if "done" in m:
                assert m["digest"] == reference[m["done"]], f"trial {trial} resumed {m['done']}"
                compared += 1
        [last] = [m for m in resumed if "final" in m]
        assert last["final"] == final["final"], f"trial {trial}: final decisions differ"
        with FsspecStore(url, cache_dir=tmp_path / f"verify-{trial}", **moto_s3.options()) as store:
            got, _results, lost = verify_store(store, msgs)
        assert lost == 0, f"trial {trial}"
        verified += got
    assert set(kills) == {"body_after", "log_before"}
    assert compared >= TRIALS * len(steps)
    assert verified > 0
    record_property("reliability.crash_s3.trials", TRIALS)
    record_property("reliability.crash_s3.kills", sum(kills.values()))
    record_property("reliability.crash_s3.requests_compared", compared)
    record_property("reliability.crash_s3.decisions_verified", verified)
