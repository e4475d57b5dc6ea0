"""The Python MCP SDK sees the tool list follow the session: `termsprawlctl mcp` against a
real `serve` with browser control off lists 25 tools; `termsprawl-tools browser-control on`
must reach the client as `notifications/tools/list_changed` within 10 s (legacy era: an
unsolicited notification; 2026-07-28: on a `subscriptions/listen` stream), after which 44
tools are listed. Browser control is switched off again after each run.

usage: mcp_list_changed.py TERMSPRAWLCTL SESSION_FILE TERMSPRAWL_TOOLS DATA_DIR
Prints one line per run and `RESULT {...}`; exits non-zero on the first failed expectation.
"""

import asyncio
import json
import subprocess
import sys
import time

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

WITHIN = 10.0


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def browser_control(tools, data, switch):
    done = subprocess.run([tools, "browser-control", switch, "--data", data], capture_output=True, text=True)
    check(done.returncode == 0, f"browser-control {switch}: {done.stderr}")


def is_list_changed(message):
    inner = getattr(message, "root", message)
    return getattr(inner, "method", None) == "notifications/tools/list_changed"


async def legacy_run(ctl, session_file, tools, data):
    changed = asyncio.Event()

    async def on_message(message):
        if is_list_changed(message):
            changed.set()

    params = StdioServerParameters(command=ctl, args=["--session", session_file, "mcp"])
    async with Client(params, mode="legacy", cache=None, message_handler=on_message) as client:
        caps = client.server_capabilities
        check(caps is not None and caps.tools is not None and caps.tools.list_changed, f"listChanged: {caps}")
        before = len((await client.list_tools()).tools)
        check(before == 25, f"legacy: {before} tools with browser control off")
        browser_control(tools, data, "on")
        started = time.monotonic()
        await asyncio.wait_for(changed.wait(), WITHIN)
        waited = time.monotonic() - started
        after = len((await client.list_tools()).tools)
        check(after == 44, f"legacy: {after} tools after browser control on")
        version = client.protocol_version
    browser_control(tools, data, "off")
    return f"legacy {version}: {before} tools, list_changed after {waited:.1f} s, {after} tools"


async def modern_run(ctl, session_file, tools, data, version):
    params = StdioServerParameters(command=ctl, args=["--session", session_file, "mcp"])
    async with Client(params, mode=version, cache=None) as client:
        before = len((await client.list_tools()).tools)
        check(before == 25, f"modern: {before} tools with browser control off")
        async with client.listen(tools_list_changed=True) as sub:
            browser_control(tools, data, "on")
            started = time.monotonic()
            event = await asyncio.wait_for(sub.__anext__(), WITHIN)
            waited = time.monotonic() - started
        after = len((await client.list_tools()).tools)
        check(after == 44, f"modern: {after} tools after browser control on")
    browser_control(tools, data, "off")
    return f"modern {version}: {before} tools, {type(event).__name__} after {waited:.1f} s, {after} tools"


async def main():
    ctl, session_file, tools, data = sys.argv[1:5]
    lines = [await legacy_run(ctl, session_file, tools, data)]
    for version in MODERN_PROTOCOL_VERSIONS:
        lines.append(await modern_run(ctl, session_file, tools, data, version))
    for line in lines:
        print(line)
    print("RESULT " + json.dumps({"runs": len(lines)}))


if __name__ == "__main__":
    asyncio.run(main())
