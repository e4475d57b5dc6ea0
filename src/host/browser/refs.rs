//! Element references: the `[ref=…]` of a snapshot line, and what each one names.
//!
//! A ref names one element of one document as a snapshot showed it: the frame, the
//! frame's loader (a new document, after a navigation or a reload, has a new loader),
//! Chromium's backend node id, and the role and name on its line. That identity stays
//! here, on the server; a ref given back by an agent is only looked up in this table,
//! never parsed. The same element keeps its ref across the snapshots of one document while
//! it shows the same role and name, so an agent's earlier refs stay good while the page
//! does; renamed, it gets a new ref, and the old one is refused as changed.
//!
//! Each page keeps at most [`MAX_REFS`] refs and [`MAX_SNAPSHOTS`] snapshots; when more
//! are made, the refs last listed by the oldest snapshots go first.

use std::collections::{HashMap, VecDeque};
use std::fmt;

use super::snapshot::Snapshot;

/// The most refs a page keeps (a 5,000-link page fits several times).
pub const MAX_REFS: usize = 20_000;
/// The most snapshots a page keeps for paging (`snapshot` + `offset`).
pub const MAX_SNAPSHOTS: usize = 4;

/// What a ref names: one element of one document, as a snapshot showed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefKey {
    /// The frame the element is in.
    pub frame: String,
    /// The frame's document (loader id) when the ref was issued.
    pub loader: String,
    /// Chromium's backend node id of the element.
    pub backend: i64,
    /// Its role and name on the snapshot's line.
    pub shown: Shown,
}

/// An element's role and accessible name as a snapshot line shows them: `button "Send"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shown {
    /// Chromium's role, e.g. `button`.
    pub role: String,
    /// The name as the line quotes it (a JSON string, cut), or empty when it has none.
    pub name: String,
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            f.write_str(&self.role)
        } else {
            write!(f, "{} {}", self.role, self.name)
        }
    }
}

struct RefEntry {
    key: RefKey,
    /// The newest snapshot that listed this ref.
    snapshot: u64,
}

/// The refs and stored snapshots of one page.
#[derive(Default)]
pub struct PageRefs {
    next_ref: u64,
    next_snapshot: u64,
    refs: HashMap<String, RefEntry>,
    by_key: HashMap<RefKey, String>,
    snapshots: VecDeque<Snapshot>,
}

/// Why a ref or a snapshot id cannot be used. `Display` tells the agent what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefError {
    /// Never issued for this page, or dropped with old snapshots.
    Unknown(String),
    /// Issued for an earlier document of the page (it navigated or reloaded since).
    Stale(String),
    /// Its element was removed from the document (a script may have re-rendered it).
    Gone(String),
    /// Its element is not shown (no size, hidden, or outside the page after scrolling).
    Hidden(String),
    /// Something else is at the element's centre: the ref and what covers it.
    Covered(String, String),
    /// Something else received the press while it was being clicked: the ref and what.
    /// Nothing was clicked.
    Intercepted(String, String),
    /// Its element shows another role or name than its snapshot did: the ref, then what
    /// the snapshot showed and what the element shows now.
    Changed(String, Shown, String),
    /// No stored snapshot has this id.
    UnknownSnapshot(String),
}

impl fmt::Display for RefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const RETAKE: &str = "take a new snapshot with browser_inspect mode snapshot";
        match self {
            RefError::Unknown(r) => write!(
                f,
                "Unknown ref {}: it was not issued for this page (or its snapshot is too old to \
                 be kept); {RETAKE} and use a ref from it",
                quoted(r)
            ),
            RefError::Stale(r) => write!(
                f,
                "Stale ref {}: it belongs to an earlier document of this page (the page \
                 navigated or reloaded since the snapshot); {RETAKE}",
                quoted(r)
            ),
            RefError::Gone(r) => write!(
                f,
                "Ref {} names an element that is no longer in the page (a script removed or \
                 re-rendered it); {RETAKE}",
                quoted(r)
            ),
            RefError::Hidden(r) => write!(
                f,
                "Ref {} names an element that is not visible; {RETAKE} to see what is shown",
                quoted(r)
            ),
            RefError::Covered(r, by) => write!(
                f,
                "Ref {} is covered by {by} at its centre, so a click would hit that instead; \
                 close or wait for what covers it, then {RETAKE}",
                quoted(r)
            ),
            RefError::Intercepted(r, by) => write!(
                f,
                "The element under ref {} was covered when clicked (the press went to {by}); \
                 nothing was clicked: close or wait for what covers it, then {RETAKE}",
                quoted(r)
            ),
            RefError::Changed(r, was, now) => write!(
                f,
                "The element under ref {} changed since the snapshot (was {was}, now {now}): \
                 {RETAKE} and use the ref it gives",
                quoted(r)
            ),
            RefError::UnknownSnapshot(id) => write!(
                f,
                "Unknown snapshot {}: only the last {MAX_SNAPSHOTS} of a page are kept; {RETAKE}",
                quoted(id)
            ),
        }
    }
}

/// `text` as a JSON string: agent input shown back stays one quoted, escaped token.
fn quoted(text: &str) -> String {
    let short: String = text.chars().take(64).collect();
    serde_json::Value::String(short).to_string()
}

impl PageRefs {
    /// A new snapshot id (`s1`, `s2` …) and its sequence number.
    pub fn begin_snapshot(&mut self) -> (String, u64) {
        self.next_snapshot += 1;
        (format!("s{}", self.next_snapshot), self.next_snapshot)
    }

    /// The ref of `key`, issued now if the element has none, marked as listed by
    /// snapshot `seq`.
    pub fn ref_for(&mut self, key: RefKey, seq: u64) -> String {
        if let Some(name) = self.by_key.get(&key) {
            if let Some(entry) = self.refs.get_mut(name) {
                entry.snapshot = seq;
                return name.clone();
            }
        }
        self.next_ref += 1;
        let name = format!("e{}", self.next_ref);
        self.by_key.insert(key.clone(), name.clone());
        self.refs
            .insert(name.clone(), RefEntry { key, snapshot: seq });
        name
    }

    /// Keeps `snapshot` for paging and drops the oldest snapshots and refs over the bounds.
    pub fn store(&mut self, snapshot: Snapshot) {
        self.snapshots.push_back(snapshot);
        while self.snapshots.len() > MAX_SNAPSHOTS {
            self.snapshots.pop_front();
        }
        if self.refs.len() > MAX_REFS {
            let mut ages: Vec<u64> = self.refs.values().map(|e| e.snapshot).collect();
            ages.sort_unstable();
            // Drop whole snapshots' worth: everything listed last at or before the cut.
            let cut = ages[self.refs.len() - MAX_REFS - 1];
            let by_key = &mut self.by_key;
            self.refs.retain(|_, entry| {
                let keep = entry.snapshot > cut;
                if !keep {
                    by_key.remove(&entry.key);
                }
                keep
            });
        }
    }

    /// What `name` names, or why it names nothing (only [`RefError::Unknown`] here: the
    /// caller checks the document and the element).
    pub fn lookup(&self, name: &str) -> Result<RefKey, RefError> {
        self.refs
            .get(name)
            .map(|entry| entry.key.clone())
            .ok_or_else(|| RefError::Unknown(name.to_string()))
    }

    /// The stored snapshot `id`.
    pub fn snapshot(&self, id: &str) -> Result<&Snapshot, RefError> {
        self.snapshots
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| RefError::UnknownSnapshot(id.to_string()))
    }

    /// The newest stored snapshot.
    pub fn latest(&self) -> Option<&Snapshot> {
        self.snapshots.back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(loader: &str, backend: i64) -> RefKey {
        RefKey {
            frame: "F".into(),
            loader: loader.into(),
            backend,
            shown: button("\"Send\""),
        }
    }

    fn button(name: &str) -> Shown {
        Shown {
            role: "button".into(),
            name: name.into(),
        }
    }

    #[test]
    fn an_element_keeps_its_ref_and_a_new_document_gets_new_ones() {
        let mut refs = PageRefs::default();
        let (_, first) = refs.begin_snapshot();
        let a = refs.ref_for(key("L1", 7), first);
        let (_, second) = refs.begin_snapshot();
        assert_eq!(refs.ref_for(key("L1", 7), second), a);
        let b = refs.ref_for(key("L2", 7), second);
        assert_ne!(a, b);
        assert_eq!(refs.lookup(&a), Ok(key("L1", 7)));
        assert_eq!(refs.lookup("e999"), Err(RefError::Unknown("e999".into())));
        // Shown with another name, the same element gets another ref; the first stays.
        let renamed = RefKey {
            shown: button("\"Pay\""),
            ..key("L1", 7)
        };
        let c = refs.ref_for(renamed.clone(), second);
        assert_ne!(c, a);
        assert_eq!(refs.lookup(&c), Ok(renamed));
        assert_eq!(refs.lookup(&a), Ok(key("L1", 7)));
    }

    #[test]
    fn the_oldest_refs_and_snapshots_go_first() {
        let mut refs = PageRefs::default();
        let mut first_ref = String::new();
        for round in 0..(MAX_SNAPSHOTS + 2) {
            let (id, seq) = refs.begin_snapshot();
            for n in 0..(MAX_REFS / 2) {
                let name = refs.ref_for(key(&format!("L{round}"), n as i64), seq);
                if first_ref.is_empty() {
                    first_ref = name;
                }
            }
            refs.store(Snapshot::empty(&id));
            assert!(refs.refs.len() <= MAX_REFS);
            assert_eq!(refs.refs.len(), refs.by_key.len());
        }
        assert!(refs.lookup(&first_ref).is_err());
        assert!(refs.snapshot("s1").is_err());
        assert!(refs.snapshot(&format!("s{}", MAX_SNAPSHOTS + 2)).is_ok());
    }

    #[test]
    fn messages_quote_what_the_agent_sent_and_say_what_to_do() {
        let message = RefError::Unknown("e1\"\n- button".into()).to_string();
        assert!(
            message.starts_with("Unknown ref \"e1\\\"\\n- button\""),
            "{message}"
        );
        for error in [
            RefError::Stale("e1".into()),
            RefError::Gone("e1".into()),
            RefError::Covered("e1".into(), "<div id=\"o\">".into()),
            RefError::Intercepted("e1".into(), "<div id=\"o\">".into()),
            RefError::Changed("e1".into(), button("\"Send\""), "link".into()),
        ] {
            assert!(error.to_string().contains("take a new snapshot"), "{error}");
        }
        let changed = RefError::Changed("e5".into(), button("\"Cancel\""), "link".into());
        assert_eq!(
            changed.to_string(),
            "The element under ref \"e5\" changed since the snapshot (was button \"Cancel\", \
             now link): take a new snapshot with browser_inspect mode snapshot and use the ref \
             it gives"
        );
    }
}
