"""`toolgate bench --via mcp`: the same calls through the MCP front door over Streamable HTTP.

The bench starts its own door (`toolgate mcp --http` on a free local port) with a token issued for
the agent and revoked afterwards, connects with the official `mcp` client and makes N calls one at
a time, as an agent does: `tools/call`, wait for the result, then the next. Each call is a new
logical operation of the contract's first example. Latency is the client's, request to result;
next to `toolgate bench --sequential N` (the Kafka client's figure) it gives the door's own cost
per call. With `cpu`, the door process's CPU per call too.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import RequestParamsMeta

from toolgate.contracts.export import model_name
from toolgate.contracts.registry import load_registry
from toolgate.ops import agent_tokens
from toolgate.ops.bench.cpu import CpuMeter
from toolgate.ops.bench.run import CALLS_PER_RUN
from toolgate.ops.bench.stats import latency_summary
from toolgate.ops.status import await_ready
from toolgate.settings import Settings

START_S = 60.0
RUN_ID = "toolgate/run_id"  # the door's `_meta` key naming a call's run (door/calls.py)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _door(settings: Settings, agent: str) -> Iterator[tuple[str, str, int]]:
    """A door of its own for the run: (its URL, a token for `agent`, its pid)."""
    token, token_id = agent_tokens.issue(settings, agent, actor="bench")
    port = _free_port()
    env = {**os.environ, "TOOLGATE_HOME": str(settings.home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "toolgate.cli", "mcp", "--http", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"toolgate mcp --http did not start (exit {process.poll()})") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", token, process.pid
    finally:
        process.terminate()
        process.wait(30)
        agent_tokens.revoke(settings, agent, token_id, actor="bench")


async def _calls(url: str, token: str, name: str, arguments: dict[str, Any], calls: int) -> tuple[list[float], int]:
    """N calls one at a time: each one's milliseconds, and how many were errors."""
    latencies: list[float] = []
    errors = 0
    prefix = f"bench_mcp_{uuid.uuid4().hex[:10]}_"
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        await client.list_tools()
        for i in range(calls):
            started = time.perf_counter()
            meta = cast(RequestParamsMeta, {RUN_ID: f"{prefix}{i // CALLS_PER_RUN}"})
            result = await client.call_tool(name, arguments, meta=meta)
            latencies.append((time.perf_counter() - started) * 1000)
            errors += bool(result.is_error)
    return latencies, errors


def run_mcp_bench(
    settings: Settings, *, tool: str, calls: int, agent: str, ready_timeout: float, cpu: bool = False
) -> dict[str, Any]:
    """N calls of `tool` through the MCP door, one at a time; calls/s and latency percentiles."""
    waited = await_ready(settings, ready_timeout)  # as the Kafka bench does (ops/bench/run.py)
    contract = load_registry(settings.contracts_dir).resolve(tool, "latest")
    arguments = dict(contract.document["affordance"]["examples"][0]["arguments"])
    name = model_name(contract.name, contract.version_tuple[0])
    with _door(settings, agent) as (url, token, pid):
        meter = CpuMeter({"workers": {"mcp door": pid}}) if cpu else None
        started = time.perf_counter()
        latencies, errors = anyio.run(_calls, url, token, name, arguments, calls)
        elapsed = time.perf_counter() - started
        report: dict[str, Any] = {
            "via": "mcp",
            "mode": "sequential",
            "tool": tool,
            "calls": calls,
            "errors": errors,
            "calls_per_second": round(calls / max(elapsed, 1e-9), 1),
            "elapsed_seconds": round(elapsed, 2),
            "waited_for_stages_s": round(waited, 2),
            **latency_summary(latencies),
        }
        if meter is not None:
            report["cpu_us_per_call"] = meter.per_call_us(calls)
    return report
