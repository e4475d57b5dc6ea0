// The canvas view (see src/host/view/mod.rs): it GETs the canvas from its own server and
// POSTs the person's actions to /api/act (key in a header, JSON body). Everything that
// comes from the canvas (titles, terminal screens, URLs, notes, paths, the calls waiting
// for an answer) is untrusted and is put on the page as text, never as HTML, through
// putText: characters a person cannot see or that reorder what they read are shown as
// escapes. No control answers a key: keys go to the focused terminal only, and closing a
// node needs a real click on a second button.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  // The key comes in the fragment; it is kept for this tab (a reload keeps working) and
  // cleared from the address bar at once, so it is not shown, bookmarked or shared.
  const keyMatch = location.hash.match(/(?:^#|&)key=([0-9a-f]{64})(?:&|$)/);
  if (keyMatch) {
    sessionStorage.setItem("termsprawl-view-key", keyMatch[1]);
    history.replaceState(null, "", location.pathname);
  }
  const key = sessionStorage.getItem("termsprawl-view-key");
  const viewer = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) =>
    b.toString(16).padStart(2, "0")).join("");
  const elements = new Map(); // node id -> {type, root, parts}
  const view = { scale: 1, x: 0, y: 0, moved: false };
  let canvas = null;
  let version = "";
  let polling = null; // {controller, visible} of the poll in flight
  let soon = false; // the next poll asks at once (keys were just sent)
  let canAct = false;

  // ---- Text: every text the page shows from the canvas or an agent passes through here ----
  // Escaped, as escape_for_terminal (src/base/terminal_text.rs) escapes them for the CLI,
  // in the same forms: C0 controls (except those an element shows on purpose: `keep`),
  // DEL and C1; the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069);
  // every other default-ignorable character (zero-width U+200B–U+200D, U+2060–U+2064,
  // U+FEFF, the soft hyphen U+00AD, fillers, variation selectors, tags, the reserved
  // ranges); the line separators U+2028, U+2029 and U+FFF9–U+FFFB. So a call waiting for
  // the person shows the very characters that will run, however it tries to reorder or
  // hide them.
  const HIDDEN = /[\u{0}-\u{1f}\u{7f}-\u{9f}\u{ad}\u{34f}\u{61c}\u{115f}-\u{1160}\u{17b4}-\u{17b5}\u{180b}-\u{180f}\u{200b}-\u{200f}\u{2028}-\u{202e}\u{2060}-\u{206f}\u{3164}\u{fe00}-\u{fe0f}\u{feff}\u{ffa0}\u{fff0}-\u{fffb}\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}]/gu;
  const NAMED = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  const hex = (c, digits) => c.codePointAt(0).toString(16).padStart(digits, "0");
  const escapeOf = (c) => NAMED[c] || (c <= "\x9f" ? "\\x" + hex(c, 2)
    : c.codePointAt(0) <= 0xffff ? "\\u" + hex(c, 4) : "\\u{" + hex(c, 1) + "}");
  // `text` cut into [plain, escape, plain, …]: the escapes at odd places.
  function escapedPieces(text, keep) {
    const pieces = [];
    let from = 0;
    for (const found of text.matchAll(HIDDEN)) {
      if (keep.includes(found[0])) continue;
      pieces.push(text.slice(from, found.index), escapeOf(found[0]));
      from = found.index + found[0].length;
    }
    pieces.push(text.slice(from));
    return pieces;
  }
  // Puts `text` into `element` as text nodes, each escape in a span of the fixed class
  // "esc" (so it cannot pass for characters that were typed).
  function putText(element, text, keep = "") {
    const pieces = escapedPieces(String(text), keep);
    element.replaceChildren(...pieces.map((piece, i) => {
      if (i % 2 === 0) return document.createTextNode(piece);
      const escape = document.createElement("span");
      escape.className = "esc";
      escape.textContent = piece;
      return escape;
    }));
  }
  // The same as one string, where only a string fits (a tooltip, a list's choice).
  const escapedText = (text) => escapedPieces(String(text), "").join("");

  const make = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) putText(e, text);
    return e;
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const authorized = { headers: { Authorization: "Bearer " + key }, cache: "no-store" };

  function setStatus(text, bad) {
    const status = $("status");
    putText(status, text);
    status.classList.toggle("bad", !!bad);
  }

  function showMessage(text) {
    const message = $("message");
    putText(message, text);
    message.hidden = !text;
  }

  // ---- Live updates: a long poll that names the nodes in view --------------------------

  async function poll() {
    for (;;) {
      // Before the first drawing nothing is known to be in view: the server then
      // includes every screen once.
      const visible = canvas ? visibleIds().join(",") : null;
      const controller = new AbortController();
      polling = { controller, visible };
      const url = "/api/state?viewer=" + viewer + "&since=" + version +
        (visible === null ? "" : "&visible=" + visible) + (soon ? "&soon=1" : "");
      soon = false;
      let response;
      try {
        response = await fetch(url, { ...authorized, signal: controller.signal });
      } catch (error) {
        if (error.name === "AbortError") continue; // the view moved: ask again at once
        setStatus("disconnected; retrying", true);
        await sleep(1000);
        continue;
      } finally {
        polling = null;
      }
      if (response.ok) {
        let body;
        try {
          body = await response.json();
        } catch (error) {
          continue;
        }
        version = body.version;
        canAct = body.canAct === true;
        document.body.classList.toggle("watch-only", !canAct);
        if (Array.isArray(body.agentKinds)) fillAgentKinds(body.agentKinds);
        render(body.canvas);
        setStatus("live");
        continue;
      }
      let reason = "error " + response.status;
      try {
        reason = (await response.json()).error || reason;
      } catch (error) { /* keep the status */ }
      if (response.status === 401 || response.status === 429) {
        showMessage(reason);
        setStatus("refused", true);
        return;
      }
      setStatus(reason, true);
      await sleep(1000);
    }
  }

  // When panning or zooming shows other nodes, the poll in flight is asked again.
  let moveTimer = null;
  function viewChanged() {
    applyTransform();
    clearTimeout(moveTimer);
    moveTimer = setTimeout(() => {
      if (polling && polling.visible !== visibleIds().join(",")) polling.controller.abort();
      takeScreenshots();
    }, 150);
  }

  // ---- Drawing ---------------------------------------------------------------------------

  function render(next) {
    canvas = next;
    // The project folder's name; its id (what agents and the CLI name) in the tooltip.
    putText($("project"), canvas.projectName || canvas.projectId);
    $("project").title = "project " + escapedText(canvas.projectId);
    const statuses = new Map(canvas.agents.map((a) => [a.nodeId, a.status]));
    const selected = new Set(canvas.selection);
    const seen = new Set();
    for (const node of canvas.nodes) {
      seen.add(node.id);
      let entry = elements.get(node.id);
      if (!entry || entry.type !== node.type) {
        if (entry) entry.root.remove();
        entry = createNode(node);
        elements.set(node.id, entry);
        $("world").appendChild(entry.root);
      }
      updateNode(entry, node, statuses.get(node.id), selected.has(node.id));
    }
    for (const [id, entry] of elements) {
      if (!seen.has(id)) {
        entry.root.remove();
        elements.delete(id);
      }
    }
    drawLinks();
    fillLinkChoices();
    renderAgents(statuses);
    renderWorktrees();
    renderActivity(canvas.activity || []);
    renderApprovals(canvas.approvals || {});
    renderWaiting();
    if (!view.moved) fit();
    applyTransform();
  }

  // ---- Agents waiting for the person ------------------------------------------------------
  // A strip under the bar lists them (why, and the reason they gave, as text); each one's
  // node is outlined; the page title counts them; once the person allows it, a browser
  // notification says so when one starts waiting, also while the tab is in the background.
  const PAGE_TITLE = "termsprawl canvas";
  // `null` until the first drawing: agents already waiting when the page opens are listed,
  // not announced again.
  let waitingBefore = null;
  function renderWaiting() {
    const titles = new Map(canvas.nodes.map((n) => [n.id, (n.data && n.data.title) || n.id]));
    const waiting = canvas.agents.filter((a) => a.attention && a.attention.state === "waiting");
    const list = $("waiting-list");
    list.replaceChildren(...waiting.map((agent) => {
      const item = make("li");
      const why = agent.attention.why || "question";
      const label = (titles.get(agent.nodeId) || agent.nodeId) + " · " + why +
        (agent.attention.reason ? ": " + agent.attention.reason : "");
      const button = make("button", "go", label);
      button.type = "button";
      button.title = escapedText(label);
      button.addEventListener("click", () => {
        zoomTo(agent.nodeId);
        viewChanged();
      });
      item.append(button);
      return item;
    }));
    $("waiting").hidden = waiting.length === 0;
    const ids = new Set(waiting.map((a) => a.nodeId));
    for (const [id, entry] of elements) entry.root.classList.toggle("needs-you", ids.has(id));
    document.title = (waiting.length ? "(" + waiting.length + ") " : "") + PAGE_TITLE;
    const canNotify = typeof Notification === "function";
    $("notify-allow").hidden = !canNotify || Notification.permission !== "default";
    if (canNotify && Notification.permission === "granted") {
      for (const agent of waiting) {
        if (!waitingBefore || waitingBefore.has(agent.nodeId)) continue;
        const body = (agent.attention.why || "question") + (agent.attention.reason ? ": " + escapedText(agent.attention.reason) : "");
        new Notification(escapedText(titles.get(agent.nodeId) || agent.nodeId) + " waits for you", { body, tag: "termsprawl-" + agent.nodeId });
      }
    }
    waitingBefore = ids;
  }

  // Zooms to a node so its screen is readable (scale 1), centred.
  function zoomTo(nodeId) {
    const node = canvas && canvas.nodes.find((n) => n.id === nodeId);
    if (!node) return;
    const box = $("viewport").getBoundingClientRect();
    const r = rectOf(node);
    view.scale = 1;
    view.x = box.width / 2 - (r.x + r.w / 2);
    view.y = box.height / 2 - (r.y + r.h / 2);
    view.moved = true;
    applyTransform();
  }

  function createNode(node) {
    const root = make("div", "node kind-" + node.type);
    root.dataset.nodeId = node.id;
    const head = make("div", "head");
    const title = make("span", "title");
    const badge = make("span", "badge");
    head.append(title, badge);
    const meta = make("div", "meta");
    const body = make("div", "body");
    const grip = make("div", "grip control");
    root.append(head, meta, body, grip);
    const parts = { title, badge, meta, body };
    const entry = { type: node.type, root, parts, node };
    installDrag(entry, head, grip);
    if (node.type === "terminal") {
      // Beside the meta line, never over the screen: the agent's latest message, and the
      // shell's last command and how it ended. The frame is fixed (view.css), so the
      // screen keeps the size its terminal was given for the node.
      parts.isolation = make("span", "isolation");
      parts.isolation.hidden = true;
      parts.task = make("div", "task");
      parts.command = make("div", "command");
      parts.command.hidden = true;
      const metaLine = make("div", "meta-line");
      meta.replaceWith(metaLine);
      metaLine.append(parts.isolation, meta, parts.task, parts.command);
      parts.screen = make("pre", "screen");
      installFollow(parts);
      parts.keys = make("textarea", "keys");
      parts.keys.setAttribute("aria-label", "type into this terminal");
      parts.keys.spellcheck = false;
      body.append(parts.screen, parts.keys);
      installKeys(entry);
      const close = make("button", "close control", "close");
      close.type = "button";
      const confirm = make("button", "confirm-close control", "close this terminal");
      confirm.type = "button";
      confirm.hidden = true;
      head.append(close, confirm);
      installClose(entry, close, confirm);
    } else if (node.type === "browser") {
      parts.page = make("div", "page");
      parts.url = make("div", "url");
      parts.shot = make("img", "shot");
      parts.shot.alt = "";
      parts.shot.hidden = true;
      body.append(parts.page, parts.url, parts.shot);
    } else if (node.type === "sticky") {
      parts.text = make("div", "text");
      body.append(parts.text);
    } else if (node.type === "editor" || node.type === "diff") {
      parts.path = make("div", "path");
      body.append(parts.path);
    }
    return entry;
  }

  function updateNode(entry, node, status, selected) {
    entry.node = node;
    const { root, parts } = entry;
    const at = node.absolute || node.position;
    // A node being dragged stays where the pointer has it until the drag is sent.
    if (!entry.dragging) {
      root.style.left = at.x + "px";
      root.style.top = at.y + "px";
      root.style.width = node.size.width + "px";
      root.style.height = node.size.height + "px";
    }
    root.classList.toggle("selected", selected);
    const data = node.data || {};
    putText(parts.title, data.title || node.id);
    putText(parts.badge, node.type);
    putText(parts.meta, "");
    if (node.type === "terminal") {
      putText(parts.meta, terminalMeta(node, data, status));
      drawIsolation(parts.isolation, node.session);
      root.classList.toggle("ended", !!(node.session && node.session.ended));
      drawScreen(parts, node);
      follow(parts);
      drawCommand(parts.command, node.session && node.session.shell);
      const task = (canvas.tasks || []).find((t) => t.from === node.id || t.to === node.id);
      putText(parts.task, task ? taskLine(task, node.id) : "");
      parts.task.className = "task" + (task ? " state-" + task.state : "");
    } else if (node.type === "browser") {
      const tab = activeTab(data);
      const page = tab && node.pages ? node.pages[tab.id] : null;
      putText(parts.page, (page && page.title) || (tab && tab.title) || "");
      putText(parts.url, (page && page.url) || (tab && tab.url) || "");
    } else if (node.type === "sticky") {
      // A note shows its lines and tabs as they are.
      putText(parts.text, data.text || "", "\n\t");
    } else if (node.type === "editor" || node.type === "diff") {
      putText(parts.path, data.path || "");
      putText(parts.meta, node.type === "diff" ? "diff view" : "editor");
    }
  }

  function terminalMeta(node, data, status) {
    const words = [];
    const session = node.session;
    if (data.agentId || status) {
      words.push("agent " + ((status && status.adapter) || data.agentId || ""));
      if (status) words.push(status.state + (status.reason ? ": " + status.reason : ""));
    } else {
      words.push("shell");
    }
    if (!session) {
      words.push(data.agentId && !data.command ? "runs elsewhere" : "no session");
    } else if (session.ended) {
      const how = session.ended.signal !== undefined
        ? "killed by signal " + session.ended.signal
        : "exited with status " + session.ended.status;
      words.push("ended: " + how);
    } else {
      words.push(session.live ? "live" : "not running");
      if (session.warm) words.push("warm");
      words.push(session.backend);
      if (session.shell) words.push(session.shell.integration === "none" ? "no shell integration" : session.shell.integration);
    }
    return words.join(" · ");
  }

  // How a live terminal is confined (canvas_list's session.isolation): a badge first on its
  // meta line, so no status pushes it out; the mechanism and why in its tooltip.
  function drawIsolation(element, session) {
    const isolation = session && !session.ended && session.isolation;
    element.hidden = !isolation;
    if (!isolation) return;
    const kind = isolation.boundary ? "confined" : isolation.mode === "none" ? "none" : "partial";
    const words = { confined: "confined", partial: "not a boundary", none: "not confined" };
    putText(element, words[kind]);
    element.className = "isolation state-" + kind;
    element.title = escapedText(isolation.mode + ": " + isolation.why);
  }

  // A shell terminal's last command (canvas_list's session.shell): running, waiting for
  // input, full screen, or its exit status and duration. Text only, as everything here.
  const COMMAND_WORDS = { running: "running", awaiting_input: "waiting for input", fullscreen: "full screen", ended: "shell ended" };
  function drawCommand(element, shell) {
    const command = shell && shell.command;
    element.hidden = !command;
    if (!command) return;
    const seconds = (command.durationMs / 1000).toFixed(command.durationMs < 10000 ? 1 : 0) + " s";
    let state = COMMAND_WORDS[command.state] || command.state;
    let kind = command.state;
    if (command.state === "exited") {
      state = (command.exitCode === 0 ? "\u2713 " : "\u2717 ") + "exit " + command.exitCode;
      kind = command.exitCode === 0 ? "ok" : "failed";
    }
    putText(element, state + " \u00b7 " + command.command.split("\n")[0].slice(0, 60) + " \u00b7 " + seconds);
    element.className = "command state-" + kind;
    element.title = command.cwd ? "in " + escapedText(command.cwd) : "";
  }

  // The latest message this agent sent or got, as seen from its node.
  function taskLine(task, nodeId) {
    const sent = task.from === nodeId;
    const peer = sent ? task.to : task.from;
    return (sent ? "message to " : "message from ") + peer + " · " + task.state + " · " + task.text;
  }

  function activeTab(data) {
    const tabs = data.tabs || [];
    return tabs.find((t) => t.id === data.activeTabId) || tabs[0] || null;
  }

  function renderAgents(statuses) {
    const list = $("agents");
    list.replaceChildren();
    const titles = new Map(canvas.nodes.map((n) => [n.id, (n.data && n.data.title) || n.id]));
    for (const [nodeId, status] of statuses) {
      const item = make("li", "agent state-" + status.state);
      item.append(make("span", "name", titles.get(nodeId) || nodeId));
      item.append(make("span", "state", status.adapter + " · " + status.state));
      if (status.reason) item.append(make("span", "reason", status.reason));
      list.append(item);
    }
    if (!statuses.size) list.append(make("li", "empty", "no agents"));
  }

  // Each agent's git worktree (canvas_list's worktree): its branch and counts, and the
  // person's review: its diff (paged, shown as text), merge into its base, discard.
  const diffShown = { nodeId: null, offset: 0 };
  function renderWorktrees() {
    const list = $("worktrees");
    list.replaceChildren();
    const worktrees = canvas.worktrees || [];
    $("worktrees-panel").hidden = !worktrees.length;
    const titles = new Map(canvas.nodes.map((n) => [n.id, (n.data && n.data.title) || n.id]));
    for (const w of worktrees) {
      const node = { id: w.nodeId };
      const item = make("li", "worktree");
      item.dataset.nodeId = node.id;
      const closed = titles.has(node.id) ? "" : " (closed)";
      item.append(make("span", "name", (titles.get(node.id) || node.id) + closed + " · " + w.branch + " ← " + w.base));
      if (w.missing) {
        item.append(make("span", "missing", "its folder was removed"));
      } else {
        item.append(make("span", "counts", w.ahead + " ahead · " + w.behind + " behind · " + w.changedFiles + " changed" + (w.dirty ? " (not committed)" : "")));
      }
      const buttons = make("div", "control");
      const diff = make("button", "diff", "diff");
      const merge = make("button", "merge", "merge into " + w.base);
      const discard = make("button", "discard", "discard");
      for (const b of [diff, merge, discard]) b.type = "button";
      diff.addEventListener("click", () => showDiff(node.id, 0));
      merge.addEventListener("click", async (e) => {
        if (!realClick(e)) return;
        const done = await act("worktree_merge", { nodeId: node.id });
        if (done) notice("worktree_merge: " + done.message, false);
      });
      discard.addEventListener("click", async (e) => {
        if (!realClick(e)) return;
        const done = await act("worktree_discard", { nodeId: node.id });
        if (done) notice("worktree_discard: " + done.message, false);
      });
      buttons.append(diff, merge, discard);
      item.append(buttons);
      list.append(item);
    }
  }

  async function showDiff(nodeId, offset) {
    const page = await act("worktree_diff", { nodeId, offset });
    if (!page) return;
    diffShown.nodeId = nodeId;
    diffShown.offset = offset + page.lines;
    $("diff-view").hidden = false;
    putText($("diff-title"), page.branch + " against " + page.base + " · lines " + (offset + 1) + "–" + (offset + page.lines) + " of " + page.total + (page.cut ? " (cut)" : ""));
    // The agent's text: every hidden or reordering character shows as its escape.
    putText($("diff"), page.text, "\n\t");
    $("diff-more").hidden = diffShown.offset >= page.total;
  }

  function installWorktrees() {
    $("diff-more").addEventListener("click", () => showDiff(diffShown.nodeId, diffShown.offset));
    $("diff-close").addEventListener("click", () => { $("diff-view").hidden = true; });
  }

  // A time (Unix ms) as the person's local 24-hour clock, HH:MM:SS ("" if not a time).
  function clock(ms) {
    const at = new Date(ms);
    if (!Number.isFinite(ms) || Number.isNaN(at.getTime())) return "";
    return [at.getHours(), at.getMinutes(), at.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
  }

  function renderActivity(lines) {
    const list = $("activity");
    list.replaceChildren();
    for (const line of lines.slice(-30).reverse()) {
      const when = typeof line.time === "string" ? clock(Date.parse(line.time)) : "";
      const outcome = line.outcome === "ok" ? "ok" : "error";
      const item = make("li", "line " + outcome);
      const what = line.operation || (line.status ? "refused " + line.status : "");
      const ms = line.durationMs !== undefined ? " · " + line.durationMs + " ms" : "";
      const who = line.nodeId || (line.by === "person" ? "(person)" : "-");
      item.append(make("span", "when", when));
      item.append(make("span", "what", who + " " + what));
      item.append(make("span", "outcome", outcome + ms));
      if (line.error) item.append(make("span", "detail", line.error));
      const command = line.command;
      if (command && typeof command.state === "string") {
        const code = typeof command.exitCode === "number" ? " " + command.exitCode : "";
        const took = typeof command.durationMs === "number" ? " after " + command.durationMs + " ms" : "";
        item.append(make("span", "detail", "command " + command.state + code + took));
      }
      list.append(item);
    }
    if (!lines.length) list.append(make("li", "empty", "nothing yet"));
  }

  // Arrows between linked nodes, from border to border.
  function drawLinks() {
    const svg = $("links");
    for (const line of svg.querySelectorAll("line")) line.remove();
    for (const link of canvas.links) {
      const a = elements.get(link.a);
      const b = elements.get(link.b);
      if (!a || !b) continue;
      const ra = rectOf(a.node);
      const rb = rectOf(b.node);
      const from = border(ra, center(rb));
      const to = border(rb, center(ra));
      const line = document.createElementNS("http://www.w3.org/2000/svg", "line");
      line.setAttribute("x1", from.x);
      line.setAttribute("y1", from.y);
      line.setAttribute("x2", to.x);
      line.setAttribute("y2", to.y);
      line.setAttribute("marker-end", "url(#arrow)");
      line.dataset.link = link.a + "->" + link.b;
      if (link.agentMessages) line.classList.add("messages");
      svg.append(line);
    }
  }

  const rectOf = (node) => {
    const at = node.absolute || node.position;
    return { x: at.x, y: at.y, w: node.size.width, h: node.size.height };
  };
  const center = (r) => ({ x: r.x + r.w / 2, y: r.y + r.h / 2 });
  // Where the segment from r's centre towards p leaves r.
  function border(r, p) {
    const c = center(r);
    const dx = p.x - c.x;
    const dy = p.y - c.y;
    if (!dx && !dy) return c;
    const t = Math.min(dx ? (r.w / 2) / Math.abs(dx) : Infinity, dy ? (r.h / 2) / Math.abs(dy) : Infinity);
    return { x: c.x + dx * Math.min(t, 1), y: c.y + dy * Math.min(t, 1) };
  }

  // ---- Pan and zoom ----------------------------------------------------------------------

  function bounds() {
    const nodes = canvas ? canvas.nodes : [];
    if (!nodes.length) return { x: 0, y: 0, w: 1, h: 1 };
    let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
    for (const node of nodes) {
      const r = rectOf(node);
      x0 = Math.min(x0, r.x);
      y0 = Math.min(y0, r.y);
      x1 = Math.max(x1, r.x + r.w);
      y1 = Math.max(y1, r.y + r.h);
    }
    return { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
  }

  function fit() {
    const box = $("viewport").getBoundingClientRect();
    const b = bounds();
    const margin = 24;
    const scale = Math.min((box.width - 2 * margin) / b.w, (box.height - 2 * margin) / b.h, 1);
    view.scale = Math.max(scale, 0.05);
    view.x = (box.width - b.w * view.scale) / 2 - b.x * view.scale;
    view.y = (box.height - b.h * view.scale) / 2 - b.y * view.scale;
  }

  function applyTransform() {
    $("world").style.transform =
      "translate(" + view.x + "px, " + view.y + "px) scale(" + view.scale + ")";
  }

  // ---- Terminal screens: lines of styled runs and the cursor -----------------------------
  // Each run is a <span> whose text is set with putText and whose colours with
  // element.style, from colours the server made ("#rrggbb", checked again here): nothing
  // the terminal printed becomes markup, a class name or a style. The cursor is a cell in
  // a span of the fixed class "cursor". A screen is drawn again only when its runs or cursor changed.
  const SCREEN_FG = "#cfd6df";
  const SCREEN_BG = "#1f232b";
  const colour = (c) => (typeof c === "string" && /^#[0-9a-f]{6}$/.test(c) ? c : null);
  const runSpan = (run, text, cursor) => {
    const span = make("span", cursor ? "cursor" : "");
    // A tab stays a tab (the screen's runs keep them); a hidden character a program
    // printed (say U+202E) shows as its escape, as everywhere on the page.
    putText(span, text, "\t");
    let fg = colour(run.fg) || SCREEN_FG;
    let bg = colour(run.bg) || SCREEN_BG;
    // The cursor's cell is drawn inverse (so an inverse cell under it shows plain).
    if ((run.inverse === true) !== cursor) [fg, bg] = [bg, fg];
    if (fg !== SCREEN_FG) span.style.color = fg;
    if (bg !== SCREEN_BG) span.style.backgroundColor = bg;
    if (run.bold === true) span.style.fontWeight = "700";
    if (run.underline === true) span.style.textDecoration = "underline";
    return span;
  };
  // The spans of one line; the cursor's cell (padded with spaces past the text) split out.
  const lineSpans = (runs, cursorCol) => {
    const spans = [];
    let col = 0;
    for (const run of runs) {
      const chars = Array.from(String(run.text));
      const at = cursorCol - col;
      if (at >= 0 && at < chars.length) {
        if (at > 0) spans.push(runSpan(run, chars.slice(0, at).join(""), false));
        spans.push(runSpan(run, chars[at], true));
        if (at + 1 < chars.length) spans.push(runSpan(run, chars.slice(at + 1).join(""), false));
      } else {
        spans.push(runSpan(run, chars.join(""), false));
      }
      col += chars.length;
    }
    if (cursorCol >= col) {
      if (cursorCol > col) spans.push(make("span", "", " ".repeat(cursorCol - col)));
      spans.push(runSpan({}, " ", true));
    }
    return spans;
  };
  // A screen taller than its node (while the node is being resized, or drawn in a
  // font wider or taller than the one the terminal was sized for) shows its bottom, as a
  // terminal does, and keeps following new output. Once the person scrolls it up (wheel
  // or scrollbar) it stays where they put it, and follows again once they scroll back to
  // the bottom.
  const FOLLOW_SLACK = 4; // px: layout is fractional at most zoom levels
  function installFollow(parts) {
    parts.following = true;
    parts.screen.addEventListener("scroll", () => {
      const s = parts.screen;
      parts.following = s.scrollTop + s.clientHeight >= s.scrollHeight - FOLLOW_SLACK;
    });
  }
  function follow(parts) {
    const s = parts.screen;
    // A screen that fits its node again has nothing to stay scrolled up in.
    if (s.scrollHeight <= s.clientHeight) parts.following = true;
    if (parts.following) s.scrollTop = s.scrollHeight;
  }
  const drawScreen = (parts, node) => {
    if (!Array.isArray(node.screenLines)) return;
    const cursor = node.cursor && node.cursor.visible === true ? node.cursor : null;
    const drawn = JSON.stringify([node.screenLines, cursor]);
    if (parts.screenDrawn === drawn) return;
    parts.screenDrawn = drawn;
    const lines = node.screenLines.slice();
    // The cursor may sit on a blank row below the text.
    while (cursor && lines.length <= cursor.row && lines.length < 500) lines.push([]);
    const spans = [];
    lines.forEach((runs, row) => {
      if (row > 0) spans.push(document.createTextNode("\n"));
      const col = cursor && cursor.row === row ? cursor.col : -1;
      spans.push(...lineSpans(Array.isArray(runs) ? runs : [], col));
    });
    parts.screen.replaceChildren(...spans);
  };

  // Node ids whose rectangle is on screen.
  function visibleIds() {
    if (!canvas) return [];
    const box = $("viewport").getBoundingClientRect();
    return canvas.nodes
      .filter((node) => {
        const r = rectOf(node);
        const left = r.x * view.scale + view.x;
        const top = r.y * view.scale + view.y;
        return left < box.width && top < box.height &&
          left + r.w * view.scale > 0 && top + r.h * view.scale > 0;
      })
      .map((node) => node.id);
  }

  function installPanZoom() {
    const viewport = $("viewport");
    let drag = null;
    viewport.addEventListener("pointerdown", (e) => {
      if (e.target.closest(".head, .grip, .body, button, textarea")) return;
      drag = { x: e.clientX, y: e.clientY };
      viewport.setPointerCapture(e.pointerId);
    });
    viewport.addEventListener("pointermove", (e) => {
      if (!drag) return;
      view.x += e.clientX - drag.x;
      view.y += e.clientY - drag.y;
      drag = { x: e.clientX, y: e.clientY };
      view.moved = true;
      viewChanged();
    });
    viewport.addEventListener("pointerup", () => { drag = null; });
    viewport.addEventListener("wheel", (e) => {
      // Over a screen taller than its node, the wheel scrolls the screen.
      const screen = e.target.closest(".screen");
      if (screen && screen.scrollHeight > screen.clientHeight && !e.ctrlKey) return;
      e.preventDefault();
      const box = viewport.getBoundingClientRect();
      const px = e.clientX - box.left;
      const py = e.clientY - box.top;
      const factor = Math.exp(-e.deltaY / 500);
      const scale = Math.min(Math.max(view.scale * factor, 0.05), 4);
      view.x = px - (px - view.x) * (scale / view.scale);
      view.y = py - (py - view.y) * (scale / view.scale);
      view.scale = scale;
      view.moved = true;
      viewChanged();
    }, { passive: false });
    viewport.addEventListener("dblclick", (e) => {
      // On a node's title bar: zoom to that node, so its screen is readable.
      const head = e.target.closest(".node .head");
      if (head && !e.target.closest("button")) {
        zoomTo(head.closest(".node").dataset.nodeId);
        viewChanged();
        return;
      }
      if (e.target.closest(".node")) return;
      view.moved = false;
      fit();
      viewChanged();
    });
    window.addEventListener("resize", () => {
      if (!view.moved) fit();
      viewChanged();
    });
  }


  // ---- Acting: POST /api/act ---------------------------------------------------------------

  // Runs one action; its answer's value, or null after showing why it failed.
  async function act(action, args) {
    let response;
    try {
      response = await fetch("/api/act", {
        method: "POST",
        headers: { Authorization: "Bearer " + key, "Content-Type": "application/json" },
        body: JSON.stringify({ action, args }),
        cache: "no-store",
      });
    } catch (error) {
      notice("could not reach the server: " + error.message, true);
      return null;
    }
    let answer = {};
    try {
      answer = await response.json();
    } catch (error) { /* the status says it */ }
    if (!response.ok || answer.ok !== true) {
      notice(action + ": " + (answer.error || "refused (" + response.status + ")"), true);
      return null;
    }
    // Keys are their own confirmation (the echo); every other action says it was done.
    if (action !== "keys") notice(action + ": done", false);
    return answer.value;
  }

  // The last notice's text (a refused answer repeats it in the approvals panel).
  let noticeText = "";
  function notice(text, bad) {
    noticeText = text;
    const element = $("notice");
    putText(element, text);
    element.classList.toggle("bad", !!bad);
  }

  // A click made by a pointer: not a key press on a focused button (detail 0).
  const realClick = (e) => e.isTrusted && e.detail > 0;

  function installClose(entry, close, confirm) {
    // The confirmation shows for 5 s after a real click (a second click keeps it shown).
    close.addEventListener("click", (e) => {
      if (!realClick(e)) return;
      confirm.hidden = false;
      clearTimeout(entry.confirmTimer);
      entry.confirmTimer = setTimeout(() => { confirm.hidden = true; }, 5000);
    });
    confirm.addEventListener("click", async (e) => {
      if (!realClick(e)) return;
      confirm.hidden = true;
      await act("terminal_close", { nodeId: entry.node.id });
    });
  }

  // Dragging a node's head moves it; its corner grip resizes it. Sent once, on release.
  function installDrag(entry, head, grip) {
    const start = (e, resizing) => {
      if (!canAct || e.button !== 0 || e.target.closest("button")) return;
      e.stopPropagation();
      e.preventDefault();
      const node = entry.node;
      const origin = { x: e.clientX, y: e.clientY };
      const from = { ...node.position, ...node.size };
      const target = e.currentTarget;
      try {
        target.setPointerCapture(e.pointerId);
      } catch (error) { /* not an active pointer: moves still reach the target */ }
      let moved = null;
      entry.dragging = true;
      const move = (m) => {
        const dx = (m.clientX - origin.x) / view.scale;
        const dy = (m.clientY - origin.y) / view.scale;
        const at = node.absolute || node.position;
        if (resizing) {
          moved = { width: Math.max(120, Math.round(from.width + dx)), height: Math.max(80, Math.round(from.height + dy)) };
          entry.root.style.width = moved.width + "px";
          entry.root.style.height = moved.height + "px";
          if (entry.parts.screen) follow(entry.parts);
        } else {
          moved = { x: Math.round(from.x + dx), y: Math.round(from.y + dy) };
          entry.root.style.left = (at.x + dx) + "px";
          entry.root.style.top = (at.y + dy) + "px";
        }
      };
      const end = async () => {
        target.removeEventListener("pointermove", move);
        target.removeEventListener("pointerup", end);
        target.removeEventListener("pointercancel", end);
        entry.dragging = false;
        if (!moved) return;
        if (resizing) await act("canvas_resize", { nodeId: node.id, ...moved });
        else await act("canvas_move", { nodeId: node.id, ...moved });
      };
      target.addEventListener("pointermove", move);
      target.addEventListener("pointerup", end);
      target.addEventListener("pointercancel", end);
    };
    head.addEventListener("pointerdown", (e) => start(e, false));
    grip.addEventListener("pointerdown", (e) => start(e, true));
  }

  // ---- Keys into a terminal: batched, in order ------------------------------------------

  // What a terminal sends for a key (xterm, normal cursor mode); null for keys it ignores.
  const NAMED_KEYS = {
    Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b",
    ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D",
    Home: "\x1b[H", End: "\x1b[F", Insert: "\x1b[2~", Delete: "\x1b[3~",
    PageUp: "\x1b[5~", PageDown: "\x1b[6~",
    F1: "\x1bOP", F2: "\x1bOQ", F3: "\x1bOR", F4: "\x1bOS", F5: "\x1b[15~", F6: "\x1b[17~",
    F7: "\x1b[18~", F8: "\x1b[19~", F9: "\x1b[20~", F10: "\x1b[21~", F11: "\x1b[23~", F12: "\x1b[24~",
  };
  const CTRL_SYMBOLS = { "[": "\x1b", "\\": "\x1c", "]": "\x1d", "^": "\x1e", "_": "\x1f" };

  function keyText(e) {
    if (e.isComposing || e.metaKey) return null;
    const k = e.key;
    const alt = e.altKey ? "\x1b" : "";
    if (k === "Tab" && e.shiftKey) return "\x1b[Z";
    if (Object.prototype.hasOwnProperty.call(NAMED_KEYS, k)) return alt + NAMED_KEYS[k];
    if ([...k].length !== 1) return null;
    if (e.ctrlKey) {
      const lower = k.toLowerCase();
      if (lower >= "a" && lower <= "z") return alt + String.fromCharCode(lower.charCodeAt(0) - 96);
      return CTRL_SYMBOLS[k] ? alt + CTRL_SYMBOLS[k] : null;
    }
    return alt + k;
  }

  // Text typed as keys (an input method's): no control characters but tab, each line end
  // as Enter.
  const pastedText = (text) =>
    text.replace(/\r\n?|\n/g, "\r").replace(/[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f\x80-\x9f]/g, "");
  // A paste: line ends as newlines, no other control character (the server brackets it
  // when the program asked for that, and sends newlines as Enter).
  const pasteText = (text) =>
    text.replace(/\r\n?/g, "\n").replace(/[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]/g, "");

  // Per terminal, what to send in order: [action, text] pairs ("keys" or "paste").
  const typing = { queue: new Map(), timer: null, sending: false };

  function typeInto(nodeId, text, action = "keys") {
    if (!text) return;
    const queued = typing.queue.get(nodeId) || [];
    const last = queued[queued.length - 1];
    if (action === "keys" && last && last[0] === "keys") last[1] += text;
    else queued.push([action, text]);
    typing.queue.set(nodeId, queued);
    if (!typing.timer && !typing.sending) typing.timer = setTimeout(sendKeys, 12);
  }

  // One POST per terminal per batch, one batch at a time, so keys keep their order.
  async function sendKeys() {
    typing.timer = null;
    typing.sending = true;
    const batch = Array.from(typing.queue);
    typing.queue.clear();
    for (const [nodeId, queued] of batch) {
      for (const [action, text] of queued) {
        for (let at = 0; at < text.length; at += 8000) {
          await act(action, { nodeId, text: text.slice(at, at + 8000) });
        }
      }
    }
    typing.sending = false;
    // Look for the echo at once.
    soon = true;
    if (polling) polling.controller.abort();
    if (typing.queue.size) typing.timer = setTimeout(sendKeys, 0);
  }

  function installKeys(entry) {
    const sink = entry.parts.keys;
    entry.parts.body.addEventListener("pointerdown", (e) => {
      if (!canAct) return;
      e.stopPropagation();
    });
    entry.parts.body.addEventListener("click", () => {
      if (canAct) sink.focus({ preventScroll: true });
    });
    sink.addEventListener("focus", () => entry.root.classList.add("typing"));
    sink.addEventListener("blur", () => entry.root.classList.remove("typing"));
    sink.addEventListener("keydown", (e) => {
      // Ctrl+V / Ctrl+Shift+V / Shift+Insert paste (the paste event below).
      const lower = e.key.toLowerCase();
      if ((e.ctrlKey && lower === "v") || (e.shiftKey && e.key === "Insert")) return;
      const text = keyText(e);
      // Keys stay here: nothing else on the page hears them.
      e.stopPropagation();
      if (text === null) return;
      e.preventDefault();
      typeInto(entry.node.id, text);
    });
    sink.addEventListener("paste", (e) => {
      e.preventDefault();
      e.stopPropagation();
      typeInto(entry.node.id, pasteText(e.clipboardData.getData("text/plain")), "paste");
    });
    // Whatever else lands in the sink (an input method's text) is typed, then cleared.
    sink.addEventListener("input", () => {
      typeInto(entry.node.id, pastedText(sink.value));
      sink.value = "";
    });
  }

  // ---- Toolbar and links -----------------------------------------------------------------

  let agentKindsFilled = false;
  function fillAgentKinds(kinds) {
    if (agentKindsFilled) return;
    agentKindsFilled = true;
    const select = $("agent-kind");
    for (const kind of kinds) {
      if (typeof kind !== "string") continue;
      const option = make("option", "", escapedText(kind));
      option.value = kind;
      select.append(option);
    }
  }

  function agentIds() {
    return canvas ? canvas.nodes.filter((n) => n.type === "terminal" && n.data && n.data.agentId).map((n) => n.id) : [];
  }

  // The agents to link: the second list never offers the agent chosen in the first.
  function fillLinkChoices() {
    const ids = agentIds();
    fillChoices($("link-a"), ids);
    fillChoices($("link-b"), ids.filter((id) => id !== $("link-a").value));
    for (const id of ["link", "unlink"]) $(id).disabled = ids.length < 2;
  }

  function fillChoices(select, ids) {
    const chosen = select.value;
    const current = Array.from(select.options).map((o) => o.value);
    if (current.join(",") === ids.join(",")) return;
    select.replaceChildren(...ids.map((id) => {
      const option = make("option", "", escapedText(id));
      option.value = id;
      return option;
    }));
    if (ids.includes(chosen)) select.value = chosen;
  }

  function installControls() {
    const onClick = (id, run) => $(id).addEventListener("click", (e) => {
      if (realClick(e)) run();
    });
    onClick("new-terminal", () => act("terminal_open", {}));
    // Browsers ask the person before a page may notify; only after a click of theirs.
    onClick("notify-allow", () => {
      if (typeof Notification === "function") Notification.requestPermission().then(() => canvas && renderWaiting());
    });
    onClick("launch-agent", () => act("agent_launch", { agent: $("agent-kind").value }));
    onClick("browser-on", () => act("browser_control", { enabled: true }));
    onClick("browser-off", () => act("browser_control", { enabled: false }));
    $("link-a").addEventListener("change", fillLinkChoices);
    const linkArgs = () => ({ a: $("link-a").value, b: $("link-b").value });
    onClick("link", () => act("link", { ...linkArgs(), messages: $("link-messages").checked }));
    onClick("unlink", () => act("unlink", linkArgs()));
    onClick("approve-shown", allowAllShown);
  }

  // ---- Approvals: calls waiting for the person's answer, and each agent's rules ---------------

  // The calls the panel shows, exactly as shown: an answer names the call it saw, and
  // "allow all shown" answers these and nothing that arrived after they were drawn.
  let shownCalls = [];
  let shownCallsText = null;
  let shownRulesText = null;

  function renderApprovals(approvals) {
    const pending = Array.isArray(approvals.pending) ? approvals.pending : [];
    const text = JSON.stringify(pending);
    // Redrawn only when the calls change, so a reason being typed is kept.
    if (text !== shownCallsText) {
      shownCallsText = text;
      shownCalls = pending;
      const list = $("approvals");
      list.replaceChildren(...pending.map(callItem));
      if (!pending.length) list.append(make("li", "empty", "no call waits for an answer"));
      $("approve-shown").disabled = pending.length === 0;
    }
    renderRules(approvals);
  }

  function callItem(call) {
    const item = make("li", "call");
    item.dataset.callId = String(call.id);
    const what = make("div", "what");
    what.append(make("span", "who", String(call.nodeId)), make("span", "operation", String(call.operation)),
      make("span", "class", String(call.class)), make("span", "when", "asked " + clock(Number(call.askedAt))));
    // The arguments exactly as the agent sent them, as text: never HTML. JSON writes the
    // C0 controls as \u escapes; every other hidden character is escaped by putText (the
    // same \u202e form JSON reads back), and JSON's own lines are kept.
    const args = make("pre", "args");
    putText(args, JSON.stringify(call.args, null, 2), "\n");
    const answers = make("div", "answers control");
    const reason = make("input", "reason");
    reason.type = "text";
    reason.maxLength = 500;
    reason.placeholder = "reason (optional, for deny)";
    reason.setAttribute("aria-label", "reason for denying");
    const choices = [["allow", "allow once"], ["allow-for-session", "allow " + call.class + " for this session"],
      ["allow-always", "always allow"], ["deny", "deny"]];
    for (const [decision, label] of choices) {
      const button = make("button", "answer", label);
      button.type = "button";
      button.dataset.decision = decision;
      button.addEventListener("click", (e) => {
        if (realClick(e)) answerCall(call, decision, decision === "deny" ? reason.value.trim() : "");
      });
      answers.append(button);
    }
    answers.append(reason);
    item.append(what, args, answers);
    return item;
  }

  // One answer, bound to the call as shown; a refusal (answered or changed meanwhile)
  // is shown in the panel.
  async function answerCall(call, decision, reason) {
    const args = { id: call.id, nodeId: call.nodeId, operation: call.operation, args: call.args, decision };
    if (reason) args.reason = reason;
    const done = await act("approve", args);
    const message = $("approvals-message");
    putText(message, done === null ? noticeText : "");
    message.hidden = done !== null;
    return done !== null;
  }

  async function allowAllShown() {
    for (const call of shownCalls.slice()) await answerCall(call, "allow", "");
  }

  // The agents whose rules the person opened (kept when the panel is drawn again).
  const openRules = new Set();
  function renderRules(approvals) {
    const rules = Array.isArray(approvals.rules) ? approvals.rules : [];
    const classes = Array.isArray(approvals.classes) ? approvals.classes : [];
    const text = JSON.stringify([rules, classes]);
    if (text === shownRulesText) return;
    shownRulesText = text;
    const box = $("rules");
    box.replaceChildren(...rules.map((agent) => {
      // Folded until opened (with many agents, seven selects each fill the panel); the
      // summary says which classes are not simply allowed.
      const section = make("details", "agent-rules");
      section.dataset.nodeId = String(agent.nodeId);
      section.open = openRules.has(String(agent.nodeId));
      section.addEventListener("toggle", () => {
        if (section.open) openRules.add(String(agent.nodeId));
        else openRules.delete(String(agent.nodeId));
      });
      const notAllowed = classes.filter((name) => String((agent.classes || {})[name] || "allow") !== "allow")
        .map((name) => name + " " + String(agent.classes[name]));
      const summary = make("summary");
      summary.append(make("strong", "", String(agent.nodeId)));
      summary.append(make("span", "folded", notAllowed.length ? " · " + notAllowed.join(", ") : " · all allowed"));
      section.append(summary);
      for (const name of classes) {
        const current = String((agent.classes || {})[name] || "allow");
        const label = make("label", "", String(name));
        const select = make("select", "");
        select.dataset.class = String(name);
        for (const rule of ["allow", "ask", "deny"]) {
          const option = make("option", "", rule);
          option.value = rule;
          select.append(option);
        }
        select.value = current;
        select.addEventListener("change", async () => {
          const done = await act("rule", { nodeId: agent.nodeId, class: name, rule: select.value });
          if (done === null) select.value = current;
        });
        label.append(select, make("span", "rule", current));
        section.append(label);
      }
      return section;
    }));
    if (!rules.length) box.append(make("p", "empty", "no agents"));
  }

  // ---- Browser screenshots: only for browsers in view, at most one every 2 s -------------

  async function takeScreenshots() {
    if (!canvas) return;
    const inView = new Set(visibleIds());
    for (const [id, entry] of elements) {
      if (entry.type !== "browser" || !inView.has(id)) continue;
      try {
        const response = await fetch("/api/screenshot?node=" + encodeURIComponent(id), authorized);
        if (!response.ok) continue;
        const shot = await response.json();
        const image = typeof shot.image === "string" ? shot.image : "";
        if (/^[A-Za-z0-9+/=]+$/.test(image)) {
          entry.parts.shot.src = "data:image/png;base64," + image;
          entry.parts.shot.hidden = false;
        }
      } catch (error) { /* the next round tries again */ }
    }
  }

  // ---- Start -------------------------------------------------------------------------------

  if (!key) {
    setStatus("no key", true);
    showMessage("This page needs its key: open the viewUrl that termsprawl-tools serve printed (it ends in #key=…).");
    return;
  }
  installPanZoom();
  installControls();
  installWorktrees();
  poll();
  setInterval(takeScreenshots, 2000);
})();
