//! The session store: node id -> session, plus the index the accept thread authenticates
//! bearer tokens with.
//!
//! ## Token lookup, and what a timing attacker learns
//! A token is 32 random bytes written as 64 lowercase hex characters. Authentication must
//! not let an attacker learn a token byte by byte from response times, and its cost must
//! not grow with the number of sessions (a constant-time compare against every session
//! would make 10,000 sessions 10,000 times slower). So:
//! 1. The presented token must be exactly 64 lowercase hex characters, else it is refused
//!    (this reveals only the token format, which is public).
//! 2. Its first 8 bytes, as one `u64`, look up at most one candidate session in a
//!    `HashMap<u64, node id>`. The map compares whole `u64` keys, never byte by byte.
//! 3. All 32 bytes are then compared with [`constant_time_eq`], which has no early exit.
//!
//! Timing can tell an attacker at most whether a guess shares its first 64 bits with some
//! live token, and it does so only after about 2^64 / sessions guesses; short of that it
//! learns nothing about any token byte. (The map's probing depends on std's SipHash of
//! those 8 bytes under a per-process random key, which the attacker does not know.) The
//! remaining 192 bits are never compared early. A fresh token whose first 64 bits collide
//! with another session's is redrawn, so the index holds exactly one node per key.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::protocol::{IntegrationStatus, ToolIdentity, ToolSession};

use crate::base::constant_time_eq;
pub use crate::base::decode_secret as decode_token;
pub use crate::base::SECRET_BYTES as TOKEN_BYTES;

/// True when `id` matches `^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$`.
pub use crate::protocol::is_valid_node_id as valid_node_id;

fn index_key(secret: &[u8; TOKEN_BYTES]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&secret[..8]);
    u64::from_le_bytes(first)
}

struct Entry {
    /// Shared with the calls authenticated as it (a status change copies it first if so).
    session: Arc<ToolSession>,
    secret: [u8; TOKEN_BYTES],
}

/// The in-memory sessions (the files on disk are written by the server).
#[derive(Default)]
pub struct SessionStore {
    by_node: HashMap<String, Entry>,
    by_key: HashMap<u64, String>,
}

impl SessionStore {
    /// The session of `node_id`.
    pub fn get(&self, node_id: &str) -> Option<&ToolSession> {
        self.by_node.get(node_id).map(|e| &*e.session)
    }

    /// True when `secret` may become `node_id`'s token without sharing an index key
    /// with another node's.
    pub fn key_free(&self, node_id: &str, secret: &[u8; TOKEN_BYTES]) -> bool {
        self.by_key
            .get(&index_key(secret))
            .map_or(true, |owner| owner == node_id)
    }

    /// Inserts or replaces the session of its node. `session.token` must decode and be
    /// [`key_free`](Self::key_free) (the server checks both first).
    pub fn insert(&mut self, session: ToolSession) {
        let Some(secret) = decode_token(&session.token) else {
            return;
        };
        self.remove(&session.node_id);
        self.by_key
            .insert(index_key(&secret), session.node_id.clone());
        let session = Arc::new(session);
        self.by_node
            .insert(session.node_id.clone(), Entry { session, secret });
    }

    /// Forgets `node_id`'s session; returns it if there was one.
    pub fn remove(&mut self, node_id: &str) -> Option<Arc<ToolSession>> {
        let entry = self.by_node.remove(node_id)?;
        self.by_key.remove(&index_key(&entry.secret));
        Some(entry.session)
    }

    /// Replaces a session's status; returns the updated session.
    pub fn set_status(&mut self, node_id: &str, status: IntegrationStatus) -> Option<&ToolSession> {
        let entry = self.by_node.get_mut(node_id)?;
        Arc::make_mut(&mut entry.session).status = status;
        Some(&entry.session)
    }

    /// The session whose token is `token` (see the module docs for the timing argument).
    pub fn authenticate(&self, token: &str) -> Option<&Arc<ToolSession>> {
        let presented = decode_token(token)?;
        let node_id = self.by_key.get(&index_key(&presented))?;
        let entry = self.by_node.get(node_id)?;
        constant_time_eq(&entry.secret, &presented).then_some(&entry.session)
    }

    /// True when `session` is still its node's session: same project, same token. At
    /// once when it is the very session [`authenticate`](Self::authenticate) gave out
    /// (a caller holding it keeps its address from being reused).
    pub fn is_current(&self, session: &ToolSession) -> bool {
        let Some(entry) = self.by_node.get(&session.node_id) else {
            return false;
        };
        std::ptr::eq(&*entry.session, session)
            || decode_token(&session.token).is_some_and(|secret| {
                entry.session.project_id == session.project_id
                    && constant_time_eq(&entry.secret, &secret)
            })
    }

    /// Every project with a session.
    pub fn project_ids(&self) -> Vec<String> {
        let ids: BTreeSet<&String> = self
            .by_node
            .values()
            .map(|e| &e.session.project_id)
            .collect();
        ids.into_iter().cloned().collect()
    }

    /// The identities and statuses of `project_id`'s sessions, by node id.
    pub fn of_project(&self, project_id: &str) -> Vec<(ToolIdentity, IntegrationStatus)> {
        let mut found: Vec<_> = self
            .by_node
            .values()
            .filter(|e| e.session.project_id == project_id)
            .map(|e| (e.session.identity(), e.session.status.clone()))
            .collect();
        found.sort_by(|a, b| a.0.node_id.cmp(&b.0.node_id));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::to_hex;
    use crate::protocol::IntegrationState;

    fn session(node: &str, token: &str) -> ToolSession {
        ToolSession {
            node_id: node.into(),
            project_id: "p".into(),
            token: token.into(),
            status: IntegrationStatus {
                state: IntegrationState::NeedsSetup,
                adapter: "external".into(),
                version: None,
                reason: None,
            },
        }
    }

    #[test]
    fn node_ids_follow_the_pattern() {
        assert!(valid_node_id("a"));
        assert!(valid_node_id(&format!("A{}", "_-9".repeat(42)))); // 127 after the first
        assert!(!valid_node_id(&"a".repeat(129)));
        for bad in ["", "-a", "_a", "a/b", "a.b", "..", "a b", "é"] {
            assert!(!valid_node_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn tokens_are_64_lowercase_hex() {
        let token = "0123456789abcdef".repeat(4);
        assert_eq!(to_hex(&decode_token(&token).unwrap()), token);
        assert!(decode_token(&token.to_uppercase()).is_none());
        assert!(decode_token(&token[..63]).is_none());
        assert!(decode_token(&format!("{token}0")).is_none());
        assert!(decode_token(&format!("{}g", &token[..63])).is_none());
    }

    #[test]
    fn authenticates_only_the_exact_current_token() {
        let a = "11".repeat(32);
        let b = format!("{}{}", "11".repeat(8), "22".repeat(24)); // same index key as a
        let mut store = SessionStore::default();
        store.insert(session("n1", &a));
        assert_eq!(store.authenticate(&a).unwrap().node_id, "n1");
        assert!(store.authenticate(&b).is_none());
        assert!(!store.key_free("n2", &decode_token(&b).unwrap()));
        assert!(store.key_free("n1", &decode_token(&b).unwrap()));
        store.insert(session("n1", &b));
        assert!(
            store.authenticate(&a).is_none(),
            "old token no longer works"
        );
        assert!(!store.is_current(&session("n1", &a)));
        assert!(store.is_current(&session("n1", &b)));
        let mut moved = session("n1", &b);
        moved.project_id = "q".into();
        assert!(!store.is_current(&moved), "another project is not current");
        store.remove("n1");
        assert!(store.authenticate(&b).is_none());
        assert!(store.key_free("n2", &decode_token(&b).unwrap()));
    }

    #[test]
    fn constant_time_eq_compares_every_byte() {
        let a = [7u8; 32];
        let mut b = a;
        assert!(constant_time_eq(&a, &b));
        b[31] ^= 1;
        assert!(!constant_time_eq(&a, &b));
    }
}
