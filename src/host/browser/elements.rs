//! The DevTools side of snapshots and refs: taking a page's snapshot, finding a ref's
//! element again (or saying why it cannot be found), and clicking or typing into it.
//!
//! A snapshot covers the main frame, its frames and shadow roots, open and closed (the
//! accessibility tree is built on the composed tree). Frames of the page's site are read
//! through the page's session; a frame of another site runs in a process of its own and
//! is read through its own session (`frames.rs`). An `<iframe>` whose document cannot be
//! read (too deep, too many frames, not attached yet) says `[contents not included]`.
//!
//! A ref is resolved only through the page's ref table ([`super::refs`]): its frame must
//! still show the same document (loader id), its backend node must still be in it, and
//! it must show the role and name its snapshot showed (`Accessibility.getPartialAXTree`),
//! or it is refused as changed. Its element is reached in an isolated world, so page
//! scripts cannot change what our functions see. Before a click, the element's centre is
//! hit-tested (`DOM.getNodeForLocation`): if something else is there, nothing is clicked.
//! Then the click guard (`js/guard.js`) is armed for the element: the press, release and
//! click reach the page only where they land in it, still showing what it showed; a
//! page that puts something else under the pointer in time (on the mouse's move, say)
//! has the press held wherever it lands, and the click is refused (after two more tries,
//! in case the cover was passing).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cdp::{CdpError, Connection};
use super::dialogs::call_unless_dialog;
use super::refs::{PageRefs, RefError, RefKey};
use super::snapshot::{self, Element, Snapshot, View};
use super::{lock, script_succeeded, EngineError, PageId, COMMON_JS, GUARD_JS, TOOLS_WORLD};

/// Where a ref's element is: its JavaScript object in an isolated world of its frame.
struct Resolved {
    object: String,
    key: RefKey,
    /// The session of its frame: the page's, or its frame's in another process.
    session: String,
    /// The isolated world the object lives in.
    context: i64,
    /// The element is in the main frame's document (not in an `<iframe>`).
    in_main_frame: bool,
}

/// Frames deeper than this below the main frame are listed without their contents.
const MAX_FRAME_DEPTH: usize = 4;
/// At most this many frames' contents are read into one snapshot.
const MAX_FRAMES: usize = 20;

/// A frame whose elements are in the snapshot: its id and its document's loader.
struct FrameDoc {
    id: String,
    loader: String,
}

/// Takes a new snapshot of the page, its frames included (each `<iframe>` line is followed
/// by its document's elements), gives its elements refs and stores it.
pub fn take(
    connection: &Arc<Connection>,
    session: &str,
    frame_sessions: &HashMap<String, String>,
    page: &PageId,
    refs: &Mutex<PageRefs>,
    deadline: Instant,
) -> Result<String, EngineError> {
    let tree = connection.call("Page.getFrameTree", json!({}), Some(session), deadline)?;
    let frame_tree = &tree["frameTree"];
    let url = frame_tree["frame"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let title = connection
        .call(
            "Target.getTargetInfo",
            json!({ "targetId": page.0 }),
            None,
            deadline,
        )?
        .pointer("/targetInfo/title")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut reader = FrameReader {
        connection,
        frame_sessions,
        deadline,
        frames: Vec::new(),
        elements: Vec::new(),
    };
    reader.read(frame_tree, session, 0, None, 0)?;
    let FrameReader {
        frames, elements, ..
    } = reader;
    let mut table = lock(refs);
    let (id, seq) = table.begin_snapshot();
    let lines = elements
        .iter()
        .map(|(element, frame)| {
            let element_ref = element.backend.map(|backend| {
                let key = RefKey {
                    frame: frames[*frame].id.clone(),
                    loader: frames[*frame].loader.clone(),
                    backend,
                    shown: element.shown(),
                };
                table.ref_for(key, seq)
            });
            snapshot::line(element, element_ref.as_deref())
        })
        .collect();
    table.store(Snapshot {
        id: id.clone(),
        url,
        title,
        lines,
    });
    Ok(id)
}

/// Reads the elements of a frame and of the frames inside it, in document order.
struct FrameReader<'a> {
    connection: &'a Connection,
    /// The sessions of the page's frames in other processes, by frame id.
    frame_sessions: &'a HashMap<String, String>,
    deadline: Instant,
    /// The frames read so far.
    frames: Vec<FrameDoc>,
    /// Every element read so far with its frame's index in `frames`.
    elements: Vec<(Element, usize)>,
}

impl FrameReader<'_> {
    /// Appends the elements of the frame `tree` describes (a `Page.getFrameTree` node of
    /// `session`), `nesting` frames below the main frame, at `depth` below the line `owner`
    /// (its `<iframe>`), and after each `<iframe>` line of it the elements of that frame.
    fn read(
        &mut self,
        tree: &Value,
        session: &str,
        depth: usize,
        owner: Option<usize>,
        nesting: usize,
    ) -> Result<(), EngineError> {
        let frame_id = tree["frame"]["id"].as_str().unwrap_or_default();
        // A frame in another process: read it, and its own frame tree, through its session.
        if let Some(own) = self
            .frame_sessions
            .get(frame_id)
            .filter(|own| *own != session)
        {
            let own = own.clone();
            return match self.own_tree(&own) {
                Some(tree) => self.read(&tree, &own, depth, owner, nesting),
                None => {
                    self.mark_not_included(owner);
                    Ok(())
                }
            };
        }
        let ax = self.connection.call(
            "Accessibility.getFullAXTree",
            json!({ "frameId": frame_id }),
            Some(session),
            self.deadline,
        );
        let ax = match ax {
            Ok(ax) => ax,
            // The main frame must answer; a child frame Chromium cannot read here (one in
            // another process) is marked on its <iframe> line instead.
            Err(error) if owner.is_none() => return Err(error.into()),
            Err(_) => {
                self.mark_not_included(owner);
                return Ok(());
            }
        };
        let frame = self.frames.len();
        self.frames.push(FrameDoc {
            id: frame_id.to_string(),
            loader: tree["frame"]["loaderId"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        });
        // The <iframe> element of each child frame, by backend node id.
        let mut children: Vec<(i64, &Value)> = Vec::new();
        for child in tree["childFrames"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let owner_node = self.connection.call(
                "DOM.getFrameOwner",
                json!({ "frameId": child["frame"]["id"] }),
                Some(session),
                self.deadline,
            );
            if let Some(backend) = owner_node.ok().and_then(|o| o["backendNodeId"].as_i64()) {
                children.push((backend, child));
            }
        }
        let nodes = ax["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        // Where each of this frame's elements landed in `self.elements`.
        let mut placed: Vec<usize> = Vec::new();
        for element in snapshot::elements(nodes) {
            if self.elements.len() >= snapshot::MAX_LINES {
                break;
            }
            let child = element
                .backend
                .and_then(|b| children.iter().find(|(owner, _)| *owner == b))
                .map(|(_, child)| *child);
            let element = Element {
                depth: element.depth + depth,
                parent: element
                    .parent
                    .and_then(|p| placed.get(p).copied())
                    .or(owner),
                ..element
            };
            let inner_depth = element.depth + 1;
            let is_frame = element.role == "Iframe";
            let backend = element.backend;
            self.elements.push((element, frame));
            let line = self.elements.len() - 1;
            placed.push(line);
            let full = nesting >= MAX_FRAME_DEPTH || self.frames.len() >= MAX_FRAMES;
            if let Some(child) = child.filter(|_| !full) {
                self.read(child, session, inner_depth, Some(line), nesting + 1)?;
            } else if is_frame {
                // A frame this session does not list: one of another site, in a process
                // of its own, read through its session.
                let other = backend.filter(|_| !full);
                match other.and_then(|b| self.other_process(session, b)) {
                    Some((own, tree)) => {
                        self.read(&tree, &own, inner_depth, Some(line), nesting + 1)?
                    }
                    None => self.mark_not_included(Some(line)),
                }
            }
        }
        Ok(())
    }

    /// The session and frame tree of the frame shown by `<iframe>` element `backend` of
    /// `session`, when that frame runs in another process we are attached to.
    fn other_process(&self, session: &str, backend: i64) -> Option<(String, Value)> {
        let node = self.connection.call(
            "DOM.describeNode",
            json!({ "backendNodeId": backend }),
            Some(session),
            self.deadline,
        );
        let frame = node.ok()?["node"]["frameId"].as_str()?.to_string();
        let own = self.frame_sessions.get(&frame)?.clone();
        let tree = self.own_tree(&own)?;
        Some((own, tree))
    }

    /// The frame tree a frame's own session reports.
    fn own_tree(&self, session: &str) -> Option<Value> {
        let tree =
            self.connection
                .call("Page.getFrameTree", json!({}), Some(session), self.deadline);
        Some(tree.ok()?["frameTree"].clone())
    }

    fn mark_not_included(&mut self, line: Option<usize>) {
        if let Some((iframe, _)) = line.and_then(|i| self.elements.get_mut(i)) {
            iframe.states.push("[contents not included]".to_string());
        }
    }
}

/// The answer for `view` of stored snapshot `id`. A `root` ref must be a line of it;
/// otherwise the error says whether the ref is unknown, stale or gone.
pub fn render(refs: &Mutex<PageRefs>, id: &str, view: &View) -> Result<Value, EngineError> {
    let table = lock(refs);
    let snapshot = table.snapshot(id).map_err(EngineError::Ref)?;
    match snapshot.render(view) {
        Ok(rendered) => Ok(snapshot::answer(snapshot, rendered)),
        Err(snapshot::ViewError::RootNotListed) => {
            let root = view.root.unwrap_or_default();
            let key = table.lookup(root).map_err(EngineError::Ref)?;
            // The document the snapshot shows in the root's frame, if it shows that frame.
            let current = snapshot.lines.iter().find_map(|l| {
                let other = table.lookup(l.element_ref.as_deref()?).ok()?;
                (other.frame == key.frame).then_some(other.loader)
            });
            Err(EngineError::Ref(match current {
                Some(loader) if loader != key.loader => RefError::Stale(root.to_string()),
                _ => RefError::Gone(root.to_string()),
            }))
        }
    }
}

/// Finds `element_ref`'s element: the ref must be issued, its document current, and its
/// element still in the page and showing the role and name its snapshot showed.
fn resolve(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    deadline: Instant,
) -> Result<Resolved, EngineError> {
    let key = lock(refs).lookup(element_ref).map_err(EngineError::Ref)?;
    let session = page.session_of(&key.frame);
    let tree = connection.call("Page.getFrameTree", json!({}), Some(session), deadline)?;
    if frame_loader(&tree["frameTree"], &key.frame) != Some(key.loader.as_str()) {
        return Err(EngineError::Ref(RefError::Stale(element_ref.to_string())));
    }
    let world = connection.call(
        "Page.createIsolatedWorld",
        json!({ "frameId": key.frame, "worldName": TOOLS_WORLD, "grantUniveralAccess": false }),
        Some(session),
        deadline,
    )?;
    let context = world["executionContextId"].as_i64().unwrap_or_default();
    let gone = || EngineError::Ref(RefError::Gone(element_ref.to_string()));
    // Chromium refuses a backend node id it no longer has.
    let node = connection
        .call(
            "DOM.resolveNode",
            json!({ "backendNodeId": key.backend, "executionContextId": context }),
            Some(session),
            deadline,
        )
        .or_else(refused_as(Value::Null))?;
    if node.is_null() {
        return Err(gone());
    }
    let object = node
        .pointer("/object/objectId")
        .and_then(Value::as_str)
        .ok_or_else(gone)?
        .to_string();
    let in_main_frame =
        session == page.session && tree["frameTree"]["frame"]["id"] == key.frame.as_str();
    let resolved = Resolved {
        object,
        key,
        session: session.to_string(),
        context,
        in_main_frame,
    };
    // A node a script removed may live on while something holds it.
    let connected = call_on(
        connection,
        session,
        &resolved.object,
        "function () { return this.isConnected; }",
        &[],
        deadline,
    )?;
    if connected != Value::Bool(true) {
        return Err(gone());
    }
    if let Some(now) = changed(connection, &resolved, deadline)? {
        let was = resolved.key.shown.clone();
        return Err(EngineError::Ref(RefError::Changed(
            element_ref.to_string(),
            was,
            now,
        )));
    }
    Ok(resolved)
}

/// What the element shows now (`button "Pay"`), if that is not the role and name its
/// snapshot showed; `None` when they are the same.
fn changed(
    connection: &Arc<Connection>,
    element: &Resolved,
    deadline: Instant,
) -> Result<Option<String>, EngineError> {
    let tree = connection.call(
        "Accessibility.getPartialAXTree",
        json!({ "backendNodeId": element.key.backend, "fetchRelatives": false }),
        Some(&element.session),
        deadline,
    )?;
    let node = tree.pointer("/nodes/0").unwrap_or(&Value::Null);
    Ok(match snapshot::shown_of(node) {
        Some(now) if now == element.key.shown => None,
        Some(now) => Some(now.to_string()),
        None => Some("hidden from the accessibility tree".to_string()),
    })
}

/// A page's session and the sessions of its frames in other processes (by frame id).
pub struct Page<'a> {
    /// The page's own session.
    pub session: &'a str,
    /// Its frames' in other processes.
    pub frames: &'a HashMap<String, String>,
}

impl Page<'_> {
    /// The session that reaches frame `frame`.
    fn session_of(&self, frame: &str) -> &str {
        self.frames.get(frame).map_or(self.session, String::as_str)
    }
}

/// Turns Chromium's refusal of a command into `answer`, an answer that means "no such
/// node"; a timeout or a stopped engine stays an error.
fn refused_as(answer: Value) -> impl FnOnce(CdpError) -> Result<Value, EngineError> {
    move |error| match error {
        CdpError::Protocol(_) => Ok(answer),
        other => Err(other.into()),
    }
}

/// The loader id of frame `id` in a `Page.getFrameTree` answer's tree.
fn frame_loader<'a>(tree: &'a Value, id: &str) -> Option<&'a str> {
    if tree["frame"]["id"] == id {
        return tree["frame"]["loaderId"].as_str();
    }
    tree["childFrames"]
        .as_array()?
        .iter()
        .find_map(|child| frame_loader(child, id))
}

/// Runs `function` with `this` = the object and `args`, returning its JSON value.
fn call_on(
    connection: &Arc<Connection>,
    session: &str,
    object: &str,
    function: &str,
    args: &[Value],
    deadline: Instant,
) -> Result<Value, EngineError> {
    let reply = call_unless_dialog(
        connection,
        "Runtime.callFunctionOn",
        json!({ "objectId": object, "functionDeclaration": function, "arguments": args,
                "returnByValue": true, "awaitPromise": false }),
        session,
        deadline,
    )?;
    // A dialog the function caused (typing's events): the answer reports it.
    let Some(reply) = reply else {
        return Ok(Value::Null);
    };
    script_succeeded(&reply)?;
    Ok(reply
        .pointer("/result/value")
        .cloned()
        .unwrap_or(Value::Null))
}

/// Scrolls the element into view and returns the viewport point at its centre: the
/// centre of its first box, since an inline element broken over lines has its bounding
/// box's centre between them.
const CENTRE_JS: &str = "function () {
  const el = this.nodeType === 1 ? this : this.parentElement;
  if (!el) return null;
  el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
  const r = Array.from(el.getClientRects()).find((b) => b.width > 0 && b.height > 0);
  if (!r) return null;
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) return null;
  return { x, y, pageX: x + scrollX, pageY: y + scrollY };
}";

/// Whether `hit` is the element or inside it (across shadow roots); if not, a short
/// description of `hit` for the error.
const HIT_JS: &str = "function (hit) {
  for (let n = hit; n; n = n.parentNode || n.host) { if (n === this) return { inside: true }; }
  const el = hit.nodeType === 1 ? hit : hit.parentElement;
  if (!el) return { inside: false, tag: '', id: '', text: '' };
  const text = String(el.getAttribute('aria-label') || el.textContent || '').replace(/\\s+/g, ' ').trim();
  return { inside: false, tag: el.localName, id: el.id, text: text.slice(0, 80).toWellFormed() };
}";

/// After something else received a click's press, the click is tried again after each of
/// these waits, in case what covered the element was passing (a fading overlay).
const CLICK_RETRIES: [Duration; 2] = [Duration::from_millis(100), Duration::from_millis(500)];

/// Clicks `element_ref`'s element at its centre, or refuses: the click reaches that
/// element or nothing (the click guard, `js/guard.js`). A click whose press something
/// else received is tried again after [`CLICK_RETRIES`].
pub fn click(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    deadline: Instant,
) -> Result<(), EngineError> {
    let mut clicked = click_once(connection, page, refs, element_ref, deadline);
    for wait in CLICK_RETRIES {
        let Err(EngineError::Ref(RefError::Intercepted(..))) = clicked else {
            break;
        };
        if Instant::now() + wait >= deadline {
            break;
        }
        std::thread::sleep(wait);
        clicked = match click_once(connection, page, refs, element_ref, deadline) {
            // What covers it now is what took the press.
            Err(EngineError::Ref(RefError::Covered(r, by))) => {
                Err(EngineError::Ref(RefError::Intercepted(r, by)))
            }
            other => other,
        };
    }
    clicked
}

/// One try of [`click`]: refused if something covers the element's centre; else the
/// guard is armed for the element, the mouse clicks there, and the guard says whether
/// the element received the click.
fn click_once(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    deadline: Instant,
) -> Result<(), EngineError> {
    let element = resolve(connection, page, refs, element_ref, deadline)?;
    let hidden = || EngineError::Ref(RefError::Hidden(element_ref.to_string()));
    let session = element.session.as_str();
    let centre = call_on(
        connection,
        session,
        &element.object,
        CENTRE_JS,
        &[],
        deadline,
    )?;
    // The centre in the element's frame: its viewport and its document.
    let field = |key: &str| centre[key].as_f64();
    let own = match (field("x"), field("y"), field("pageX"), field("pageY")) {
        (Some(x), Some(y), Some(page_x), Some(page_y)) => Some(Point {
            x,
            y,
            page_x,
            page_y,
        }),
        _ => None,
    };
    // Where to click in the page's viewport, and where to hit-test in the session's
    // document (the hit test takes the viewport point plus the scroll offset; Chromium
    // answers an error when no node is at the point).
    let (x, y, hit_x, hit_y) = if element.in_main_frame {
        let own = own.ok_or_else(hidden)?;
        (own.x, own.y, own.page_x, own.page_y)
    } else if session != page.session {
        let own = own.ok_or_else(hidden)?;
        let at = through_frame(connection, page.session, &element, &own, deadline)
            .map_err(|by| EngineError::Ref(RefError::Covered(element_ref.to_string(), by)))?;
        let (x, y) = at.ok_or_else(hidden)?;
        (x, y, own.page_x, own.page_y)
    } else {
        // Inside an <iframe>, the script sees the frame's own viewport; Chromium knows
        // where that is in the page's.
        let point = own.and(frame_point(connection, session, &element, deadline)?);
        let point = point.ok_or_else(hidden)?;
        (point.x, point.y, point.page_x, point.page_y)
    };
    refuse_if_covered(
        connection,
        session,
        &element,
        element_ref,
        (hit_x, hit_y),
        deadline,
    )?;
    let arm =
        format!("function () {{\n{GUARD_JS}\nglobalThis.termsprawlGuard.arm(this, true);\n}}");
    call_on(connection, session, &element.object, &arm, &[], deadline)?;
    if !super::click_at(connection, page.session, x, y, deadline)? {
        // A dialog opened, and stops the page: the answer's `after` says so.
        return Ok(());
    }
    let take = format!("function () {{ return ({})(); }}", super::TAKE_JS);
    let report = match call_on(connection, session, &element.object, &take, &[], deadline) {
        // The click navigated the frame and the report went with its document: the
        // answer's `after` says where the page went.
        Err(EngineError::Protocol(_)) if !shows(connection, session, &element.key, deadline)? => {
            Value::Null
        }
        report => report?,
    };
    let refused = |error| Err(EngineError::Ref(error));
    match guarded(&report) {
        Guarded::Clicked => Ok(()),
        Guarded::Refused(by) => refused(RefError::Intercepted(element_ref.to_string(), by)),
        Guarded::Changed => {
            let now = changed(connection, &element, deadline)?;
            let now = now.unwrap_or_else(|| "changed while it was clicked".to_string());
            let was = element.key.shown.clone();
            refused(RefError::Changed(element_ref.to_string(), was, now))
        }
    }
}

/// Refuses (`Covered`) when what is at the document point `at` of `session` is not the
/// element nor inside it (as [`describe_hit`] tells).
fn refuse_if_covered(
    connection: &Arc<Connection>,
    session: &str,
    element: &Resolved,
    element_ref: &str,
    (x, y): (f64, f64),
    deadline: Instant,
) -> Result<(), EngineError> {
    let hit = connection
        .call(
            "DOM.getNodeForLocation",
            json!({ "x": x.floor() as i64, "y": y.floor() as i64, "includeUserAgentShadowDOM": false,
                    "ignorePointerEventsNone": true }),
            Some(session),
            deadline,
        )
        .or_else(refused_as(Value::Null))?;
    let hit_backend = hit["backendNodeId"].as_i64();
    if hit_backend == Some(element.key.backend) {
        return Ok(());
    }
    let covered_by = match hit_backend {
        Some(backend) => describe_hit(connection, session, element, backend, deadline)?,
        None => Some("nothing (no element is at that point)".to_string()),
    };
    match covered_by {
        Some(by) => Err(EngineError::Ref(RefError::Covered(
            element_ref.to_string(),
            by,
        ))),
        None => Ok(()),
    }
}

/// What the click guard saw of a click (`take()` in `js/guard.js`).
pub(super) enum Guarded {
    /// The element received the click, or there is no report (see [`guarded`]).
    Clicked,
    /// Something else received the press: what.
    Refused(String),
    /// The element's role or name changed between arming and the press.
    Changed,
}

/// Reads the guard's report of a click, fetched after its release. No report (null): the
/// click navigated, and the report's document is gone, or a dialog it opened is open;
/// the answer's `after` says which.
pub(super) fn guarded(report: &Value) -> Guarded {
    if report.is_null() || report["clicked"] == true {
        Guarded::Clicked
    } else if report["changed"] == true {
        Guarded::Changed
    } else if report["refused"].is_object() {
        Guarded::Refused(described(&report["refused"]))
    } else {
        // Nothing of the element's document got the press: another frame's element did,
        // and that frame's guard held it.
        Guarded::Refused("an element outside the element's frame".to_string())
    }
}

/// Whether the ref's frame still shows the ref's document.
fn shows(
    connection: &Arc<Connection>,
    session: &str,
    key: &RefKey,
    deadline: Instant,
) -> Result<bool, EngineError> {
    let tree = connection.call("Page.getFrameTree", json!({}), Some(session), deadline)?;
    Ok(frame_loader(&tree["frameTree"], &key.frame) == Some(key.loader.as_str()))
}

/// The page-viewport point of `own`, a point in the viewport of a frame in another
/// process: the frame's `<iframe>` content box in the page, plus `own`. `None` when the
/// `<iframe>` cannot be found or the point is outside the page's viewport; `Err` says
/// what covers the `<iframe>` there (Chromium's failures count as not found).
fn through_frame(
    connection: &Arc<Connection>,
    page_session: &str,
    element: &Resolved,
    own: &Point,
    deadline: Instant,
) -> Result<Option<(f64, f64)>, String> {
    let call = |method: &str, params: Value| {
        connection
            .call(method, params, Some(page_session), deadline)
            .unwrap_or(Value::Null)
    };
    let owner = call("DOM.getFrameOwner", json!({ "frameId": element.key.frame }));
    let Some(owner) = owner["backendNodeId"].as_i64() else {
        return Ok(None);
    };
    let model = call("DOM.getBoxModel", json!({ "backendNodeId": owner }));
    let content = model["model"]["content"].as_array();
    let corner = |i: usize| content.and_then(|c| c.get(i)).and_then(Value::as_f64);
    let (Some(left), Some(top)) = (corner(0), corner(1)) else {
        return Ok(None);
    };
    let (x, y) = (left + own.x, top + own.y);
    let inside = (0.0..f64::from(super::VIEWPORT_WIDTH)).contains(&x)
        && (0.0..f64::from(super::VIEWPORT_HEIGHT)).contains(&y);
    if !inside {
        return Ok(None);
    }
    let metrics = call("Page.getLayoutMetrics", json!({}));
    let scroll = |key: &str| {
        metrics["cssLayoutViewport"][key]
            .as_f64()
            .unwrap_or_default()
    };
    let at = json!({ "x": (x + scroll("pageX")).floor() as i64, "y": (y + scroll("pageY")).floor() as i64,
                     "includeUserAgentShadowDOM": false, "ignorePointerEventsNone": true });
    let hit = call("DOM.getNodeForLocation", at);
    if hit["backendNodeId"].as_i64() != Some(owner) {
        return Err("another element of the page, over the frame the element is in".into());
    }
    Ok(Some((x, y)))
}

/// Where to click: a point in the page's viewport, and the same point in its document
/// (the viewport point plus the scroll offset), as the hit test takes it.
struct Point {
    x: f64,
    y: f64,
    page_x: f64,
    page_y: f64,
}

/// The centre of the element's first box, or `None` when it is not in the viewport.
fn frame_point(
    connection: &Arc<Connection>,
    session: &str,
    element: &Resolved,
    deadline: Instant,
) -> Result<Option<Point>, EngineError> {
    let quads = connection
        .call(
            "DOM.getContentQuads",
            json!({ "backendNodeId": element.key.backend }),
            Some(session),
            deadline,
        )
        .ok();
    let Some(quad) = quads
        .as_ref()
        .and_then(|q| q["quads"].as_array())
        .and_then(|q| q.first())
        .and_then(Value::as_array)
        .filter(|q| q.len() == 8)
    else {
        return Ok(None);
    };
    let corner = |i: usize| quad[i].as_f64().unwrap_or_default();
    let x = (corner(0) + corner(2) + corner(4) + corner(6)) / 4.0;
    let y = (corner(1) + corner(3) + corner(5) + corner(7)) / 4.0;
    let inside = (0.0..f64::from(super::VIEWPORT_WIDTH)).contains(&x)
        && (0.0..f64::from(super::VIEWPORT_HEIGHT)).contains(&y);
    if !inside {
        return Ok(None);
    }
    let metrics = connection.call("Page.getLayoutMetrics", json!({}), Some(session), deadline)?;
    let scroll = |key: &str| {
        metrics["cssLayoutViewport"][key]
            .as_f64()
            .unwrap_or_default()
    };
    Ok(Some(Point {
        x,
        y,
        page_x: x + scroll("pageX"),
        page_y: y + scroll("pageY"),
    }))
}

/// `None` when the node hit is inside the element (a click there reaches it), else what
/// the node is, quoted: `<div id="overlay"> "Loading…"`.
fn describe_hit(
    connection: &Arc<Connection>,
    session: &str,
    element: &Resolved,
    backend: i64,
    deadline: Instant,
) -> Result<Option<String>, EngineError> {
    // In the element's own world: an object passes only between functions of one world.
    let hit = connection.call(
        "DOM.resolveNode",
        json!({ "backendNodeId": backend, "executionContextId": element.context }),
        Some(session),
        deadline,
    );
    let Some(hit_object) = hit.ok().and_then(|n| {
        n.pointer("/object/objectId")
            .and_then(Value::as_str)
            .map(str::to_string)
    }) else {
        return Ok(Some("another element".to_string()));
    };
    let seen = call_on(
        connection,
        session,
        &element.object,
        HIT_JS,
        &[json!({ "objectId": hit_object })],
        deadline,
    );
    let Ok(seen) = seen else {
        return Ok(Some("another element".to_string()));
    };
    if seen["inside"] == true {
        return Ok(None);
    }
    Ok(Some(described(&seen)))
}

/// An element a page script described (`{tag, id, text}`), quoted: `<div id="overlay">
/// "Loading…"`.
fn described(seen: &Value) -> String {
    let field = |key: &str| seen[key].as_str().unwrap_or_default().to_string();
    let mut what = format!("<{}", snapshot::quote(&field("tag"), 40).trim_matches('"'));
    if !field("id").is_empty() {
        what.push_str(&format!(" id={}", snapshot::quote(&field("id"), 60)));
    }
    what.push('>');
    if !field("text").is_empty() {
        what.push_str(&format!(" {}", snapshot::quote(&field("text"), 80)));
    }
    what
}

/// Moves the mouse onto `element_ref`'s element (`browser_hover`), in the page's main
/// document: refused as a click by ref is when stale, gone, hidden or covered; an element
/// inside a frame is refused (not offered yet). What the page shows on hover is then
/// there to snapshot and click.
pub fn hover(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    deadline: Instant,
) -> Result<(), EngineError> {
    let element = resolve(connection, page, refs, element_ref, deadline)?;
    if !element.in_main_frame || element.session != page.session {
        return Err(EngineError::Page(format!(
            "{element_ref} is inside a frame: hovering there is not offered yet; click it instead"
        )));
    }
    let hidden = || EngineError::Ref(RefError::Hidden(element_ref.to_string()));
    let centre = call_on(
        connection,
        page.session,
        &element.object,
        CENTRE_JS,
        &[],
        deadline,
    )?;
    let field = |key: &str| centre[key].as_f64();
    let (Some(x), Some(y), Some(page_x), Some(page_y)) =
        (field("x"), field("y"), field("pageX"), field("pageY"))
    else {
        return Err(hidden());
    };
    refuse_if_covered(
        connection,
        page.session,
        &element,
        element_ref,
        (page_x, page_y),
        deadline,
    )?;
    let moved = json!({ "type": "mouseMoved", "x": x, "y": y, "button": "none", "buttons": 0 });
    call_unless_dialog(
        connection,
        "Input.dispatchMouseEvent",
        moved,
        page.session,
        deadline,
    )?;
    Ok(())
}

/// Chooses the options of `element_ref`'s `<select>` whose value or visible text is one of
/// `values` (`browser_select`), then tells the page as a person's choice does (`input`,
/// `change`): the values chosen. Refused when the element is not a visible, enabled select,
/// when a value matches no option, or when several are given to a single select.
pub fn select(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    values: &[String],
    deadline: Instant,
) -> Result<Value, EngineError> {
    let element = resolve(connection, page, refs, element_ref, deadline)?;
    let function = format!("function (values) {{\n{COMMON_JS}\n{SELECT_BODY}\n}}");
    let result = call_on(
        connection,
        &element.session,
        &element.object,
        &function,
        &[json!({ "value": values })],
        deadline,
    )?;
    if result["hidden"] == true {
        return Err(EngineError::Ref(RefError::Hidden(element_ref.to_string())));
    }
    if let Some(message) = result["error"].as_str() {
        return Err(EngineError::Page(format!("{element_ref}: {message}")));
    }
    Ok(result["selected"].clone())
}

/// The body of [`select`]'s function (`this`: the element, `values`: the wanted ones).
const SELECT_BODY: &str = "
if (!visible(this)) return { hidden: true };
if (this.localName !== 'select') return { error: 'not a select element (a ' + this.localName + '): click it instead' };
if (this.disabled) return { error: 'the select is disabled' };
if (values.length > 1 && !this.multiple) return { error: 'this select takes one value, not ' + values.length };
const options = Array.from(this.options);
const chosen = [];
for (const wanted of values) {
  const option = options.find((o) => o.value === wanted) || options.find((o) => o.label.trim() === wanted.trim());
  if (!option) return { error: 'no option has the value or text ' + JSON.stringify(wanted).slice(0, 100) + '; its options: ' + options.map((o) => JSON.stringify(o.value)).join(', ').slice(0, 300) };
  if (option.disabled) return { error: 'the option ' + JSON.stringify(wanted).slice(0, 100) + ' is disabled' };
  chosen.push(option);
}
for (const option of options) option.selected = chosen.includes(option);
this.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
this.dispatchEvent(new Event('change', { bubbles: true }));
return { selected: chosen.map((o) => o.value) };";

/// Gives the file input `element_ref` names the files at `files` (`browser_upload`; copies
/// `upload.rs` made). A hidden input is allowed: pages often hide theirs behind a styled
/// label, which a person clicks instead.
pub fn upload(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    files: &[String],
    deadline: Instant,
) -> Result<(), EngineError> {
    let element = resolve(connection, page, refs, element_ref, deadline)?;
    let result = call_on(
        connection,
        &element.session,
        &element.object,
        UPLOAD_CHECK_JS,
        &[json!({ "value": files.len() })],
        deadline,
    )?;
    if let Some(message) = result["error"].as_str() {
        return Err(EngineError::Page(format!("{element_ref}: {message}")));
    }
    connection.call(
        "DOM.setFileInputFiles",
        json!({ "files": files, "objectId": element.object }),
        Some(&element.session),
        deadline,
    )?;
    Ok(())
}

/// Whether the element can take `count` files (`this`: the element).
const UPLOAD_CHECK_JS: &str = "function (count) {
  if (this.localName !== 'input' || this.type !== 'file') return { error: 'not a file input (a ' + this.localName + (this.type ? ' of type ' + this.type : '') + ')' };
  if (this.disabled) return { error: 'the file input is disabled' };
  if (count > 1 && !this.multiple) return { error: 'this file input takes one file, not ' + count };
  return {};
}";

/// Focuses `element_ref`'s element (it must be visible), for `browser_press`: returns the
/// session of its frame, where the keys then go.
pub fn focus(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    deadline: Instant,
) -> Result<String, EngineError> {
    let element = resolve(connection, page, refs, element_ref, deadline)?;
    let function = format!(
        "function () {{\n{COMMON_JS}\nif (!visible(this)) return {{ hidden: true }};\nthis.focus();\nreturn {{}};\n}}"
    );
    let result = call_on(
        connection,
        &element.session,
        &element.object,
        &function,
        &[],
        deadline,
    )?;
    if result["hidden"] == true {
        return Err(EngineError::Ref(RefError::Hidden(element_ref.to_string())));
    }
    Ok(element.session)
}

/// Sets the value of `element_ref`'s element (a visible, editable input or textarea) as
/// `browser_type` does for a selector.
pub fn type_text(
    connection: &Arc<Connection>,
    page: &Page,
    refs: &Mutex<PageRefs>,
    element_ref: &str,
    text: &str,
    deadline: Instant,
) -> Result<(), EngineError> {
    let element = resolve(connection, page, refs, element_ref, deadline)?;
    let session = element.session.as_str();
    let function = format!(
        "function (text) {{\n{COMMON_JS}\nif (!visible(this)) return {{ hidden: true }};\nreturn typeInto(this, text);\n}}"
    );
    let result = call_on(
        connection,
        session,
        &element.object,
        &function,
        &[json!({ "value": text })],
        deadline,
    )?;
    if result["hidden"] == true {
        return Err(EngineError::Ref(RefError::Hidden(element_ref.to_string())));
    }
    if let Some(message) = result["error"].as_str() {
        return Err(EngineError::Page(message.to_string()));
    }
    Ok(())
}
