#!/usr/bin/env python3
"""What confining agents' terminals costs: time to open a terminal and launch an agent,
with `serve --isolation off`, `--isolation auto` (bubblewrap where it works) and
`--isolation landlock` side by side.

For each backend (pty, tmux) and setting, one `serve` runs; each round opens a terminal
as agent `me` and times, from the call, (1) the `terminal_open` answer and (2) the
shell's first answered command (`terminal_submit {"command": "true", "wait": "exit"}`,
retried until integration reports it), then closes it; and launches a custom agent (a
script that prints a line and sleeps) and times until its line shows. Settings alternate
round by round. Prints the median and the spread of each, in ms.

Usage: python3 examples/bench/confine_cost.py [ROUNDS]   (build first: cargo build --release)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "target", "release", "termsprawl-tools")


class Serve:
    def __init__(self, backend, isolation):
        self.dir = tempfile.mkdtemp(prefix="tsc-")
        data, project = os.path.join(self.dir, "data"), os.path.join(self.dir, "project")
        os.makedirs(os.path.join(data, "agent-tools"))
        os.makedirs(project)
        agent = os.path.join(self.dir, "agent")
        with open(agent, "w") as file:
            file.write("#!/bin/sh\ncase \"$1\" in --help) echo 'usage: agent'; exit 0;; "
                       "--version) echo 'agent 1'; exit 0;; esac\necho agent-up\nexec sleep 600\n")
        os.chmod(agent, 0o755)
        with open(os.path.join(data, "agent-tools", "preferences.json"), "w") as file:
            json.dump({"custom": {"executable": agent}}, file)
        env = dict(os.environ, SHELL="/bin/bash")
        self.process = subprocess.Popen(
            [TOOLS, "serve", "--data", data, "--project", project, "--agent", "me",
             "--terminals", backend, "--isolation", isolation, "--no-view", "--no-activity"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=project)
        ready = json.loads(self.process.stdout.readline())
        self.url = ready["url"]
        self.mode = ready["isolation"]["mode"]
        with open(ready["sessions"][0]["sessionFile"]) as file:
            self.token = json.load(file)["token"]
        self.data = data

    def call(self, operation, args):
        body = json.dumps({"operation": operation, "args": args}).encode()
        request = urllib.request.Request(self.url, data=body, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    def stop(self):
        self.process.terminate()
        self.process.wait()
        socket = os.path.join(self.data, "agent-tools", "tmux", "socket")
        subprocess.run(["tmux", "-S", socket, "kill-server"], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def open_terminal(serve):
    start = time.perf_counter()
    node = serve.call("terminal_open", {})["value"]["nodeId"]
    opened = time.perf_counter() - start
    while True:
        answer = serve.call("terminal_submit", {"nodeId": node, "command": "true",
                                                "wait": "exit", "timeoutMs": 5000})
        value = answer.get("value") or {}
        if value.get("integration", "none") != "none" and value.get("state") == "exited":
            break
    prompt = time.perf_counter() - start
    serve.call("terminal_close", {"nodeId": node})
    return opened * 1000, prompt * 1000


def launch(serve):
    start = time.perf_counter()
    node = serve.call("agent_launch", {"agent": "custom"})["value"]["nodeId"]
    while "agent-up" not in serve.call("terminal_read", {"nodeId": node})["value"]["output"]:
        time.sleep(0.002)
    took = (time.perf_counter() - start) * 1000
    serve.call("terminal_close", {"nodeId": node})
    return took


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    backends = ["pty"] + (["tmux"] if shutil.which("tmux") else [])
    print(f"{rounds} rounds each; medians (min-max) in ms")
    print("| backend | isolation | terminal_open answered | first command answered | agent up |")
    print("| --- | --- | --- | --- | --- |")
    for backend in backends:
        serves = {setting: Serve(backend, setting) for setting in ("off", "auto", "landlock")}
        figures = {setting: ([], [], []) for setting in serves}
        try:
            for _ in range(rounds):
                for setting, serve in serves.items():
                    opened, prompt = open_terminal(serve)
                    figures[setting][0].append(opened)
                    figures[setting][1].append(prompt)
                    figures[setting][2].append(launch(serve))
        finally:
            for serve in serves.values():
                serve.stop()
        for setting, serve in serves.items():
            cells = [f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"
                     for xs in figures[setting]]
            print(f"| {backend} | {setting} ({serve.mode}) | " + " | ".join(cells) + " |")


main()
