// Helpers shared by the engine's page scripts. They run in an isolated world, so the
// page's own scripts cannot replace the DOM functions used here.
const visible = (el) => {
  const rect = el.getBoundingClientRect();
  if (rect.width <= 0 || rect.height <= 0) return false;
  if (typeof el.checkVisibility === "function") {
    return el.checkVisibility({ visibilityProperty: true, opacityProperty: false });
  }
  const style = getComputedStyle(el);
  return style.display !== "none" && style.visibility !== "hidden";
};
const clean = (text, max) =>
  String(text || "").replace(/\s+/g, " ").trim().slice(0, max).toWellFormed();
const onlyVisibleMatch = (selector) => {
  let matches;
  try {
    matches = Array.from(document.querySelectorAll(selector));
  } catch (e) {
    return { error: "Invalid selector: " + clean(e.message, 200) };
  }
  const shown = matches.filter(visible);
  if (shown.length !== 1) {
    return {
      error: "Selector must match exactly one visible element (it matched " + shown.length + ")",
    };
  }
  return { element: shown[0] };
};
