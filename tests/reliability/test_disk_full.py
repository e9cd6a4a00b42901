"""Disk full, no permission, quota: spills that really fail keep the text inline.

Each case runs a session in a child process under a real limit: a file-size limit
(RLIMIT_FSIZE, so writes fail with EFBIG the way a full disk fails them), a bodies directory the
process may not write (as an unprivileged user: root would ignore the mode), or the session's
quota. The request still goes out with the full text as ``kept_unspillable``, the failure is an
event naming its cause, and the session, resumed here without the limit, shows the same bytes
and reads back everything that was spilled.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig
from tests.reliability._child import run_json_child
from tests.strategies import assistant, results

pytestmark = pytest.mark.slow  # a child process per full disk, quota or read-only session

CFG = {"result_cap": 5_000, "preview_chars": 500, "fsync": True}
NOBODY = 65534

CHILD = r"""
import json, os, resource, signal, sys
from structlog.testing import capture_logs
from budget import Budget
from spill import LocalStore  # loaded now: after dropping privileges nothing else is imported

case, path, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
first, second = json.loads(sys.stdin.read())
Budget.in_memory(cfg).prepare(first, now=0)  # warm every lazy import up
if case == "readonly" and os.geteuid() == 0:
    os.setgroups([])
    os.setgid(int(sys.argv[4]))
    os.setuid(int(sys.argv[4]))
out = {"copies": [], "decisions": [], "events": []}
with capture_logs() as logs:
    session = Budget.open(path, cfg)
    if case == "fsize":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail with EFBIG instead of dying
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), resource.RLIM_INFINITY))
    if case == "readonly":
        os.chmod(os.path.join(path, "bodies"), 0o500)
    req = session.prepare(first, now=1)
    out["copies"].append(req.messages)
    out["decisions"].append([[d.call_id, d.kind, d.reason] for d in req.report.decisions])
    if case == "fsize":  # the space comes back: the next request spills and logs again
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    if case == "readonly":
        os.chmod(os.path.join(path, "bodies"), 0o700)
    req = session.prepare(second, now=2)
    out["copies"].append(req.messages)
    out["decisions"].append([[d.call_id, d.kind, d.reason] for d in req.report.decisions])
    session.close()
out["events"] = [[e["event"], e["log_level"], str(e.get("error", ""))] for e in logs]
print(json.dumps(out))
"""


def big(tag: str, n: int) -> str:
    return "".join(f"{tag} line {i:06d}: some tool output\n" for i in range(n))


FIRST_BIG, FIRST_SMALL, SECOND = big("big", 8_000), big("small", 200), big("later", 400)
FIRST = [
    {"role": "user", "content": "go"},
    assistant(("a", "bash"), ("b", "bash")),
    results(("a", FIRST_BIG), ("b", FIRST_SMALL)),
]
LATER = [*FIRST, assistant(("c", "bash")), results(("c", SECOND))]


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """A directory the child may use; owned by an unprivileged user when the suite runs as root
    (the pytest temp root is private to root, so it lives in the system temp directory)."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="toolbudget-ro-"))
    os.chown(path, NOBODY, NOBODY)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def run_child(case: str, path: Path, cfg: dict[str, Any], extra: str) -> dict[str, Any]:
    out: dict[str, Any] = run_json_child(
        CHILD, case, str(path), json.dumps(cfg), extra, input=json.dumps([FIRST, LATER])
    )
    return out


def shown(copy: list[Any], call_id: str) -> str:
    for m in copy:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_result" and b["tool_use_id"] == call_id:
                return str(b["content"])
    raise KeyError(call_id)


@pytest.mark.parametrize(
    ("case", "limit", "cause"),
    [
        ("fsize", 64_000, "File too large"),  # the body is 300 kB: its write fails midway
        ("fsize", 1, "File too large"),  # nothing at all can grow: the log append fails too
        ("readonly", 0, "Permission denied"),
        ("quota", 1_000, "quota"),
    ],
)
def test_a_spill_that_cannot_be_written_keeps_the_text_inline(
    base: Path, case: str, limit: int, cause: str, record_property: Any
) -> None:
    """The big result stays whole as kept_unspillable, an event names the cause, the request
    goes out, and the session resumed without the limit shows the same bytes, losing nothing."""
    cfg = {**CFG, "quota_bytes": limit} if case == "quota" else CFG
    path = base / "s"
    out = run_child(
        case if case != "quota" else "plain", path, cfg, str(limit if case == "fsize" else NOBODY)
    )
    first, second = out["copies"]
    assert shown(first, "a") == FIRST_BIG
    assert ["a", "kept_unspillable", "spill_failed"] in out["decisions"][0]
    failures = [e for e in out["events"] if e[0] == "toolbudget.spill.failed"]
    assert failures and all(cause in e[2] for e in failures), out["events"]
    if case == "fsize" and limit == 1:
        assert any(e[0] == "toolbudget.log.append_failed" and cause in e[2] for e in out["events"])
    assert second[: len(first)] == first  # frozen: the next request shows it the same way
    later = {cid: kind for cid, kind, _ in out["decisions"][1]}
    if case != "quota":
        assert later == {"c": "spilled"}  # space (or permission) is back: spilling works again
    with Budget.open(path, BudgetConfig(**cfg)) as session:
        again = session.prepare(LATER, now=3)
        assert again.messages == second
        for cid, text in (("a", FIRST_BIG), ("b", FIRST_SMALL), ("c", SECOND)):
            d = session.decision(cid)
            assert d is not None
            assert shown(second, cid) == text or session.read(d.ref or "") == text
    leftovers = [p for p in path.rglob("*.txt") if p.stat().st_size and "big" in p.read_text()[:3]]
    assert leftovers == []
    record_property(f"reliability.disk.{case}-{limit}", len(failures))
