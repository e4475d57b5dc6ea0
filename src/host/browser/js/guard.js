// The click guard. It runs in our isolated world of every document before the page's own
// scripts (Page.addScriptToEvaluateOnNewDocument), so its capturing listeners on the
// window come before any listener of the page, and page scripts cannot reach it.
// Nobody but us sends input to this browser, so a trusted press, release or click is one
// of our clicks: it reaches the page only while a click is armed in this document (arm)
// and only when it lands in that click's element, showing what it showed when armed.
// Any other is stopped (preventDefault, stopImmediatePropagation) before the page sees
// it, in every document: a press the page moved onto another element, another frame or
// into a shadow root is held wherever it lands. take() says what happened and disarms.
// A click by selector arms the whole document: anything of it may take the click, as
// before the guard; a press moved into another frame is held all the same.
(() => {
  if (globalThis.termsprawlGuard) return;
  const TYPES = ["pointerdown", "mousedown", "pointerup", "mouseup", "click", "auxclick", "dblclick", "contextmenu"];
  const PRESSES = ["pointerdown", "mousedown"];
  // What the element's role and accessible name are made of, to see them change.
  const label = (el) => {
    const root = el.getRootNode();
    const ids = (el.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean);
    const labelledBy = ids.map((id) => root.getElementById?.(id)?.textContent);
    const labels = Array.from(el.labels || [], (l) => l.textContent);
    const buttonValue = el.localName === "input" && ["button", "submit", "reset"].includes(el.type);
    const attrs = ["role", "aria-label", "title", "alt"].map((name) => el.getAttribute(name));
    return JSON.stringify([attrs, el.textContent, labelledBy, labels, buttonValue ? el.value : ""]);
  };
  // Whether node is el or inside it, across shadow roots.
  const inside = (node, el) => {
    for (let n = node; n; n = n.parentNode || n.host) if (n === el) return true;
    return false;
  };
  // el itself in the document, or the host in the document of the shadow roots it is in.
  const outerHost = (el) => {
    let n = el;
    while (n.getRootNode() instanceof ShadowRoot) n = n.getRootNode().host;
    return n;
  };
  // Whether the event landed in el. Seen from the window, composedPath() hides what is
  // inside a closed shadow root: for an element in one, once the path shows the event
  // inside its host, el's own root says what is at the event's point.
  const landed = (event, el) => {
    const path = event.composedPath();
    if (path.includes(el)) return true;
    const root = el.getRootNode();
    if (!(root instanceof ShadowRoot) || !path.includes(outerHost(el))) return false;
    return inside(root.elementFromPoint(event.clientX, event.clientY), el);
  };
  // What an event landed in, for the refusal: tag, id and a short text.
  const describe = (node) => {
    const el = node && node.nodeType !== 1 ? node.parentElement : node;
    if (!el) return { tag: "", id: "", text: "" };
    const text = String(el.getAttribute("aria-label") || el.textContent || "").replace(/\s+/g, " ").trim();
    return { tag: el.localName, id: el.id, text: text.slice(0, 80).toWellFormed() };
  };
  // The armed click: its element, its label then, and what happened so far.
  let armed = null;
  // Whether the armed click may go on with this event; if not, notes why.
  const allowed = (event, click) => {
    if (click.refused || click.changed) return false;
    if (!landed(event, click.element)) {
      click.refused = describe(event.composedPath()[0]);
      return false;
    }
    if (click.label !== null && PRESSES.includes(event.type) && label(click.element) !== click.label) {
      click.changed = true;
      return false;
    }
    if (event.type === "click") click.clicked = true;
    return true;
  };
  const check = (event) => {
    // The page's own synthetic events are its business.
    if (!event.isTrusted) return;
    // After the element's click, what its activation does (a label clicks its input).
    if (armed && armed.clicked) return;
    if (armed && allowed(event, armed)) return;
    event.preventDefault();
    event.stopImmediatePropagation();
  };
  // Adding a listener again is a no-op while it is there.
  const listen = () => {
    for (const type of TYPES) addEventListener(type, check, { capture: true });
  };
  listen();
  // document.open() drops every listener of the window, ours too, and replaces the
  // document's children: listen again then (a microtask, before the next event).
  new MutationObserver(listen).observe(document, { childList: true });
  globalThis.termsprawlGuard = {
    // Arms a click on node (a text node stands for its element, and a document takes any
    // click of its own) until take(); watchLabel refuses it if the label changes.
    arm(node, watchLabel) {
      const element = node.nodeType === 3 ? node.parentElement : node;
      const was = watchLabel ? label(element) : null;
      armed = { element, label: was, clicked: false, refused: null, changed: false };
    },
    // {clicked, refused, changed} of the armed click (null if none); disarms.
    take() {
      const click = armed;
      armed = null;
      return click && { clicked: click.clicked, refused: click.refused, changed: click.changed };
    },
  };
})();
