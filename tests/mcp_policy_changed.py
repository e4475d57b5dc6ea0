"""The Python MCP SDK sees the tool list follow the person's policy: `termsprawlctl mcp`
against a real `serve` lists `agent_launch`; `termsprawl-tools policy set launch deny
--agent NODE` must reach the client as `notifications/tools/list_changed` within 10 s,
after which `agent_launch` is no longer listed (and the other tools are); `policy set
launch allow` brings it back.

usage: mcp_policy_changed.py TERMSPRAWLCTL SESSION_FILE TERMSPRAWL_TOOLS DATA_DIR NODE
Prints one line and `RESULT {...}`; exits non-zero on the first failed expectation.
"""

import asyncio
import json
import subprocess
import sys
import time

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

WITHIN = 10.0


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def policy(tools, data, node, rule):
    done = subprocess.run([tools, "policy", "set", "launch", rule, "--agent", node, "--data", data],
                          capture_output=True, text=True)
    check(done.returncode == 0, f"policy set launch {rule}: {done.stderr}")


def is_list_changed(message):
    inner = getattr(message, "root", message)
    return getattr(inner, "method", None) == "notifications/tools/list_changed"


async def main():
    ctl, session_file, tools, data, node = sys.argv[1:6]
    changed = asyncio.Event()

    async def on_message(message):
        if is_list_changed(message):
            changed.set()

    params = StdioServerParameters(command=ctl, args=["--session", session_file, "mcp"])
    async with Client(params, mode="legacy", cache=None, message_handler=on_message) as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        check("agent_launch" in before, f"agent_launch not listed: {before}")
        policy(tools, data, node, "deny")
        started = time.monotonic()
        await asyncio.wait_for(changed.wait(), WITHIN)
        waited = time.monotonic() - started
        after = [tool.name for tool in (await client.list_tools()).tools]
        check("agent_launch" not in after, f"agent_launch still listed: {after}")
        check(len(after) == len(before) - 1, f"{len(before)} tools before, {len(after)} after")
        changed.clear()
        policy(tools, data, node, "allow")
        await asyncio.wait_for(changed.wait(), WITHIN)
        again = [tool.name for tool in (await client.list_tools()).tools]
        check("agent_launch" in again, f"agent_launch not listed again: {again}")
    print(f"{len(before)} tools, list_changed {waited:.1f} s after `policy set launch deny`, {len(after)} tools")
    print("RESULT " + json.dumps({"before": len(before), "after": len(after)}))


if __name__ == "__main__":
    asyncio.run(main())
