"""The proxy's overhead: ``toolbudget proxy`` against a direct call to the same stand-in upstream.

Issue 33's targets: at most 5 ms added at the 99th percentile at 800 rounds, the time to the first
streamed byte unchanged within noise, memory flat over 1,000 requests. Measured, never asserted:

* **hop**: what forwarding alone adds (``GET /v1/models``, passed through untouched);
* **latency**: one conversation of ``rounds`` rounds (a tool call and its output each), every
  request sent twice, straight to the stand-in and through the proxy, in alternating order, so
  the pair shares the machine's load; the added latency of a request is the proxied time minus
  the direct one (client side, whole non-streamed answer). Reported: the median and p99 added,
  the ratio of the total times (proxy / direct), and the loop's floor: the same conversation
  sent straight to the stand-in twice a request, what a proxy adding nothing would show (its
  p99 is the least this machine can show);
* **first byte**: the same for streamed answers whose events the stand-in spaces by
  ``chunk_delay_s``: the time to the first byte of the body (median and p99), and to the last;
  and its control, the same body non-streamed after an idle pause as long (a call after the
  machine sat idle costs more than the latency loop's back-to-back calls, direct and proxied:
  compare the first byte's added time with the control's, not with the latency loop's);
* **memory**: the proxy's resident set (``VmRSS``), every 100 of ``memory_requests`` requests
  over conversations of 25 rounds: the same one sent again and again (what requests cost), then
  a new one after each (what each open session holds).

The stand-in and the proxy each run in a process of their own (``python -m benchmarks.standin``,
``toolbudget proxy``), the client in this one. The conversation's outputs are generated: mostly
short (tens of lines), one over the default 50,000-character cap every 50 rounds, so the proxy
both passes results through and spills (sizes are this module's, not a trace's).

``--against DIR`` runs a second proxy from another checkout's sources (``git worktree add DIR
REV``) beside this one: each latency and first-byte request goes straight to the stand-in and
through both proxies, in rotating order, so before and after share the machine's load request by
request. The order matters to the figures (a call right after another pays for what the last
one left running), so compare proxies within one run, not across runs of another rotation.

Run from the repository root::

    python -m benchmarks proxy [--rounds 50,800] [--json FILE] [--against DIR]
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

if TYPE_CHECKING:
    import httpx

__all__ = ["command", "conversation", "main", "run"]

_REPO = Path(__file__).resolve().parents[1]
_HEADERS = {"content-type": "application/json", "x-api-key": "bench", "anthropic-version": "v"}
_LINES = (3, 12, 40, 8, 60, 25, 6, 100, 15, 20)
"""Output sizes in lines, cycled: a few hundred bytes to a few kilobytes."""
_BIG_EVERY = 50
_BIG_LINES = 1_500
"""Every 50th output has 1,500 lines of 41 characters (61,500), over the default cap."""


def conversation(rounds: int, tag: str = "c") -> list[dict[str, Any]]:
    """A question and ``rounds`` Bash calls with their outputs (Anthropic Messages)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Fix the build ({tag})."}]
    for i in range(rounds):
        lines = _BIG_LINES if (i + 1) % _BIG_EVERY == 0 else _LINES[i % len(_LINES)]
        call = {
            "type": "tool_use",
            "id": f"{tag}_{i}",
            "name": "Bash",
            "input": {"command": "make"},
        }
        text = "".join(f"{tag} round {i:04d} output line {n:06d} ....\n" for n in range(lines))
        result = {"type": "tool_result", "tool_use_id": f"{tag}_{i}", "content": text}
        history += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    return history


def _body(history: Sequence[Any], *, stream: bool = False) -> bytes:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": list(history)}
    return orjson.dumps({**body, "stream": True} if stream else body)


@contextmanager
def _process(
    cmd: list[str], pattern: str, sources: Path = _REPO
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A child (of the checkout at ``sources``) printing its URL on stderr's first line; killed
    at the end.

    It runs in ``sources``: ``python -c`` and ``-m`` put the current directory first on the
    import path, ahead of ``PYTHONPATH``, so a child started from this checkout ran this
    checkout's code whatever ``sources`` said (``--against`` compared a proxy with itself)."""
    env = {**os.environ, "PYTHONPATH": str(sources)}
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=sources)
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        found = re.search(pattern, line)
        if found is None:
            raise RuntimeError(f"{cmd[2]!r} did not start: {line}{child.stderr.read()}")
        yield child, found.group(1)
    finally:
        child.kill()
        child.wait(10)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _timed(client: httpx.Client, url: str, body: bytes) -> float:
    started = time.perf_counter()
    client.post(url, content=body, headers=_HEADERS).raise_for_status()
    return time.perf_counter() - started


def latency(
    client: httpx.Client, direct: str, proxy: str, rounds: int, against: str | None = None
) -> dict[str, Any]:
    """Added latency over one conversation of ``rounds`` rounds (see the module), and that of
    the proxy at ``against`` (``against_*``), in the same loop; then the loop's floor."""
    history = conversation(rounds, tag=f"lat{rounds}")
    urls = [direct, proxy] if against is None else [direct, proxy, against]
    added, direct_s, proxy_s, other = [], 0.0, 0.0, []
    for i, upto in enumerate(range(3, len(history) + 1, 2)):
        body = _body(history[:upto])
        k = i % len(urls)
        took = {url: _timed(client, url, body) for url in urls[k:] + urls[:k]}
        d, p = took[direct], took[proxy]
        added.append(p - d)
        direct_s, proxy_s = direct_s + d, proxy_s + p
        if against is not None:
            other.append(took[against] - d)
    extra = {}
    if other:
        extra = {
            "against_added_median_ms": _ms(statistics.median(other)),
            "against_added_p99_ms": _ms(_percentile(other, 0.99)),
        }
    floor = _floor(client, direct, history)
    return {
        "rounds": rounds,
        "requests": len(added),
        "last_body_bytes": len(_body(history)),
        "added_median_ms": _ms(statistics.median(added)),
        "added_p99_ms": _ms(_percentile(added, 0.99)),
        "floor_median_ms": _ms(statistics.median(floor)),
        "floor_p99_ms": _ms(_percentile(floor, 0.99)),
        "direct_total_s": round(direct_s, 3),
        "proxy_total_s": round(proxy_s, 3),
        "ratio": round(proxy_s / direct_s, 3),
        **extra,
    }


def _floor(client: httpx.Client, direct: str, history: Sequence[Any]) -> list[float]:
    """The same requests each sent straight to the stand-in twice, the later call's time minus
    the earlier's, then the other way round: what the loop measures of a proxy adding nothing,
    the stand-in's, the client's and the machine's noise (its p99 is the least one can show)."""
    floor = []
    for i, upto in enumerate(range(3, len(history) + 1, 2)):
        body = _body(history[:upto])
        first, second = _timed(client, direct, body), _timed(client, direct, body)
        floor.append(second - first if i % 2 else first - second)
    return floor


def hop(client: httpx.Client, direct: str, proxy: str, requests: int = 200) -> dict[str, Any]:
    """What the HTTP hop alone adds: ``GET /v1/models``, which the proxy forwards untouched."""
    added = []
    for i in range(requests):
        pair = [(direct, 1), (proxy, -1)] if i % 2 else [(proxy, -1), (direct, 1)]
        total = 0.0
        for url, sign in pair:
            started = time.perf_counter()
            client.get(url, headers=_HEADERS).raise_for_status()
            total -= sign * (time.perf_counter() - started)
        added.append(total)
    return {
        "requests": requests,
        "added_median_ms": _ms(statistics.median(added)),
        "added_p99_ms": _ms(_percentile(added, 0.99)),
    }


def _first_byte(client: httpx.Client, url: str, body: bytes, delay: float) -> tuple[float, float]:
    started = time.perf_counter()
    headers = {**_HEADERS, "x-standin-delay": str(delay)}
    with client.stream("POST", url, content=body, headers=headers) as answer:
        chunks = answer.iter_raw()
        next(chunks)
        first = time.perf_counter() - started
        for _ in chunks:
            pass
    return first, time.perf_counter() - started


def first_byte(
    client: httpx.Client,
    direct: str,
    proxy: str,
    rounds: int,
    delay: float,
    against: str | None = None,
) -> dict[str, Any]:
    """Time to the first and the last streamed byte, direct and proxied (and through the proxy
    at ``against``, in the same loop), over a conversation."""
    history = conversation(rounds, tag="ttfb")
    # The control's own conversation: each of its calls is a new round for the proxy, as the
    # streamed one's is (the streamed call's history sent again would be budgeted as a retry).
    control = conversation(rounds, tag="ttfb-control")
    sides = [("direct", direct), ("proxy", proxy)]
    if against is not None:
        sides.append(("against", against))
    firsts: dict[str, list[float]] = {side: [] for side, _ in sides}
    lasts: dict[str, list[float]] = {side: [] for side, _ in sides}
    paused: dict[str, list[float]] = {side: [] for side, _ in sides}
    for i, upto in enumerate(range(3, len(history) + 1, 2)):
        body = _body(history[:upto], stream=True)
        k = i % len(sides)
        for side, url in sides[k:] + sides[:k]:
            first, last = _first_byte(client, url, body, delay)
            firsts[side].append(first)
            lasts[side].append(last)
            paused[side].append(_after_pause(client, url, _body(control[:upto]), delay))
    return {
        "rounds": rounds,
        "chunk_delay_ms": _ms(delay),
        **{f"first_byte_median_ms_{s}": _ms(statistics.median(v)) for s, v in firsts.items()},
        **{f"first_byte_p99_ms_{s}": _ms(_percentile(v, 0.99)) for s, v in firsts.items()},
        **{f"last_byte_median_ms_{s}": _ms(statistics.median(v)) for s, v in lasts.items()},
        **{f"paused_median_ms_{s}": _ms(statistics.median(v)) for s, v in paused.items()},
    }


def _after_pause(client: httpx.Client, url: str, body: bytes, delay: float) -> float:
    """A non-streamed call of a conversation as long after the machine sat idle as long as a
    stream's pause between events (and as long again after it, so the next streamed call starts
    from the same idle as the others): the first byte's control. A call after an idle pause pays
    for every process and thread waking up again, ~0.7 ms more direct and ~0.8 ms more through
    the proxy than in the latency loop's back-to-back calls (issue 33), so the first byte's
    added time is compared with this, not with the latency loop's."""
    time.sleep(delay)
    took = _timed(client, url, body)
    time.sleep(delay)
    return took


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")  # not Linux: the benchmark reads /proc


def memory(
    client: httpx.Client, proxy: str, pid: int, requests: int, *, new_conversations: bool
) -> dict[str, Any]:
    """The proxy's resident set every 100 requests, over conversations of 25 rounds: a new one
    after each (``new_conversations``), or the same one sent again and again (what its own
    requests cost, the sessions opened aside)."""
    samples, sent, n = [], 0, 0
    while sent < requests:
        history = conversation(25, tag=f"mem{n}" if new_conversations else "mem")
        n += 1
        for upto in range(3, len(history) + 1, 2):
            client.post(proxy, content=_body(history[:upto]), headers=_HEADERS).raise_for_status()
            sent += 1
            if sent % 100 == 0:
                samples.append(_rss_kib(pid))
            if sent == requests:
                break
    return {
        "requests": requests,
        "conversations": n,
        "rss_mib_every_100": [round(s / 1024, 1) for s in samples],
        "growth_mib_after_first_100": round((samples[-1] - samples[0]) / 1024, 1) if samples else 0,
    }


def run(
    rounds: Sequence[int] = (50, 800),
    *,
    stream_rounds: int = 100,
    chunk_delay_s: float = 0.02,
    memory_requests: int = 1_000,
    against: Path | None = None,
) -> dict[str, Any]:
    """Every figure of the module's docstring, as a dict."""
    import httpx  # the proxy extra's: only this run needs it (``--help`` does not)

    with tempfile.TemporaryDirectory() as tmp:
        standin = [sys.executable, "-m", "benchmarks.standin"]
        with _process(standin, r"standin on (\S+)") as (_, upstream):
            proxy_cmd = [
                sys.executable,
                "-c",
                "from budget.cli import main; main()",
                "proxy",
                "--root",
                str(Path(tmp) / "sessions"),
                "--port",
                "0",
                "--anthropic-upstream",
                upstream,
            ]
            other_cmd = [*proxy_cmd[:5], str(Path(tmp) / "against"), *proxy_cmd[6:]]
            with (
                _process(proxy_cmd, r"on (http://\S+) ") as (child, proxy),
                contextlib.ExitStack() as others,
                httpx.Client(timeout=120) as client,
            ):
                direct_url, proxy_url = f"{upstream}/v1/messages", f"{proxy}/v1/messages"
                other_url = None
                if against is not None:
                    _, other = others.enter_context(
                        _process(other_cmd, r"on (http://\S+) ", against.resolve())
                    )
                    other_url = f"{other}/v1/messages"
                    _timed(client, other_url, _body(conversation(1, "warm")))
                _timed(client, direct_url, _body(conversation(1, "warm")))  # connections, imports
                _timed(client, proxy_url, _body(conversation(1, "warm")))
                return {
                    "fsync": os.environ.get("TOOLBUDGET_FSYNC", "(default: on)"),
                    "against": str(against) if against is not None else None,
                    "hop": hop(client, f"{upstream}/v1/models", f"{proxy}/v1/models"),
                    "latency": [
                        latency(client, direct_url, proxy_url, r, other_url) for r in rounds
                    ],
                    "first_byte": first_byte(
                        client, direct_url, proxy_url, stream_rounds, chunk_delay_s, other_url
                    ),
                    "memory_same": memory(
                        client, proxy_url, child.pid, memory_requests, new_conversations=False
                    ),
                    "memory": memory(
                        client, proxy_url, child.pid, memory_requests, new_conversations=True
                    ),
                }


def render(result: dict[str, Any]) -> str:
    """The figures as a few lines of text."""
    hopped = result["hop"]
    out = [
        f"TOOLBUDGET_FSYNC={result['fsync']}; the hop alone (GET /v1/models, passed through): "
        f"added median {hopped['added_median_ms']} ms, p99 {hopped['added_p99_ms']} ms"
    ]
    for row in result["latency"]:
        out.append(
            f"{row['rounds']:>4} rounds ({row['requests']} requests, last body "
            f"{row['last_body_bytes']:,} B): added median {row['added_median_ms']} ms, "
            f"p99 {row['added_p99_ms']} ms; total proxy/direct {row['ratio']}; the floor (the "
            f"stand-in against itself): median {row['floor_median_ms']} ms, "
            f"p99 {row['floor_p99_ms']} ms"
        )
        if "against_added_median_ms" in row:
            out.append(
                f"      the same loop through {result['against']}: added median "
                f"{row['against_added_median_ms']} ms, p99 {row['against_added_p99_ms']} ms"
            )
    fb = result["first_byte"]
    out.append(
        f"first streamed byte (events {fb['chunk_delay_ms']} ms apart, {fb['rounds']} rounds), "
        f"median / p99: direct {fb['first_byte_median_ms_direct']} / "
        f"{fb['first_byte_p99_ms_direct']} ms, proxy {fb['first_byte_median_ms_proxy']} / "
        f"{fb['first_byte_p99_ms_proxy']} ms; last byte median direct "
        f"{fb['last_byte_median_ms_direct']} ms, proxy {fb['last_byte_median_ms_proxy']} ms; "
        f"the control, non-streamed after the same idle pause, median: direct "
        f"{fb['paused_median_ms_direct']} ms, proxy {fb['paused_median_ms_proxy']} ms"
    )
    if "first_byte_median_ms_against" in fb:
        out.append(
            f"      the same loop through {result['against']}: first byte "
            f"{fb['first_byte_median_ms_against']} / {fb['first_byte_p99_ms_against']} ms, "
            f"last byte {fb['last_byte_median_ms_against']} ms, the control "
            f"{fb['paused_median_ms_against']} ms"
        )
    for key, what in (("memory_same", "one conversation re-sent"), ("memory", "new conversations")):
        mem = result[key]
        out.append(
            f"proxy RSS over {mem['requests']} requests, {what} ({mem['conversations']}; MiB, "
            f"every 100): {mem['rss_mib_every_100']}; growth after the first 100: "
            f"{mem['growth_mib_after_first_100']} MiB"
        )
    return "\n".join(out)


def main(
    *,
    rounds: Sequence[int] = (50, 800),
    json_path: Path | None = None,
    memory_requests: int = 1_000,
    stream_rounds: int = 100,
    against: Path | None = None,
) -> int:
    """Run, print, and write the JSON if asked."""
    result = run(
        rounds, memory_requests=memory_requests, stream_rounds=stream_rounds, against=against
    )
    print(render(result))
    if json_path is not None:
        json_path.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def command(
    rounds: Annotated[str, typer.Option(help="Conversation sizes, comma-separated.")] = "50,800",
    memory_requests: Annotated[int, typer.Option(min=100)] = 1_000,
    stream_rounds: Annotated[int, typer.Option(min=1)] = 100,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option(help="Another checkout whose proxy the latency loop measures alongside."),
    ] = None,
) -> None:
    """The proxy's added latency, first streamed byte and memory, against direct calls."""
    sizes = [int(r) for r in rounds.split(",") if r.strip()]
    raise typer.Exit(
        main(
            rounds=sizes,
            json_path=json_path,
            memory_requests=memory_requests,
            stream_rounds=stream_rounds,
            against=against,
        )
    )


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.proxy")
