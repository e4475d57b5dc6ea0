// Replaces the value of the one visible input or textarea matching args.selector with
// args.text through the native value setter, then fires input and change.
(args) => {
  const found = onlyVisibleMatch(args.selector);
  if (found.error) return found;
  const el = found.element;
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
  Object.getOwnPropertyDescriptor(proto, "value").set.call(el, args.text);
  el.dispatchEvent(new Event("input", { bubbles: true }));
  el.dispatchEvent(new Event("change", { bubbles: true }));
  return { value: String(el.value).toWellFormed() };
}
