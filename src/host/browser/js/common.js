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
// Replaces the value of el, a visible input or textarea, with text through the native
// value setter, then fires input and change.
const typeInto = (el, text) => {
  const textless = ["button", "submit", "reset", "checkbox", "radio", "file", "image", "range", "color", "hidden"];
  const isInput = el instanceof HTMLInputElement && !textless.includes(el.type);
  if (!isInput && !(el instanceof HTMLTextAreaElement)) {
    return { error: "Element is not a text input or textarea" };
  }
  if (el.disabled || el.readOnly) {
    return { error: "Element is disabled or read-only" };
  }
  const proto = isInput ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
  el.focus();
  Object.getOwnPropertyDescriptor(proto, "value").set.call(el, text);
  el.dispatchEvent(new Event("input", { bubbles: true }));
  el.dispatchEvent(new Event("change", { bubbles: true }));
  return { value: String(el.value).toWellFormed() };
};
