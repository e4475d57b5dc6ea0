#!/usr/bin/env bash
# A/B of `serve` builds or flags: for ROUNDS rounds, each SPEC in turn starts a fresh
# `serve` (pinned to CPU 0) and runs one `bench load` of OP with CONNS connections for 3 s
# (pinned to CPU 1), printing one line per run. A SPEC is a serve binary, optionally with
# extra serve arguments after a colon: `target/release/termsprawl-tools:--no-activity`.
# Build first: cargo build --release --bins --examples
#   examples/bench/serve-ab.sh session_info 16 3 /tmp/serve-a /tmp/serve-b
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 OP CONNS ROUNDS SPEC..." >&2; exit 2; }
OP=$1; CONNS=$2; ROUNDS=$3; shift 3
BENCH=${CARGO_TARGET_DIR:-target}/release/examples/bench
for _ in $(seq "$ROUNDS"); do
  for spec in "$@"; do
    bin=${spec%%:*}; extra=""
    [[ $spec == *:* ]] && extra=${spec#*:}
    dir=$(mktemp -d); mkdir -p "$dir/project"
    # shellcheck disable=SC2086 # extra holds serve arguments, split on purpose
    taskset -c 0 "$bin" serve --data "$dir/data" --project "$dir/project" \
      --project-id bench --agent bench-agent $extra > "$dir/ready" 2> "$dir/err" &
    pid=$!
    for _ in $(seq 50); do [ -s "$dir/ready" ] && break; sleep 0.1; done
    port=$(python3 -c "import json;print(json.load(open('$dir/ready'))['url'].split(':')[2].split('/')[0])")
    token=$(python3 -c "import json;print(json.load(open('$dir/data/agent-tools/sessions/bench-agent.json'))['token'])")
    echo "$spec: $(taskset -c 1 "$BENCH" load --port "$port" --token "$token" --pid "$pid" \
      --operation "$OP" --connections "$CONNS" --duration 3)"
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
