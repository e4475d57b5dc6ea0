// Replaces the value of the one visible input or textarea matching args.selector with
// args.text (typeInto, in common.js).
(args) => {
  const found = onlyVisibleMatch(args.selector);
  if (found.error) return found;
  return typeInto(found.element, args.text);
}
