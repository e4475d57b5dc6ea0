#!/usr/bin/env bash
# A/B of `serve` builds or flags: for ROUNDS rounds, each SPEC in turn starts a fresh
# server (pinned to CPU 0) and runs one `bench load` of OP with CONNS connections for 3 s
# (pinned to CPU 1), printing one line per run, then each SPEC's medians. A SPEC is a
# serve binary, optionally with extra serve arguments after a colon
# (`target/release/termsprawl-tools:--no-activity`), or `base`: the bench's bare
# tiny_http baseline, answering session_info with SESSION_INFO_BYTES (default 781) and
# canvas_list with CANVAS_LIST_BYTES (default 194), the sizes of serve's answers here.
# Build first: cargo build --release --bins --examples
#   examples/bench/serve-ab.sh session_info 16 3 base /tmp/serve-a /tmp/serve-b
# TERMINALS=N opens N shell terminals in each serve first (pass `:--terminals pty` or
# tmux in its SPEC), each left at its prompt after one finished command. OUTPUT=COMMAND
# then runs COMMAND (waited) in the first of them, and ARGS=JSON gives the calls'
# arguments, with NODE replaced by that terminal's id and END by its output cursor then:
#   TERMINALS=1 OUTPUT="seq 1 200000" ARGS='{"nodeId":"NODE","since":END}' \
#     examples/bench/serve-ab.sh terminal_read 1 3 target/release/termsprawl-tools:--terminals\ pty
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 OP CONNS ROUNDS SPEC..." >&2; exit 2; }
OP=$1; CONNS=$2; ROUNDS=$3; shift 3
BENCH=${CARGO_TARGET_DIR:-target}/release/examples/bench
json() { python3 -c "import json,sys;print(eval(sys.argv[2], {'j': json.load(open(sys.argv[1]))}))" "$@"; }
run() {
  local spec=$1 dir pid port token call_args=${ARGS:-"{}"}
  dir=$(mktemp -d)
  if [ "$spec" = base ]; then
    mkfifo "$dir/in"
    taskset -c 0 "$BENCH" baseline-server --answer "session_info=${SESSION_INFO_BYTES:-781}" \
      --answer "canvas_list=${CANVAS_LIST_BYTES:-194}" < "$dir/in" > "$dir/ready" &
    pid=$!
    exec 8> "$dir/in"  # the baseline stops when this closes
    for _ in $(seq 50); do [ -s "$dir/ready" ] && break; sleep 0.1; done
    token=$(json "$dir/ready" "j['sessions'][0]['token']")
  else
    local bin=${spec%%:*} extra=""
    [[ $spec == *:* ]] && extra=${spec#*:}
    mkdir -p "$dir/project"
    # shellcheck disable=SC2086 # extra holds serve arguments, split on purpose
    taskset -c 0 "$bin" serve --data "$dir/data" --project "$dir/project" \
      --project-id bench --agent bench-agent $extra > "$dir/ready" 2> "$dir/err" &
    pid=$!
    for _ in $(seq 50); do [ -s "$dir/ready" ] && break; sleep 0.1; done
    token=$(json "$dir/data/agent-tools/sessions/bench-agent.json" "j['token']")
    local ctl=${CARGO_TARGET_DIR:-target}/release/termsprawlctl
    local session="$dir/data/agent-tools/sessions/bench-agent.json" first=""
    for _ in $(seq "${TERMINALS:-0}"); do
      local node
      node=$("$ctl" --session "$session" call terminal_open '{}' | grep -o 'term-[0-9a-f]*')
      "$ctl" --session "$session" call terminal_submit \
        "{\"nodeId\":\"$node\",\"command\":\"true\",\"wait\":\"exit\"}" > /dev/null
      first=${first:-$node}
    done
    if [ -n "${OUTPUT:-}" ]; then
      "$ctl" --session "$session" call terminal_submit "$(python3 -c 'import json,sys
print(json.dumps({"nodeId": sys.argv[1], "command": sys.argv[2], "wait": "exit", "timeoutMs": 120000, "maxChars": 200}))' "$first" "$OUTPUT")" > /dev/null
    fi
    if [ -n "$first" ]; then
      local end
      end=$("$ctl" --session "$session" call terminal_read "{\"nodeId\":\"$first\",\"maxChars\":1}" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["value"].get("cursor", 0))')
      call_args=${ARGS:-"{}"}; call_args=${call_args//NODE/$first}; call_args=${call_args//END/$end}
    fi
  fi
  port=$(json "$dir/ready" "j['url'].split(':')[2].split('/')[0]")
  echo "$spec: $(taskset -c 1 "$BENCH" load --port "$port" --token "$token" --pid "$pid" \
    --operation "$OP" --args "$call_args" --connections "$CONNS" --duration 3)"
  if [ "$spec" = base ]; then exec 8>&-; else kill -TERM "$pid"; fi
  wait "$pid" 2>/dev/null || true
  # tmux terminals outlive serve by design: end them with the run.
  tmux -S "$dir/data/agent-tools/tmux/socket" kill-server 2>/dev/null || true
  rm -rf "$dir"
}
for _ in $(seq "$ROUNDS"); do
  for spec in "$@"; do run "$spec"; done
done | tee /dev/stderr | python3 -c '
import re, statistics, sys
runs = {}
for line in sys.stdin:
    m = re.match(r"(.+?): \S+ x\d+: (\d+) req/s, p50 ([\d.]+) ms, p99 ([\d.]+) ms, server CPU ([\d.]+)", line)
    if m:
        runs.setdefault(m.group(1), []).append([float(x) for x in m.groups()[1:]])
for spec, rows in runs.items():
    rate, p50, p99, cpu = (statistics.median(col) for col in zip(*rows))
    print(f"median {spec}: {rate:.0f} req/s, p50 {p50:.3f} ms, p99 {p99:.3f} ms, CPU {cpu:.1f} us/req ({len(rows)} runs)")
# Against the first SPEC, round by round (runs alternate, so each round is a pair): the
# median of the per-pair ratios, steadier than a ratio of medians on a noisy machine.
specs = list(runs)
for spec in specs[1:]:
    pairs = list(zip(runs[specs[0]], runs[spec]))
    rate = statistics.median(b[0] / a[0] for a, b in pairs)
    cpu = statistics.median(b[3] / a[3] for a, b in pairs)
    print(f"pairs {spec} / {specs[0]}: throughput {rate:.3f}x, CPU per request {cpu:.3f}x ({len(pairs)} pairs)")
'
