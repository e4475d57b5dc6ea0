#!/usr/bin/env bash
# Makes docs/canvas-view.png from a real run: `serve` with two agents, a few nodes opened
# through the tool API (termsprawlctl), a link between the agents, and the canvas view
# captured by headless Chromium (examples/view_screenshot.rs). Needs tmux, chromium, python3.
# Usage: docs/view-screenshot.sh [OUT.png]   (from the repository root, after cargo build --release --examples)
set -euo pipefail
out=$(realpath -m "${1:-docs/canvas-view.png}")
bin=$(realpath target/release)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait; "$bin/termsprawl-tools" stop-terminals --data "$work/data" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
(umask 077; mkdir -p "$work/project/.termsprawl/links") && mkdir -p "$work/www"
printf '<!doctype html><title>Build dashboard</title><body style="font:20px sans-serif;padding:24px"><h1>All green</h1><p>112 tests passed.</p>' > "$work/www/index.html"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$work/www" && exec python3 -m http.server "$port" --bind 127.0.0.1 > "$work/http.log" 2>&1) &
"$bin/termsprawl-tools" serve --data "$work/data" --project "$work/project" --agent planner --agent builder --browser > "$work/ready.json" 2> "$work/serve.log" &
for _ in $(seq 100); do [ -s "$work/ready.json" ] && break; sleep 0.1; done
view=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["viewUrl"])' "$work/ready.json")
call() { TERMSPRAWL_SESSION_FILE="$work/data/agent-tools/sessions/$1.json" "$bin/termsprawlctl" call "$2" "${3:-{\}}" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["value"].get("nodeId","") if isinstance(v.get("value"),dict) else "")'; }
"$bin/termsprawl-tools" link planner builder --messages --project "$work/project"
term=$(call builder terminal_open '{"title":"cargo test"}')
call builder terminal_submit "{\"nodeId\":\"$term\",\"command\":\"printf 'running 112 tests\\\\n...\\\\ntest result: ok. 112 passed; 0 failed\\\\n'\"}" > /dev/null
shell=$(call planner terminal_open '{"title":"notes"}')
call planner terminal_submit "{\"nodeId\":\"$shell\",\"command\":\"echo '<b>untrusted output stays text</b>'; uname -sr\"}" > /dev/null
call planner canvas_move "{\"nodeId\":\"$term\",\"x\":0,\"y\":520}" > /dev/null
call planner canvas_move "{\"nodeId\":\"$shell\",\"x\":700,\"y\":520}" > /dev/null
call planner canvas_group "{\"nodeIds\":[\"$term\",\"$shell\"],\"title\":\"Build\"}" > /dev/null
call planner sticky_open '{"text":"Plan:\n1. run the tests\n2. check the dashboard"}' > /dev/null
call builder browser_open "{\"url\":\"http://127.0.0.1:$port/\"}" > /dev/null
call planner canvas_select "{\"nodeIds\":[\"$term\"]}" > /dev/null
call planner agent_send '{"nodeId":"builder","text":"Run the tests and tell me what fails"}' > /dev/null
sleep 2
"$bin/examples/view_screenshot" "$view" "$out"
echo "wrote $out"
