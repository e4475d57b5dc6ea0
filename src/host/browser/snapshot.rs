//! The accessibility snapshot of `browser_inspect` with `mode: "snapshot"`: one element a
//! line, built from Chromium's accessibility tree (`Accessibility.getFullAXTree`).
//!
//! A line is `- ROLE "NAME" [STATE]… [ref=eN]`, indented two spaces per level (no name
//! when there is none; runs of white space, newlines included, become one space). The name
//! and any value are JSON strings (cut to [`NAME_CHARS`], control, line-separator and
//! bidi characters escaped), so page text can never end its string, start a line or
//! forge a ref: the only `[ref=` outside quotes is ours. Interesting nodes only: controls,
//! focusable elements, headings, landmarks, images, frames and text not already in its
//! parent's name.
//!
//! The header line says the page's URL and title, the snapshot id, how many lines there
//! are, which are shown and whether the answer was cut. Answers never exceed `maxChars`;
//! the rest is read from the stored snapshot by `offset`.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::refs::Shown;

/// Names, values and titles are cut to this many characters (an ellipsis marks a cut).
pub const NAME_CHARS: usize = 100;
/// The URL in the header is cut to this many characters.
pub const URL_CHARS: usize = 300;
/// A snapshot keeps at most this many lines (its refs fit the page's ref table).
pub const MAX_LINES: usize = 10_000;
/// Lines deeper than this are indented as if at this depth.
const MAX_INDENT: usize = 30;

/// Roles of controls: elements an agent clicks or types into.
const CONTROL_ROLES: &[&str] = &[
    "button",
    "checkbox",
    "combobox",
    "link",
    "listbox",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "option",
    "radio",
    "scrollbar",
    "searchbox",
    "slider",
    "spinbutton",
    "switch",
    "tab",
    "textbox",
    "treeitem",
    "ComboBoxSelect",
    "ComboBoxMenuButton",
];
/// Roles that give a page its structure.
const STRUCTURE_ROLES: &[&str] = &[
    "heading",
    "banner",
    "navigation",
    "main",
    "contentinfo",
    "complementary",
    "search",
    "region",
    "form",
    "dialog",
    "alertdialog",
    "alert",
    "status",
    "img",
    "image",
    "Iframe",
    "table",
    "row",
    "cell",
    "columnheader",
    "rowheader",
    "list",
    "tablist",
    "menu",
    "tree",
];
/// Text roles: kept only when the text is not already part of the parent's name.
const TEXT_ROLES: &[&str] = &["StaticText"];

/// One line of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Levels below the top (the indentation).
    pub depth: usize,
    /// The index of the nearest line above that contains this one.
    pub parent: Option<usize>,
    /// The line without its indentation.
    pub text: String,
    /// Its ref, if it names an element.
    pub element_ref: Option<String>,
    /// Role, name and value in lower case, for `find`.
    search: String,
}

/// A stored snapshot of one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `s1`, `s2` … (per page).
    pub id: String,
    /// The main frame's URL when it was taken.
    pub url: String,
    /// The page's title when it was taken.
    pub title: String,
    /// Its lines in document order.
    pub lines: Vec<Line>,
}

/// One interesting accessibility node, before it gets a ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Levels below the top.
    pub depth: usize,
    /// The index of the element that contains it.
    pub parent: Option<usize>,
    /// Chromium's role, e.g. `button`, `StaticText` (shown as `text`).
    pub role: String,
    /// The accessible name.
    pub name: String,
    /// `[checked]`, `[level=2]`, `value="…"` and the like, in order.
    pub states: Vec<String>,
    /// The DOM element's backend node id (none for text).
    pub backend: Option<i64>,
}

/// What part of a snapshot to answer with.
#[derive(Debug, Clone, Default)]
pub struct View<'a> {
    /// The first line (of those selected) to show.
    pub offset: usize,
    /// The most characters of the whole answer.
    pub max_chars: usize,
    /// Only this ref's line and what is inside it.
    pub root: Option<&'a str>,
    /// Only lines containing this text (any case), with their ancestors.
    pub find: Option<&'a str>,
}

/// The answer to a snapshot request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The header line and the lines shown, `\n`-separated.
    pub text: String,
    /// How many lines the view selected (all of them without root/find).
    pub lines: usize,
    /// The first line shown.
    pub offset: usize,
    /// Where to continue, when lines were left out.
    pub next_offset: Option<usize>,
}

/// Why a view cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewError {
    /// `root` is not a line of this snapshot.
    RootNotListed,
}

/// The interesting nodes of a `getFullAXTree` answer, in document order.
pub fn elements(nodes: &[Value]) -> Vec<Element> {
    let by_id: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| n["nodeId"].as_str().map(|id| (id, n)))
        .collect();
    let Some(top) = nodes.iter().find(|n| n.get("parentId").is_none()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // (node, depth, parent element, name of the nearest element above)
    let mut stack: Vec<(&Value, usize, Option<usize>, String)> =
        vec![(top, 0, None, String::new())];
    while let Some((node, depth, parent, above_name)) = stack.pop() {
        if out.len() >= MAX_LINES {
            break;
        }
        let (mut child_depth, mut child_parent, mut child_above) = (depth, parent, above_name);
        if let Some(element) = interesting(node, &child_above) {
            child_above = element.name.clone();
            out.push(Element {
                depth,
                parent,
                ..element
            });
            child_depth = depth + 1;
            child_parent = Some(out.len() - 1);
        }
        let children = node["childIds"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for child in children.iter().rev() {
            if let Some(child) = child.as_str().and_then(|id| by_id.get(id)) {
                stack.push((child, child_depth, child_parent, child_above.clone()));
            }
        }
    }
    out
}

/// The node as an element, if it is one worth a line.
fn interesting(node: &Value, above_name: &str) -> Option<Element> {
    if node["ignored"].as_bool() == Some(true) {
        return None;
    }
    let role = node.pointer("/role/value").and_then(Value::as_str)?;
    let name = name_of(node);
    let property = |key: &str| -> Option<&Value> {
        node["properties"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == key)
            .and_then(|p| p.pointer("/value/value"))
    };
    let focusable = property("focusable").and_then(Value::as_bool) == Some(true);
    let keep = if TEXT_ROLES.contains(&role) {
        !name.is_empty() && !above_name.contains(name.as_str())
    } else {
        CONTROL_ROLES.contains(&role)
            || STRUCTURE_ROLES.contains(&role)
            || (focusable && role != "RootWebArea")
    };
    if !keep {
        return None;
    }
    let mut states = Vec::new();
    for flag in ["disabled", "selected", "required", "readonly", "focused"] {
        if property(flag).and_then(Value::as_bool) == Some(true) {
            states.push(format!("[{flag}]"));
        }
    }
    for tristate in ["checked", "pressed"] {
        match property(tristate).and_then(Value::as_str) {
            Some("true") => states.push(format!("[{tristate}]")),
            Some("mixed") => states.push(format!("[{tristate}=mixed]")),
            _ => {}
        }
    }
    if let Some(expanded) = property("expanded").and_then(Value::as_bool) {
        states.push(format!("[expanded={expanded}]"));
    }
    if let Some(level) = property("level").and_then(Value::as_i64) {
        states.push(format!("[level={level}]"));
    }
    if let Some(value) = node.pointer("/value/value") {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if !value.is_empty() && value != name {
            states.push(format!("value={}", quote(&value, NAME_CHARS)));
        }
    }
    let is_text = TEXT_ROLES.contains(&role);
    Some(Element {
        depth: 0,
        parent: None,
        role: if is_text { "text" } else { role }.to_string(),
        name,
        states,
        backend: if is_text {
            None
        } else {
            node["backendDOMNodeId"].as_i64()
        },
    })
}

/// A node's accessible name, its runs of white space made one space.
fn name_of(node: &Value) -> String {
    let name = node.pointer("/name/value").and_then(Value::as_str);
    let words: Vec<&str> = name.unwrap_or("").split_whitespace().collect();
    words.join(" ")
}

/// The role and name of an accessibility node (`Accessibility.getPartialAXTree`) as a
/// snapshot line would show them; `None` when it has none (an ignored node has no line).
pub fn shown_of(node: &Value) -> Option<Shown> {
    if node["ignored"].as_bool() == Some(true) {
        return None;
    }
    let role = node.pointer("/role/value").and_then(Value::as_str)?;
    Some(shown(role, &name_of(node)))
}

/// `role` and `name` as a line shows them.
fn shown(role: &str, name: &str) -> Shown {
    Shown {
        role: role.to_string(),
        name: if name.is_empty() {
            String::new()
        } else {
            quote(name, NAME_CHARS)
        },
    }
}

impl Element {
    /// Its role and name as its line shows them.
    pub fn shown(&self) -> Shown {
        shown(&self.role, &self.name)
    }
}

/// `text` cut to `max` characters (an ellipsis marks a cut) as a JSON string, with the
/// characters that could mislead a reader escaped too: C1 controls, line and paragraph
/// separators and bidi controls (JSON escapes only C0 controls, quotes and backslashes).
pub fn quote(text: &str, max: usize) -> String {
    let mut short: String = text.chars().take(max).collect();
    if text.chars().nth(max).is_some() {
        short.push('…');
    }
    let json = Value::String(short).to_string();
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        let misleading = matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}'
            | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{061c}');
        if misleading {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A snapshot line's text (without indentation) for `element` with `element_ref`.
pub fn line(element: &Element, element_ref: Option<&str>) -> Line {
    let mut text = format!("- {}", element.shown());
    for state in &element.states {
        text.push(' ');
        text.push_str(state);
    }
    if let Some(r) = element_ref {
        text.push_str(&format!(" [ref={r}]"));
    }
    let search = format!(
        "{} {} {}",
        element.role,
        element.name,
        element.states.join(" ")
    )
    .to_lowercase();
    Line {
        depth: element.depth,
        parent: element.parent,
        text,
        element_ref: element_ref.map(str::to_string),
        search,
    }
}

impl Snapshot {
    /// A snapshot without lines (for tests of the stores that keep them).
    pub fn empty(id: &str) -> Snapshot {
        Snapshot {
            id: id.to_string(),
            url: String::new(),
            title: String::new(),
            lines: Vec::new(),
        }
    }

    /// The header line and as many of the view's lines, from its offset, as fit in
    /// `view.max_chars` characters (at least the header: the caller keeps `max_chars`
    /// above the header's largest size).
    pub fn render(&self, view: &View) -> Result<Rendered, ViewError> {
        let selected = self.select(view)?;
        let total = selected.len();
        let offset = view.offset.min(total);
        // The header with the widest numbers it can have, so the real one is no longer.
        let widest = self
            .header(total, Some((total, total)), Some(total))
            .chars()
            .count();
        let mut used = widest;
        let mut shown = Vec::new();
        for &index in &selected[offset..] {
            let line = &self.lines[index];
            let indent = 2 * line.depth.min(MAX_INDENT);
            let size = 1 + indent + line.text.chars().count();
            if used + size > view.max_chars {
                break;
            }
            used += size;
            shown.push((indent, &line.text));
        }
        let end = offset + shown.len();
        let next_offset = (end < total).then_some(end);
        let range = (end > offset).then_some((offset + 1, end));
        let mut text = self.header(total, range, next_offset);
        for (indent, line) in shown {
            text.push('\n');
            text.push_str(&" ".repeat(indent));
            text.push_str(line);
        }
        Ok(Rendered {
            text,
            lines: total,
            offset,
            next_offset,
        })
    }

    /// The header line; `shown` is the first and last line shown, counted from 1.
    fn header(&self, total: usize, shown: Option<(usize, usize)>, next: Option<usize>) -> String {
        let shown = match shown {
            Some((first, last)) => format!("{first}-{last}"),
            None => "none".to_string(),
        };
        let more = match next {
            Some(next) => format!(" cut=true (more: snapshot={} offset={next})", self.id),
            None => " cut=false".to_string(),
        };
        // A page with more elements than a snapshot keeps: say so, and how to see the rest.
        let full = if self.lines.len() >= MAX_LINES {
            format!(" (a snapshot keeps at most {MAX_LINES} lines: narrow it with find or root)")
        } else {
            String::new()
        };
        format!(
            "[snapshot {}] url={} title={} lines={total} showing={shown}{more}{full}",
            self.id,
            quote(&self.url, URL_CHARS),
            quote(&self.title, NAME_CHARS),
        )
    }

    /// Indexes of the lines the view's `root` and `find` keep, in order.
    fn select(&self, view: &View) -> Result<Vec<usize>, ViewError> {
        let mut range = 0..self.lines.len();
        if let Some(root) = view.root {
            let start = self
                .lines
                .iter()
                .position(|l| l.element_ref.as_deref() == Some(root))
                .ok_or(ViewError::RootNotListed)?;
            let depth = self.lines[start].depth;
            let end = self.lines[start + 1..]
                .iter()
                .position(|l| l.depth <= depth)
                .map_or(self.lines.len(), |n| start + 1 + n);
            range = start..end;
        }
        let Some(needle) = view.find.map(str::to_lowercase) else {
            return Ok(range.collect());
        };
        let mut keep = vec![false; self.lines.len()];
        for index in range.clone() {
            if self.lines[index].search.contains(&needle) {
                let mut at = Some(index);
                while let Some(i) = at.filter(|i| range.contains(i) && !keep[*i]) {
                    keep[i] = true;
                    at = self.lines[i].parent;
                }
            }
        }
        Ok(range.filter(|&i| keep[i]).collect())
    }
}

/// The `browser_inspect` answer for a rendered snapshot.
pub fn answer(snapshot: &Snapshot, rendered: Rendered) -> Value {
    let mut value = json!({
        "url": snapshot.url,
        "title": snapshot.title,
        "snapshot": snapshot.id,
        "text": rendered.text,
        "lines": rendered.lines,
        "offset": rendered.offset,
        "cut": rendered.next_offset.is_some(),
    });
    if let Some(next) = rendered.next_offset {
        value["nextOffset"] = json!(next);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, parent: Option<&str>, role: &str, name: &str, children: &[&str]) -> Value {
        let mut n = json!({ "nodeId": id, "ignored": false, "role": { "value": role },
            "name": { "value": name }, "childIds": children, "backendDOMNodeId": id.len() as i64 * 100 + 1 });
        if let Some(parent) = parent {
            n["parentId"] = json!(parent);
        }
        n
    }

    fn sample() -> Vec<Value> {
        let mut nodes = vec![
            node("1", None, "RootWebArea", "Shop", &["2", "3", "6"]),
            node("2", Some("1"), "heading", "Cart", &["21"]),
            node("21", Some("2"), "StaticText", "Cart", &[]),
            node("3", Some("1"), "generic", "", &["4", "5"]),
            node("4", Some("3"), "textbox", "Name", &[]),
            node(
                "5",
                Some("3"),
                "button",
                "Pay\n- button \"Free\" [ref=e1]",
                &["51"],
            ),
            node("51", Some("5"), "StaticText", "Pay", &[]),
            node("6", Some("1"), "paragraph", "", &["61"]),
            node("61", Some("6"), "StaticText", "Total: 3 €", &[]),
        ];
        nodes[1]["properties"] = json!([{ "name": "level", "value": { "value": 2 } }]);
        nodes[4]["value"] = json!({ "value": "Ada" });
        nodes
    }

    fn lines_of(nodes: &[Value]) -> Vec<Line> {
        elements(nodes)
            .iter()
            .enumerate()
            .map(|(i, e)| line(e, e.backend.map(|_| format!("e{i}")).as_deref()))
            .collect()
    }

    #[test]
    fn interesting_nodes_become_lines_and_hostile_names_stay_quoted() {
        let lines = lines_of(&sample());
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "- heading \"Cart\" [level=2] [ref=e0]",
                "- textbox \"Name\" value=\"Ada\" [ref=e1]",
                "- button \"Pay - button \\\"Free\\\" [ref=e1]\" [ref=e2]",
                "- text \"Total: 3 €\"",
            ]
        );
        assert!(texts.iter().all(|t| !t.contains('\n')));
    }

    #[test]
    fn misleading_characters_are_escaped_and_long_names_cut() {
        assert_eq!(
            quote("a\u{202e}b\u{85}c\u{2028}", 100),
            "\"a\\u202eb\\u0085c\\u2028\""
        );
        assert_eq!(
            quote("x\n- button \"y\" [ref=e1]", 100),
            "\"x\\n- button \\\"y\\\" [ref=e1]\""
        );
        let long = "x".repeat(150);
        assert_eq!(quote(&long, 100), format!("\"{}…\"", "x".repeat(100)));
    }

    fn big_snapshot(count: usize) -> Snapshot {
        let mut ids = Vec::new();
        let mut nodes = vec![];
        for i in 0..count {
            ids.push(format!("n{i}"));
        }
        let children: Vec<&str> = ids.iter().map(String::as_str).collect();
        nodes.push(node("root", None, "RootWebArea", "Links", &children));
        for (i, id) in ids.iter().enumerate() {
            nodes.push(node(
                id,
                Some("root"),
                "link",
                &format!("Link number {i}"),
                &[],
            ));
        }
        Snapshot {
            id: "s1".into(),
            url: "http://127.0.0.1/".into(),
            title: "Links".into(),
            lines: lines_of(&nodes),
        }
    }

    #[test]
    fn answers_never_exceed_max_chars_and_pages_cover_every_line_once() {
        let snapshot = big_snapshot(3000);
        for max_chars in [3000, 4321, 12_000, 40_000] {
            let mut offset = 0;
            let mut seen = Vec::new();
            loop {
                let view = View {
                    offset,
                    max_chars,
                    ..View::default()
                };
                let rendered = snapshot.render(&view).unwrap();
                assert!(rendered.text.chars().count() <= max_chars);
                seen.extend(rendered.text.lines().skip(1).map(str::to_string));
                match rendered.next_offset {
                    Some(next) => {
                        assert!(rendered.text.lines().next().unwrap().contains("cut=true"));
                        offset = next;
                    }
                    None => break,
                }
            }
            let all: Vec<String> = snapshot.lines.iter().map(|l| l.text.clone()).collect();
            assert_eq!(seen, all, "max {max_chars}");
        }
    }

    #[test]
    fn the_smallest_max_chars_holds_the_header_and_the_longest_line() {
        let hostile = "\u{202e}".repeat(500);
        let mut nodes = vec![node("1", None, "RootWebArea", "", &["2"])];
        let mut field = node("2", Some("1"), "textbox", &hostile, &[]);
        field["value"] = json!({ "value": hostile });
        let flags = [
            "disabled", "selected", "required", "readonly", "focused", "expanded",
        ];
        let mut properties: Vec<Value> = flags
            .iter()
            .map(|f| json!({ "name": f, "value": { "value": true } }))
            .collect();
        properties.push(json!({ "name": "checked", "value": { "value": "mixed" } }));
        properties.push(json!({ "name": "pressed", "value": { "value": "mixed" } }));
        properties.push(json!({ "name": "level", "value": { "value": 999_999 } }));
        field["properties"] = json!(properties);
        nodes.push(field);
        let mut lines = lines_of(&nodes);
        lines[0].depth = 1_000;
        let snapshot = Snapshot {
            id: "s99999999".into(),
            url: format!("http://h/{}", "\"".repeat(400)),
            title: hostile.clone(),
            lines,
        };
        let min = crate::protocol::limits::SNAPSHOT_MIN_CHARS as usize;
        let view = View {
            max_chars: min,
            ..View::default()
        };
        let rendered = snapshot.render(&view).unwrap();
        assert_eq!(rendered.next_offset, None, "{}", rendered.text);
        assert!(rendered.text.chars().count() <= min);
    }

    #[test]
    fn a_page_over_the_line_bound_is_kept_to_it_and_says_so() {
        let snapshot = big_snapshot(MAX_LINES + 5);
        assert_eq!(snapshot.lines.len(), MAX_LINES);
        let view = View {
            max_chars: 3000,
            ..View::default()
        };
        let header = snapshot.render(&view).unwrap().text;
        assert!(header
            .lines()
            .next()
            .unwrap()
            .ends_with("(a snapshot keeps at most 10000 lines: narrow it with find or root)"));
        assert!(!big_snapshot(10)
            .render(&view)
            .unwrap()
            .text
            .contains("at most"));
    }

    #[test]
    fn root_and_find_narrow_the_lines() {
        let snapshot = Snapshot {
            id: "s1".into(),
            url: String::new(),
            title: String::new(),
            lines: lines_of(&sample()),
        };
        let find = View {
            max_chars: 1000,
            find: Some("ADA"),
            ..View::default()
        };
        let rendered = snapshot.render(&find).unwrap();
        assert_eq!(rendered.lines, 1);
        assert!(rendered
            .text
            .ends_with("- textbox \"Name\" value=\"Ada\" [ref=e1]"));
        let root = View {
            max_chars: 1000,
            root: Some("e0"),
            ..View::default()
        };
        assert_eq!(snapshot.render(&root).unwrap().lines, 1);
        let missing = View {
            max_chars: 1000,
            root: Some("e9"),
            ..View::default()
        };
        assert_eq!(snapshot.render(&missing), Err(ViewError::RootNotListed));
    }
}
