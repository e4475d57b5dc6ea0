// The canvas view (see src/host/view/mod.rs). Read-only: it only GETs its own server.
// Everything that comes from the canvas (titles, terminal screens, URLs, notes, paths) is
// untrusted and is put on the page with textContent, never as HTML.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const keyMatch = location.hash.match(/(?:^#|&)key=([0-9a-f]{64})(?:&|$)/);
  const key = keyMatch ? keyMatch[1] : null;
  const viewer = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) =>
    b.toString(16).padStart(2, "0")).join("");
  const elements = new Map(); // node id -> {type, root, parts}
  const view = { scale: 1, x: 0, y: 0, moved: false };
  let canvas = null;
  let version = "";
  let polling = null; // {controller, visible} of the poll in flight

  const make = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const authorized = { headers: { Authorization: "Bearer " + key }, cache: "no-store" };

  function setStatus(text, bad) {
    const status = $("status");
    status.textContent = text;
    status.classList.toggle("bad", !!bad);
  }

  function showMessage(text) {
    const message = $("message");
    message.textContent = text;
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
        (visible === null ? "" : "&visible=" + visible);
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
    $("project").textContent = "project " + canvas.projectId;
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
    renderAgents(statuses);
    renderActivity(canvas.activity || []);
    if (!view.moved) fit();
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
    root.append(head, meta, body);
    const parts = { title, badge, meta, body };
    if (node.type === "terminal") {
      parts.task = make("div", "task");
      parts.screen = make("pre", "screen");
      body.append(parts.task, parts.screen);
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
    return { type: node.type, root, parts, node };
  }

  function updateNode(entry, node, status, selected) {
    entry.node = node;
    const { root, parts } = entry;
    const at = node.absolute || node.position;
    root.style.left = at.x + "px";
    root.style.top = at.y + "px";
    root.style.width = node.size.width + "px";
    root.style.height = node.size.height + "px";
    root.classList.toggle("selected", selected);
    const data = node.data || {};
    parts.title.textContent = data.title || node.id;
    parts.badge.textContent = node.type;
    parts.meta.textContent = "";
    if (node.type === "terminal") {
      parts.meta.textContent = terminalMeta(node, data, status);
      root.classList.toggle("ended", !!(node.session && node.session.ended));
      if (node.screen !== undefined) parts.screen.textContent = node.screen;
      const task = (canvas.tasks || []).find((t) => t.from === node.id || t.to === node.id);
      parts.task.textContent = task ? taskLine(task, node.id) : "";
      parts.task.className = "task" + (task ? " state-" + task.state : "");
    } else if (node.type === "browser") {
      const tab = activeTab(data);
      const page = tab && node.pages ? node.pages[tab.id] : null;
      parts.page.textContent = (page && page.title) || (tab && tab.title) || "";
      parts.url.textContent = (page && page.url) || (tab && tab.url) || "";
    } else if (node.type === "sticky") {
      parts.text.textContent = data.text || "";
    } else if (node.type === "editor" || node.type === "diff") {
      parts.path.textContent = data.path || "";
      parts.meta.textContent = node.type === "diff" ? "diff view" : "editor";
    } else if (node.type === "group") {
      parts.meta.textContent = "";
    }
  }

  function terminalMeta(node, data, status) {
    const words = [];
    if (data.agentId || status) {
      words.push("agent " + ((status && status.adapter) || data.agentId || ""));
      if (status) words.push(status.state + (status.reason ? ": " + status.reason : ""));
    } else {
      words.push("shell");
    }
    const session = node.session;
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
    }
    return words.join(" · ");
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

  function renderActivity(lines) {
    const list = $("activity");
    list.replaceChildren();
    for (const line of lines.slice(-30).reverse()) {
      const when = typeof line.time === "string" ? line.time.slice(11, 19) : "";
      const outcome = line.outcome === "ok" ? "ok" : "error";
      const item = make("li", "line " + outcome);
      const what = line.operation || (line.status ? "refused " + line.status : "");
      const ms = line.durationMs !== undefined ? " · " + line.durationMs + " ms" : "";
      item.append(make("span", "when", when));
      item.append(make("span", "what", (line.nodeId || "-") + " " + what));
      item.append(make("span", "outcome", outcome + ms));
      if (line.error) item.append(make("span", "detail", line.error));
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
    viewport.addEventListener("dblclick", () => {
      view.moved = false;
      fit();
      viewChanged();
    });
    window.addEventListener("resize", () => {
      if (!view.moved) fit();
      viewChanged();
    });
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
  poll();
  setInterval(takeScreenshots, 2000);
})();
