#!/usr/bin/env bash
# The pane filter's cost per byte of output, builds taking turns: for ROUNDS rounds, each
# SERVE starts on tmux (pinned to CPU 0), runs `seq 1 3000000` (20.9 MB) in a terminal
# with a wait, and prints the command's durationMs and the pane filter's CPU (its utime +
# stime from /proc, in ms). Build first: cargo build --release --bins
#   examples/bench/pane-output-ab.sh 3 /tmp/serve-a target/release/termsprawl-tools
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS SERVE..." >&2; exit 2; }
ROUNDS=$1; shift
CTL=${CARGO_TARGET_DIR:-target}/release/termsprawlctl
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)["value"][sys.argv[1]])' "$1"; }
cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }  # clock ticks of 10 ms
run() {
  local serve=$1 dir pid session node filter before duration
  dir=$(mktemp -d); mkdir -p "$dir/project"
  taskset -c 0 "$serve" serve --data "$dir/data" --project "$dir/project" --agent bench \
    --terminals tmux > "$dir/ready" 2> "$dir/err" &
  pid=$!
  for _ in $(seq 50); do [ -s "$dir/ready" ] && break; sleep 0.1; done
  session="$dir/data/agent-tools/sessions/bench.json"
  node=$("$CTL" --session "$session" call terminal_open '{}' | field nodeId)
  "$CTL" --session "$session" call terminal_submit \
    "{\"nodeId\":\"$node\",\"command\":\"true\",\"wait\":\"exit\"}" > /dev/null
  filter=$(tmux -S "$dir/data/agent-tools/tmux/socket" display -p -t "=$node:" '#{pane_pid}')
  before=$(cpu_ms "$filter")
  duration=$("$CTL" --session "$session" call terminal_submit \
    "{\"nodeId\":\"$node\",\"command\":\"seq 1 3000000\",\"wait\":\"exit\",\"timeoutMs\":120000,\"maxChars\":200}" \
    | field durationMs)
  echo "$serve: durationMs $duration, pane filter CPU $(( $(cpu_ms "$filter") - before )) ms"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  tmux -S "$dir/data/agent-tools/tmux/socket" kill-server 2>/dev/null || true
  rm -rf "$dir"
}
for _ in $(seq "$ROUNDS"); do
  for serve in "$@"; do run "$serve"; done
done
