"""Drive `termsprawlctl --session FILE mcp` with the official Python MCP SDK's stdio client.

usage: mcp_sdk_client.py TERMSPRAWLCTL SESSION_FILE [NODE_ID]

For every protocol version this SDK can be made to speak: list the tools, call
session_info, and call canvas_move with a bad argument (which must come back as
isError); session_info must name NODE_ID (default agent-1). Prints one line per step
and a final JSON summary line `RESULT {...}`; exits non-zero on the first failed
expectation.

Versions: the legacy era goes through `initialize`; this SDK always offers
LATEST_HANDSHAKE_VERSION there, so the script sets that module constant to each of
HANDSHAKE_PROTOCOL_VERSIONS in turn. The modern era is reached twice: `mode="auto"`
(the SDK probes `server/discover` and adopts what it answers) and a pinned modern
version (per-request `_meta`, no probe).
"""

import asyncio
import json
import sys
from importlib import metadata

import mcp.client.session as session_module
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS


def check(condition, message):
    if not condition:
        raise AssertionError(message)


async def exercise(ctl, session_file, node_id, label, mode, handshake_version=None):
    if handshake_version is not None:
        session_module.LATEST_HANDSHAKE_VERSION = handshake_version
    params = StdioServerParameters(command=ctl, args=["--session", session_file, "mcp"])
    async with Client(params, mode=mode, cache=None) as client:
        negotiated = client.protocol_version
        expected = handshake_version or MODERN_PROTOCOL_VERSIONS[-1]
        check(negotiated == expected, f"{label}: negotiated {negotiated}, expected {expected}")

        tools = (await client.list_tools()).tools
        names = [tool.name for tool in tools]
        check("session_info" in names and "canvas_move" in names, f"{label}: tools {names}")

        info = await client.call_tool("session_info", {})
        check(not info.is_error, f"{label}: session_info failed: {info}")
        text = info.content[0].text
        check(json.loads(text)["nodeId"] == node_id, f"{label}: session_info said {text}")

        bad = await client.call_tool("canvas_move", {"nodeId": "n1", "x": "left", "y": 0})
        check(bad.is_error, f"{label}: a bad argument was not an error: {bad}")
        error = bad.content[0].text
        check(error.startswith("Invalid x"), f"{label}: error text {error!r}")

        server = client.server_info
        print(
            f"{label}: negotiated {negotiated}, server {server.name if server else None} "
            f"{server.version if server else None}, {len(names)} tools, "
            f"session_info ok, bad argument -> isError: {error}"
        )
        return negotiated


async def main():
    ctl, session_file = sys.argv[1], sys.argv[2]
    node_id = sys.argv[3] if len(sys.argv) > 3 else "agent-1"
    print(f"python mcp SDK {metadata.version('mcp')}")
    runs = [(f"legacy {v}", "legacy", v) for v in HANDSHAKE_PROTOCOL_VERSIONS]
    runs.append(("auto (server/discover probe)", "auto", None))
    runs += [(f"modern {v} (pinned)", v, None) for v in MODERN_PROTOCOL_VERSIONS]
    original = session_module.LATEST_HANDSHAKE_VERSION
    exercised = []
    try:
        for label, mode, handshake_version in runs:
            exercised.append(await exercise(ctl, session_file, node_id, label, mode, handshake_version))
    finally:
        session_module.LATEST_HANDSHAKE_VERSION = original
    summary = {"sdk": metadata.version("mcp"), "versions": sorted(set(exercised)), "runs": len(runs)}
    print("RESULT " + json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
