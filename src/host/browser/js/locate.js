// Scrolls the one visible match of args.selector into view and returns the viewport
// coordinates of its centre, for a real mouse click there. Arms the click guard for the
// whole document: whatever of it is there takes the click.
(args) => {
  const found = onlyVisibleMatch(args.selector);
  if (found.error) return found;
  const el = found.element;
  el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
  const rect = el.getBoundingClientRect();
  const x = rect.left + rect.width / 2;
  const y = rect.top + rect.height / 2;
  if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) {
    return { error: "Element is outside the viewport even after scrolling" };
  }
  globalThis.termsprawlGuard.arm(document, false);
  return { x, y };
}
