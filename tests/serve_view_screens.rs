//! Terminal screens in the canvas view of a real `serve`, in real headless Chromium, on
//! both backends: a terminal gets the columns and rows its node shows (at `terminal_open`,
//! after an agent's `canvas_resize` and after the person drags its corner), a full row
//! fits inside the node, the newest line is in view, the command badge sits outside the
//! screen's text, and a screen taller than its node (while its corner is dragged) shows
//! its bottom and follows new output unless the person scrolled it up. Skips with a
//! notice where Chromium (or, for its half, tmux) is not installed.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;
use termsprawl_tools::host::browser::{BrowserEngine, PageId};
use termsprawl_tools::host::canvas::Size;

const WAIT: Duration = Duration::from_secs(20);

/// Where things are drawn in terminal node `node` (viewport px): the node, its screen's
/// box, the last place `needle` is drawn on the screen, the first line of text in view
/// there, the command badge when shown; whether the screen is taller than its box, how
/// far it is scrolled, and its text.
const MEASURE: &str = r#"(a) => {
  const node = document.querySelector('.node[data-node-id="' + a.node + '"]');
  const screen = node && node.querySelector(".screen");
  if (!screen) return null;
  const box = (r) => ({ left: r.left, top: r.top, right: r.right, bottom: r.bottom });
  const view = screen.getBoundingClientRect();
  let found = null;
  let first = null;
  const walker = document.createTreeWalker(screen, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    const range = document.createRange();
    const at = a.needle ? text.data.lastIndexOf(a.needle) : -1;
    if (at >= 0) {
      range.setStart(text, at);
      range.setEnd(text, at + a.needle.length);
      found = box(range.getBoundingClientRect());
    }
    if (!first && text.data.trim()) {
      range.selectNodeContents(text);
      const line = [...range.getClientRects()].find((r) => r.bottom > view.top + 1);
      // The whole width of the screen on that line.
      if (line) first = { left: view.left, top: line.top, right: view.right, bottom: line.bottom };
    }
  }
  const badge = node.querySelector(".command:not([hidden])");
  return {
    node: box(node.getBoundingClientRect()), screen: box(view), found, first,
    badge: badge ? box(badge.getBoundingClientRect()) : null,
    taller: screen.scrollHeight > screen.clientHeight + 1, scrollTop: screen.scrollTop,
    text: screen.textContent,
  };
}"#;

fn measure(engine: &BrowserEngine, page: &PageId, node: &str, needle: &str) -> Option<Value> {
    eval(
        engine,
        page,
        MEASURE,
        json!({"node": node, "needle": needle}),
    )
    .filter(|v| !v.is_null())
}

/// `inner` lies within `outer` (half a pixel of rounding allowed).
fn inside(inner: &Value, outer: &Value) -> bool {
    let at = |v: &Value, side: &str| v[side].as_f64().unwrap_or(f64::NAN);
    at(inner, "left") >= at(outer, "left") - 0.5
        && at(inner, "top") >= at(outer, "top") - 0.5
        && at(inner, "right") <= at(outer, "right") + 0.5
        && at(inner, "bottom") <= at(outer, "bottom") + 0.5
}

fn overlap(a: &Value, b: &Value) -> bool {
    let at = |v: &Value, side: &str| v[side].as_f64().unwrap_or(f64::NAN);
    at(a, "left") < at(b, "right")
        && at(b, "left") < at(a, "right")
        && at(a, "top") < at(b, "bottom")
        && at(b, "top") < at(a, "bottom")
}

/// Waits until the drawing of `node` shows `needle` inside both its screen's box and the
/// node, and returns the measure.
fn see_inside(engine: &BrowserEngine, page: &PageId, node: &str, needle: &str) -> Value {
    poll(&format!("{needle} in view inside its node"), WAIT, || {
        let m = measure(engine, page, node, needle)?;
        let shown = m["found"].is_object()
            && inside(&m["found"], &m["screen"])
            && inside(&m["found"], &m["node"]);
        shown.then_some(m)
    })
}

/// The terminal's size as its shell sees it: (columns, rows).
fn tput(serve: &Serve, dirs: &Dirs, term: &str) -> (u16, u16) {
    let done = submit_and_wait(
        serve,
        dirs,
        term,
        "echo size=$(tput cols)x$(tput lines)",
        json!({}),
    );
    let output = done["output"].as_str().unwrap_or_default();
    let size = output
        .lines()
        .find_map(|line| line.strip_prefix("size="))
        .unwrap_or_else(|| panic!("no size in {done}"));
    let (cols, rows) = size.split_once('x').unwrap();
    (cols.trim().parse().unwrap(), rows.trim().parse().unwrap())
}

/// Waits until `term`'s shell sees the size `expected`: tmux passes a pane's resize on at
/// once, or, when the pane was resized less than 250 ms before, after the rest of that
/// time (it spaces a pane's resizes so).
fn wait_size(serve: &Serve, dirs: &Dirs, term: &str, expected: (u16, u16), what: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let seen = tput(serve, dirs, term);
        if seen == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the shell sees {seen:?}, not {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The columns and rows a node of `term`'s size (as `canvas_list` has it) is drawn with.
fn grid_of(serve: &Serve, dirs: &Dirs, term: &str) -> (u16, u16) {
    let list = serve.ok(dirs, "me", "canvas_list", json!({}));
    let size: Size = serde_json::from_value(node(&list, term).unwrap()["size"].clone()).unwrap();
    let grid = size.terminal_grid();
    (grid.cols, grid.rows)
}

/// Drags the corner grip of `node` by (dx, dy) viewport px with pointer events: the press
/// and the move only (`release`: false), or the release.
fn drag_grip(engine: &BrowserEngine, page: &PageId, node: &str, dx: f64, dy: f64, release: bool) {
    let script = r#"(a) => {
      const grip = document.querySelector('.node[data-node-id="' + a.node + '"] .grip');
      const b = grip.getBoundingClientRect();
      const x = b.left + 5, y = b.top + 5;
      const at = (type, px, py) => grip.dispatchEvent(new PointerEvent(type,
        { pointerId: 1, button: 0, clientX: px, clientY: py, bubbles: true, cancelable: true }));
      if (a.release) {
        at("pointerup", x, y);
      } else {
        at("pointerdown", x, y);
        at("pointermove", x + a.dx / 2, y + a.dy / 2);
        at("pointermove", x + a.dx, y + a.dy);
      }
      return true;
    }"#;
    let args = json!({"node": node, "dx": dx, "dy": dy, "release": release});
    assert_eq!(eval(engine, page, script, args), Some(json!(true)));
}

/// Scrolls `node`'s screen to its top or bottom as the person would, and waits until the
/// scroll was reported (the page hears the same event).
fn scroll_screen(engine: &BrowserEngine, page: &PageId, node: &str, to_top: bool) {
    let script = r#"(a) => {
      const screen = document.querySelector('.node[data-node-id="' + a.node + '"] .screen');
      delete screen.dataset.scrolled;
      screen.addEventListener("scroll", () => { screen.dataset.scrolled = "yes"; }, { once: true });
      screen.scrollTop = a.top ? 0 : screen.scrollHeight;
      return true;
    }"#;
    let args = json!({"node": node, "top": to_top});
    assert_eq!(eval(engine, page, script, args), Some(json!(true)));
    let heard = r#"(a) => document.querySelector('.node[data-node-id="' + a.node + '"] .screen').dataset.scrolled || null"#;
    poll("the scroll", WAIT, || {
        eval(engine, page, heard, json!({"node": node})).filter(|v| v == "yes")
    });
}

#[test]
fn screens_fit_their_nodes_and_show_their_newest_lines() {
    let Some((engine, root)) = chromium("screens", &[]) else {
        return;
    };
    screens_on(&engine, "pty");
    if tmux_installed() {
        screens_on(&engine, "tmux");
    } else {
        eprintln!("NOTICE: tmux is not installed; its screens are not tried");
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}

fn screens_on(engine: &BrowserEngine, backend: &str) {
    let dirs = Dirs::new(&format!("screens-{backend}"));
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", backend]);
    let page = open_live(engine, &view_url(&serve), WAIT);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();

    // Opened at its node's size.
    let opened = grid_of(&serve, &dirs, &term);
    wait_size(&serve, &dirs, &term, opened, &format!("{backend}: opened"));

    // Sixty lines: the newest is in view, and the command badge is not over the text.
    submit_and_wait(
        &serve,
        &dirs,
        &term,
        "for i in $(seq 1 60); do echo line-$i; done",
        json!({}),
    );
    let shown = poll("the badge of the finished loop", WAIT, || {
        let m = see_inside(engine, &page, &term, "line-60");
        m["badge"].is_object().then_some(m)
    });
    assert!(shown["first"].is_object(), "{backend}: {shown}");
    assert!(
        !overlap(&shown["badge"], &shown["first"]),
        "{backend}: the badge covers the first line in view: {shown}"
    );
    assert!(
        inside(&shown["badge"], &shown["node"]),
        "{backend}: {shown}"
    );

    // While its corner is dragged up, the screen is taller than the node: its bottom
    // stays in view.
    drag_grip(engine, &page, &term, 0.0, -100.0, false);
    let dragged = see_inside(engine, &page, &term, "line-60");
    assert_eq!(dragged["taller"], true, "{backend}: {dragged}");
    // Scrolled up by the person, it stays there while output comes …
    scroll_screen(engine, &page, &term, true);
    submit_and_wait(
        &serve,
        &dirs,
        &term,
        "for i in $(seq 61 70); do echo line-$i; done",
        json!({}),
    );
    let stayed = poll("line-70 drawn", WAIT, || {
        let m = measure(engine, &page, &term, "line-70")?;
        m["found"].is_object().then_some(m)
    });
    assert_eq!(stayed["scrollTop"], 0, "{backend}: {stayed}");
    assert!(
        !inside(&stayed["found"], &stayed["screen"]),
        "{backend}: {stayed}"
    );
    // … and follows again once scrolled back to the bottom.
    scroll_screen(engine, &page, &term, false);
    submit_and_wait(
        &serve,
        &dirs,
        &term,
        "for i in $(seq 71 80); do echo line-$i; done",
        json!({}),
    );
    see_inside(engine, &page, &term, "line-80");

    // Released, the drag resizes the node and its terminal.
    drag_grip(engine, &page, &term, 0.0, 0.0, true);
    let dragged = poll("the dragged size in the canvas", WAIT, || {
        let grid = grid_of(&serve, &dirs, &term);
        (grid != opened).then_some(grid)
    });
    assert!(dragged.1 < opened.1, "{backend}: {dragged:?} {opened:?}");
    wait_size(
        &serve,
        &dirs,
        &term,
        dragged,
        &format!("{backend}: dragged"),
    );

    // An agent's canvas_resize resizes it too; a full row fits inside the node.
    serve.ok(
        &dirs,
        "me",
        "canvas_resize",
        json!({"nodeId": term, "width": 1000, "height": 640}),
    );
    let resized = grid_of(&serve, &dirs, &term);
    assert_ne!(resized, dragged, "{backend}");
    wait_size(
        &serve,
        &dirs,
        &term,
        resized,
        &format!("{backend}: resized"),
    );
    let full_row = "printf '%*s' $(( $(tput cols) - 7 )) '' | tr ' ' =; echo row-END";
    submit_and_wait(&serve, &dirs, &term, full_row, json!({}));
    let row = see_inside(engine, &page, &term, "=row-END");
    let text = row["text"].as_str().unwrap();
    let width = usize::from(resized.0);
    assert!(
        text.contains(&format!("{}row-END", "=".repeat(width - 7))),
        "{backend}: no full row of {width} in {text}"
    );
    assert!(serve.stop().success());
}
