// Returns {url, title, text, controls}: the page's visible text and its visible controls,
// each with a selector that matches exactly that element.
(limits) => {
  const unique = (selector, el) => {
    try {
      const all = document.querySelectorAll(selector);
      return all.length === 1 && all[0] === el;
    } catch (e) {
      return false;
    }
  };
  const selectorFor = (el) => {
    if (el.id && unique("#" + CSS.escape(el.id), el)) return "#" + CSS.escape(el.id);
    const name = el.getAttribute("name");
    if (name) {
      const byName = el.localName + '[name="' + CSS.escape(name) + '"]';
      if (unique(byName, el)) return byName;
    }
    const parts = [];
    let node = el;
    while (node && node.nodeType === 1 && node !== document.documentElement) {
      if (node.id && unique("#" + CSS.escape(node.id), node)) {
        parts.unshift("#" + CSS.escape(node.id));
        return parts.join(" > ");
      }
      let index = 1;
      for (let s = node.previousElementSibling; s; s = s.previousElementSibling) {
        if (s.localName === node.localName) index++;
      }
      parts.unshift(CSS.escape(node.localName) + ":nth-of-type(" + index + ")");
      node = node.parentElement;
    }
    parts.unshift("html");
    return parts.join(" > ");
  };
  const kind = (el) => {
    if (el.localName === "a") return "link";
    if (el.localName === "textarea") return "textarea";
    if (el.localName === "select") return "select";
    if (el.localName === "input" || el.localName === "button") return String(el.type || el.localName);
    return el.getAttribute("role") || el.localName;
  };
  const label = (el) =>
    el.innerText || el.value || el.getAttribute("aria-label") || el.getAttribute("placeholder") ||
    el.getAttribute("title") || el.getAttribute("name") || "";
  const controls = [];
  const candidates = document.querySelectorAll("a, button, input, textarea, select, [role=button]");
  for (const el of candidates) {
    if (controls.length >= limits.maxControls) break;
    if (!visible(el)) continue;
    const selector = selectorFor(el);
    if (!unique(selector, el)) continue;
    controls.push({
      tag: el.localName,
      text: clean(label(el), limits.controlText),
      selector: selector.toWellFormed(),
      type: kind(el),
    });
  }
  const root = document.body || document.documentElement;
  return {
    url: String(location.href).toWellFormed(),
    title: String(document.title || "").toWellFormed(),
    text: String(root ? root.innerText : "").slice(0, limits.textUnits).toWellFormed(),
    controls,
  };
}
