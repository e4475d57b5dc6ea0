"""Every answer a real `serve --browser` gives through `termsprawlctl mcp` conforms to the
`outputSchema` its tool declares, judged by the official Python MCP SDK's client and,
independently, by `jsonschema` here.

usage: mcp_output_schemas.py TERMSPRAWLCTL ME_SESSION PROJECT_DIR EXPECTED_OPERATIONS

The agent `me` calls every operation (a page served by this script for the browser
operations; a shell terminal; canvas, sticky and artifact nodes; `agent_launch` of the
fake `claude` the driver put on serve's PATH; `context_read` of a transcript the driver
linked; `browser_transfer` to the second agent `other`). It does so once per protocol
version that has structured results (legacy 2025-06-18 and 2025-11-25 through
`initialize`, 2026-07-28 per request). For every successful answer, `structuredContent`
must be an object that the tool's `outputSchema` validates (Draft 2020-12, the default
for a schema without `$schema`); the SDK's `call_tool` also validates it and raises when
it does not conform. An error answer must carry no `structuredContent`. An older version
(2025-03-26) must list no `outputSchema` and answer no `structuredContent`.

Prints one line per run and `RESULT {...}` with the operations validated; exits non-zero
on the first failed expectation or when fewer than EXPECTED_OPERATIONS distinct
operations were validated in a run.
"""

import asyncio
import http.server
import json
import os
import sys
import threading

import jsonschema
import mcp.client.session as session_module
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

PAGE = (
    b"<!doctype html><html><head><title>Schema page</title></head><body>"
    b"<h1>Structured results</h1><input id=\"q\"><button id=\"go\" "
    b"onclick=\"document.title = 'typed ' + document.getElementById('q').value\">Go</button>"
    b"<button id=\"ask\" onclick=\"document.title = confirm('Sure?') ? 'yes' : 'no'\">Ask</button>"
    b"<select id=\"c\"><option value=\"red\">Red</option><option value=\"blue\">Blue</option></select>"
    b"<label>Attach <input type=\"file\" id=\"up\"></label>"
    b"<script>console.log('schema page loaded')</script>"
    b"</body></html>"
)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


def page_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


class Run:
    """One client session: calls tools and validates every answer against its schema."""

    def __init__(self, client, label, schemas):
        self.client = client
        self.label = label
        self.schemas = schemas
        self.validated = set()

    async def ok(self, name, arguments=None):
        result = await self.client.call_tool(name, arguments or {})
        return self.validate(name, result)

    def validate(self, name, result):
        text = getattr(result.content[0], "text", "") if result.content else ""
        check(not result.is_error, f"{self.label}: {name} failed: {text}")
        content = result.structured_content
        check(isinstance(content, dict), f"{self.label}: {name}: structuredContent {content!r} is not an object")
        errors = list(jsonschema.Draft202012Validator(self.schemas[name]).iter_errors(content))
        check(not errors, f"{self.label}: {name}: {errors[0].message if errors else ''} in {json.dumps(content)[:400]}")
        self.validated.add(name)
        return content

    async def error(self, name, arguments):
        result = await self.client.call_tool(name, arguments)
        check(result.is_error, f"{self.label}: {name} {arguments} did not fail")
        check(result.structured_content is None, f"{self.label}: an error carried structuredContent")


async def every_operation(run, project, url):
    await run.ok("session_info")
    await run.ok("guide_read", {"topic": "overview"})
    await run.ok("agent_status")
    await run.ok("canvas_list")
    await run.error("canvas_move", {"nodeId": "ghost", "x": 0, "y": 0})

    sticky = (await run.ok("sticky_open", {"text": "structured results"}))["nodeId"]
    await run.ok("artifact_open", {"path": os.path.join(project, "notes.md")})
    await run.ok("artifact_open", {"path": os.path.join(project, "notes.md"), "view": "diff"})
    term = (await run.ok("terminal_open", {"title": "schemas"}))["nodeId"]
    # Calls that wait: their answers carry the command fields (without shell integration,
    # what the host knows: state from the foreground, exitCode null). First, so that no
    # command of the plain submit below still runs (a waited submit is refused then).
    waited = await run.ok("terminal_submit", {"nodeId": term, "command": "echo schema-$((6*7))", "wait": "exit", "timeoutMs": 5000})
    check(waited["integration"] in ("none", "bash", "zsh", "sh", "fish"), f"{run.label}: {waited}")
    await run.ok("terminal_submit", {"nodeId": term, "command": "sleep 30"})
    await run.ok("terminal_input", {"nodeId": term, "text": "typed while it sleeps", "keys": ["Left", "C-e"]})
    await run.ok("terminal_wait", {"nodeId": term, "until": "idle", "timeoutMs": 3000})
    await run.ok("terminal_interrupt", {"nodeId": term})
    screen = await run.ok("terminal_read", {"nodeId": term, "maxChars": 2000})
    # Followed from the start, and searched: the cursor, lost and matches fields.
    followed = await run.ok("terminal_read", {"nodeId": term, "since": 0})
    check(followed["cursor"] >= screen["cursor"] and "schema-42" in followed["output"], f"{run.label}: {followed}")
    found = await run.ok("terminal_read", {"nodeId": term, "search": "SCHEMA-42"})
    check(found["matchCount"] >= 1 and found["matches"][-1]["line"] >= 1, f"{run.label}: {found}")
    await run.error("terminal_input", {"nodeId": term, "keys": ["NoSuchKey"]})
    await run.ok("canvas_select", {"nodeIds": [sticky, term]})
    await run.ok("canvas_move", {"nodeId": sticky, "x": 40, "y": -20})
    resized = await run.ok("canvas_resize", {"nodeId": sticky, "width": 1, "height": 1})
    check(resized["clamped"] and "message" in resized, f"{run.label}: resize {resized}")
    await run.ok("canvas_resize", {"nodeId": sticky, "width": 400, "height": 300})
    await run.ok("canvas_group", {"nodeIds": [sticky], "title": "grouped"})
    await run.ok("canvas_group", {"nodeIds": [term]})
    listed = await run.ok("canvas_list")
    check(any(node.get("parentId") for node in listed["result"]), f"{run.label}: no grouped node listed")

    browser = (await run.ok("browser_open", {"url": url}))["nodeId"]
    await run.ok("browser_list")
    await run.ok("browser_claim", {"nodeId": browser})
    await run.ok("browser_inspect", {"nodeId": browser})
    await run.ok("browser_type", {"nodeId": browser, "selector": "#q", "text": "abc"})
    await run.ok("browser_click", {"nodeId": browser, "selector": "#go"})
    # The accessibility snapshot, paged, and the same calls by ref.
    snap = await run.ok("browser_inspect", {"nodeId": browser, "mode": "snapshot", "maxChars": 3000})
    check(snap["cut"] is False and "nextOffset" not in snap, f"{run.label}: snapshot {snap}")
    await run.ok("browser_inspect", {"nodeId": browser, "mode": "snapshot", "snapshot": snap["snapshot"], "offset": 1})
    refs = {}
    for line in snap["text"].splitlines()[1:]:
        if "[ref=" in line:  # the first of each role: the Go button, not Ask
            refs.setdefault(" ".join(line.split()[:2]), line.rsplit("[ref=", 1)[1].rstrip("]"))
    check("- textbox" in refs and "- button" in refs, f"{run.label}: refs {refs} of {snap['text']}")
    await run.ok("browser_type", {"nodeId": browser, "ref": refs["- textbox"], "text": "by ref"})
    await run.ok("browser_click", {"nodeId": browser, "ref": refs["- button"]})
    await run.error("browser_click", {"nodeId": browser, "ref": "e999999"})
    await run.ok("browser_navigate", {"nodeId": browser, "url": url + "?second"})
    # Waits, and a dialog: reported by the click, refused around, then answered.
    waited = await run.ok("browser_wait", {"nodeId": browser, "text": "structured results", "timeoutMs": 5000})
    check(waited["state"] == "met", f"{run.label}: wait {waited}")
    await run.ok("browser_wait", {"nodeId": browser, "idle": "network", "timeoutMs": 5000})
    await run.ok("browser_wait", {"nodeId": browser, "textGone": "Structured", "timeoutMs": 300})
    asked = await run.ok("browser_click", {"nodeId": browser, "selector": "#ask"})
    check(asked.get("after") == "dialog", f"{run.label}: click {asked}")
    await run.error("browser_inspect", {"nodeId": browser})
    await run.ok("browser_dialog", {"nodeId": browser, "accept": True})
    await run.error("browser_dialog", {"nodeId": browser, "accept": True})
    await run.ok("browser_screenshot", {"nodeId": browser})
    # Keys, options, hover, history and the viewport, by refs of a fresh snapshot.
    snap = await run.ok("browser_inspect", {"nodeId": browser, "mode": "snapshot"})
    refs = {}
    for line in snap["text"].splitlines()[1:]:
        if "[ref=" in line:
            refs.setdefault(" ".join(line.split()[:2]), line.rsplit("[ref=", 1)[1].rstrip("]"))
    await run.ok("browser_press", {"nodeId": browser, "key": "Tab"})
    await run.ok("browser_press", {"nodeId": browser, "key": "Control+A", "ref": refs["- textbox"]})
    chosen = await run.ok("browser_select", {"nodeId": browser, "ref": refs["- combobox"], "values": ["Blue"]})
    check(chosen["selected"] == ["blue"], f"{run.label}: select {chosen}")
    await run.ok("browser_hover", {"nodeId": browser, "ref": refs["- button"]})
    await run.error("browser_press", {"nodeId": browser, "key": "Hyper+Q"})
    await run.ok("browser_history", {"nodeId": browser, "action": "back"})
    await run.ok("browser_history", {"nodeId": browser, "action": "reload"})
    sized = await run.ok("browser_resize", {"nodeId": browser, "width": 390, "height": 844})
    check(sized["innerWidth"] == 390, f"{run.label}: resize {sized}")
    # What the page logged and fetched, and a file for its input.
    logged = await run.ok("browser_console", {"nodeId": browser})
    check(any("schema page loaded" in m["text"] for m in logged["messages"]), f"{run.label}: console {logged}")
    fetched = await run.ok("browser_network", {"nodeId": browser, "maxChars": 2000})
    check(len(fetched["requests"]) > 0, f"{run.label}: network {fetched}")
    await run.ok("browser_network", {"nodeId": browser, "requestId": fetched["requests"][-1]["requestId"]})
    snap = await run.ok("browser_inspect", {"nodeId": browser, "mode": "snapshot"})
    attach = [line for line in snap["text"].splitlines() if "Attach" in line and "[ref=" in line]
    check(len(attach) > 0, f"{run.label}: no file input in {snap['text']}")
    up = attach[0].rsplit("[ref=", 1)[1].rstrip("]")
    notes = os.path.realpath(os.path.join(project, "notes.md"))
    uploaded = await run.ok("browser_upload", {"nodeId": browser, "ref": up, "paths": [notes]})
    check(uploaded["files"] == ["notes.md"], f"{run.label}: upload {uploaded}")
    await run.ok("browser_transfer", {"nodeId": browser, "agentNodeId": "other"})
    await run.ok("browser_list")

    # The tmux backend is what opens external views; the PTY one refuses.
    external = await run.client.call_tool("terminal_external", {"nodeId": term})
    if not external.is_error:
        run.validate("terminal_external", external)
    await run.ok("terminal_close", {"nodeId": term})
    await run.ok("agent_launch", {"agent": "claude"})
    # Agent messaging: "other" sent me a task before this script ran (mcp_python_sdk.rs);
    # every run repeats the same send (one messageId) and the same reply, which are
    # accepted again without delivering anything twice.
    await run.ok("agent_cards")
    said = await run.ok("agent_state", {"state": "waiting", "why": "question", "reason": "Which branch should I use?"})
    check(said["attention"]["state"] == "waiting", f"{run.label}: agent_state {said}")
    await run.ok("agent_state", {"state": "working"})
    sent = await run.ok("agent_send", {"nodeId": "other", "text": "check the schemas", "messageId": "schema-check"})
    await run.ok("agent_task", {"taskId": sent["taskId"]})
    inbox = (await run.ok("agent_task"))["tasks"]
    incoming = [task for task in inbox if task["to"] == "me"]
    check(len(incoming) == 1, f"{run.label}: inbox {inbox}")
    await run.ok("agent_reply", {"taskId": incoming[0]["taskId"], "text": "schemas checked"})
    await run.error("agent_send", {"nodeId": "me", "text": "to myself"})
    context = await run.ok("context_read")
    check("check the schemas" in context["text"], f"{run.label}: the linked transcript was not read: {context}")
    await run.ok("canvas_list")


async def structured_run(ctl, session_file, project, url, label, mode, handshake_version=None):
    if handshake_version is not None:
        session_module.LATEST_HANDSHAKE_VERSION = handshake_version
    params = StdioServerParameters(command=ctl, args=["--session", session_file, "mcp"])
    async with Client(params, mode=mode, cache=None) as client:
        negotiated = client.protocol_version
        tools = (await client.list_tools()).tools
        schemas = {}
        for tool in tools:
            schema = tool.output_schema
            check(schema is not None, f"{label}: {tool.name} lists no outputSchema")
            check(schema.get("type") == "object", f"{label}: {tool.name}: outputSchema is not an object schema")
            jsonschema.Draft202012Validator.check_schema(schema)
            schemas[tool.name] = schema
        check(len(schemas) == 44, f"{label}: {len(schemas)} tools listed (browser control on: 44)")
        run = Run(client, label, schemas)
        await every_operation(run, project, url)
        return negotiated, run.validated


async def unstructured_run(ctl, session_file, version):
    session_module.LATEST_HANDSHAKE_VERSION = version
    params = StdioServerParameters(command=ctl, args=["--session", session_file, "mcp"])
    async with Client(params, mode="legacy", cache=None) as client:
        check(client.protocol_version == version, f"negotiated {client.protocol_version}")
        tools = (await client.list_tools()).tools
        check(all(tool.output_schema is None for tool in tools), f"{version}: an outputSchema was listed")
        for name in ["session_info", "canvas_list"]:
            result = await client.call_tool(name, {})
            check(not result.is_error and result.structured_content is None, f"{version}: {name}: {result}")
    return f"{version}: no outputSchema on {len(tools)} tools, no structuredContent"


async def main():
    ctl, session_file, project, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    url = page_server()
    runs = [("legacy 2025-06-18", "legacy", "2025-06-18"), ("legacy 2025-11-25", "legacy", "2025-11-25")]
    runs += [(f"modern {v}", v, None) for v in MODERN_PROTOCOL_VERSIONS]
    original = session_module.LATEST_HANDSHAKE_VERSION
    counts = {}
    try:
        for label, mode, handshake_version in runs:
            negotiated, validated = await structured_run(
                ctl, session_file, project, url, label, mode, handshake_version
            )
            check(
                len(validated) >= expected,
                f"{label}: only {len(validated)} of {expected} operations validated: {sorted(validated)}",
            )
            counts[label] = len(validated)
            print(f"{label}: negotiated {negotiated}, {len(validated)} operations validated: {' '.join(sorted(validated))}")
        print(await unstructured_run(ctl, session_file, "2025-03-26"))
    finally:
        session_module.LATEST_HANDSHAKE_VERSION = original
    print("RESULT " + json.dumps({"validated": counts}))


if __name__ == "__main__":
    asyncio.run(main())
