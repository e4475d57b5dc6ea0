//! The default host's [`Terminals`]: tmux when it is installed (sessions outlive the host,
//! screen-accurate reads, external attach), else the built-in PTY backend.
//!
//! Both backends hand agents inert text only: PTY reads come from the plain-text screen
//! model, tmux reads from `capture-pane` (no `-e`) with every control character other
//! than newline and tab removed.
//!
//! `is_warm` (the trait) means "a session exists for this node": the runtime asks it
//! before `terminal_external` and before preparing an agent launch, and a launch is always
//! prepared before its session starts, so an existing session there is one that predates
//! this host. Strict warmth (tmux: created before this host process) is reported per node
//! by [`HostTerminals::states`], which `canvas_list` shows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::terminal::{PtyTerminals, TerminalOptions, WindowSize, FALLBACK_SHELL};
use super::tmux::TmuxServer;
use super::HostError;
use crate::runtime::Terminals;

/// `terminal_read` never asks for more than this (the runtime's cap).
const MAX_CAPTURE_CHARS: usize = 100_000;

/// How long `canvas_list` reuses one `tmux list-sessions` answer (tmux backend). Opening
/// or closing a terminal through this host (and adopting at start) drops it at once, so the
/// only change it can lag behind is one nobody here made: a program exiting on its own, or
/// a session killed from outside, shows in `canvas_list` at most this much later. That
/// lag is below what an agent can act on (its next call takes longer), and it turns one
/// tmux process per listing into a few per second.
const LISTING_TTL: Duration = Duration::from_millis(250);

/// The message for `terminal_external` on the PTY backend.
pub const EXTERNAL_NEEDS_TMUX: &str = "terminal_external needs the tmux backend: install tmux and restart `termsprawl-tools serve` (or start it with --terminals tmux); built-in PTY terminals cannot be opened in a second window";

/// Which backend `serve --terminals` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TerminalsMode {
    /// tmux if it is on PATH, else the PTY backend.
    #[default]
    Auto,
    /// tmux, or fail to start.
    Tmux,
    /// The built-in PTY backend.
    Pty,
}

impl FromStr for TerminalsMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(TerminalsMode::Auto),
            "tmux" => Ok(TerminalsMode::Tmux),
            "pty" => Ok(TerminalsMode::Pty),
            other => Err(format!("--terminals {other}: expected auto, tmux or pty")),
        }
    }
}

/// A session's state as `canvas_list` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionState {
    /// Its program is running.
    pub live: bool,
    /// It was started before this host process (only tmux sessions can be).
    pub warm: bool,
}

enum Backend {
    Tmux(TmuxServer),
    Pty(PtyTerminals),
}

/// The terminals of every terminal node, on one backend.
pub struct HostTerminals {
    backend: Backend,
    started_at: SystemTime,
    /// Sessions this host started (so not warm), for the tmux backend.
    opened: Mutex<HashSet<String>>,
    /// `<data>/agent-tools/preferences.json` (for `externalTerminal.command`).
    preferences: PathBuf,
    /// The last tmux listing for [`HostTerminals::states`] and when it was taken (see
    /// [`LISTING_TTL`]); `None` once a start, close or adopt may have changed it.
    listing: Mutex<Option<(Instant, HashMap<String, SessionState>)>>,
}

/// The private tmux server's directory of a data directory.
pub fn tmux_dir(data: &Path) -> PathBuf {
    data.join("agent-tools").join("tmux")
}

/// `termsprawl-tools stop-terminals`: ends the private tmux server of `data` and every
/// terminal in it. Returns false when tmux is not installed (nothing can be running).
pub fn stop_terminals(data: &Path) -> Result<bool, HostError> {
    if !TmuxServer::available() {
        return Ok(false);
    }
    let server =
        TmuxServer::new(&tmux_dir(data)).map_err(|e| HostError::Terminal(e.to_string()))?;
    server
        .kill_server()
        .map_err(|e| HostError::Terminal(e.to_string()))?;
    Ok(true)
}

impl HostTerminals {
    /// The backend `mode` asks for, for the data directory `data`.
    pub fn new(mode: TerminalsMode, data: &Path) -> Result<HostTerminals, HostError> {
        let tmux = match mode {
            TerminalsMode::Pty => false,
            TerminalsMode::Tmux => true,
            TerminalsMode::Auto => TmuxServer::available(),
        };
        let backend = if tmux {
            let server =
                TmuxServer::new(&tmux_dir(data)).map_err(|e| HostError::Terminal(e.to_string()))?;
            Backend::Tmux(server)
        } else {
            Backend::Pty(PtyTerminals::new())
        };
        Ok(HostTerminals {
            backend,
            started_at: SystemTime::now(),
            opened: Mutex::default(),
            preferences: data.join("agent-tools").join("preferences.json"),
            listing: Mutex::default(),
        })
    }

    /// `"tmux"` or `"pty"`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Tmux(_) => "tmux",
            Backend::Pty(_) => "pty",
        }
    }

    /// Starts node `node_id`'s session in `cwd` with `env` added: `command` through the
    /// user's shell (`$SHELL -c`), or the shell itself when `None`.
    pub fn start(
        &self,
        node_id: &str,
        cwd: &Path,
        env: &BTreeMap<String, String>,
        command: Option<&str>,
    ) -> Result<(), String> {
        let size = WindowSize::default();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        match &self.backend {
            Backend::Tmux(tmux) => {
                let opened = tmux.open(node_id, cwd, &env, command, size.cols, size.rows);
                if opened.is_ok() {
                    self.lock_opened().insert(node_id.to_string());
                }
                // After `opened` is updated, so no listing taken before it can be kept.
                self.forget_listing();
                opened.map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                let options = TerminalOptions {
                    command: command.map(|c| vec![user_shell(), "-c".to_string(), c.to_string()]),
                    cwd: cwd.to_path_buf(),
                    env,
                    size,
                };
                pty.open(node_id, &options)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Ends node `node_id`'s session and everything running in it (none is fine).
    pub fn close(&self, node_id: &str) -> Result<(), String> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                self.lock_opened().remove(node_id);
                let killed = tmux.kill(node_id);
                self.forget_listing();
                killed.map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                pty.close(node_id);
                Ok(())
            }
        }
    }

    /// Whether node `node_id` has a session (running or not yet reaped).
    pub fn has_session(&self, node_id: &str) -> bool {
        match &self.backend {
            Backend::Tmux(tmux) => tmux.session(node_id).ok().flatten().is_some(),
            Backend::Pty(pty) => pty.get(node_id).is_some(),
        }
    }

    /// Every session, by node id. The tmux backend answers from one `tmux list-sessions`
    /// at most `LISTING_TTL` (250 ms) old, taken after this host's last start, close or adopt.
    pub fn states(&self) -> HashMap<String, SessionState> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let mut listing = crate::server::lock_or_recover(&self.listing);
                if let Some((taken, states)) = listing.as_ref() {
                    if taken.elapsed() < LISTING_TTL {
                        return states.clone();
                    }
                }
                let taken = Instant::now();
                let started = self
                    .started_at
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let Ok(sessions) = tmux.sessions() else {
                    // A failed listing is not kept: the next call asks again.
                    *listing = None;
                    return HashMap::new();
                };
                let opened = self.lock_opened();
                let states: HashMap<String, SessionState> = sessions
                    .into_iter()
                    .map(|s| {
                        let warm = !opened.contains(&s.name) && s.created_unix <= started;
                        let state = SessionState {
                            live: !s.pane_dead,
                            warm,
                        };
                        (s.name, state)
                    })
                    .collect();
                *listing = Some((taken, states.clone()));
                states
            }
            Backend::Pty(pty) => pty
                .ids()
                .into_iter()
                .filter_map(|id| {
                    let terminal = pty.get(&id)?;
                    let state = SessionState {
                        live: terminal.live(),
                        warm: false,
                    };
                    Some((id, state))
                })
                .collect(),
        }
    }

    /// At host start: ends every session for which `keep(node_id)` is false and returns
    /// the node ids kept. The PTY backend has no sessions from before.
    pub fn adopt(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<String>, String> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let adopted = tmux.adopt(keep);
                self.forget_listing();
                adopted
                    .map(|kept| kept.into_iter().map(|s| s.name).collect())
                    .map_err(|e| e.to_string())
            }
            Backend::Pty(_) => Ok(Vec::new()),
        }
    }

    /// At host shutdown: PTY terminals are always ended; tmux sessions keep running
    /// unless `kill_tmux` (`--kill-terminals`).
    pub fn shutdown(&self, kill_tmux: bool) {
        match &self.backend {
            Backend::Tmux(tmux) if kill_tmux => {
                let killed = tmux.kill_server();
                self.forget_listing();
                if let Err(error) = killed {
                    eprintln!("termsprawl-tools: could not stop the tmux server: {error}");
                }
            }
            Backend::Tmux(_) => {}
            Backend::Pty(pty) => pty.close_all(),
        }
    }

    /// `externalTerminal.command` from preferences.json; a malformed value names the file.
    fn external_command(&self) -> Result<Option<Vec<String>>, String> {
        let malformed = |why: &str| {
            format!(
                "Malformed preferences file {}: {why}",
                self.preferences.display()
            )
        };
        let value = match crate::server::read_json(&self.preferences) {
            Ok(Some(value)) => value,
            Ok(None) => return Ok(None),
            Err(error) => return Err(malformed(&error.to_string())),
        };
        let Some(command) = value.get("externalTerminal").and_then(|e| e.get("command")) else {
            return Ok(None);
        };
        let argv: Option<Vec<String>> = command.as_array().and_then(|items| {
            items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect()
        });
        match argv {
            Some(argv) if !argv.is_empty() => Ok(Some(argv)),
            _ => Err(malformed(
                "externalTerminal.command must be a non-empty array of strings, e.g. [\"xterm\", \"-e\", \"{attach}\"]",
            )),
        }
    }

    /// Drops the cached tmux listing (after this host changed the sessions).
    fn forget_listing(&self) {
        *crate::server::lock_or_recover(&self.listing) = None;
    }

    fn lock_opened(&self) -> MutexGuard<'_, HashSet<String>> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        crate::server::lock_or_recover(&self.opened)
    }
}

impl Terminals for HostTerminals {
    fn is_warm(&self, node_id: &str) -> bool {
        self.has_session(node_id)
    }

    fn has_ready_session(&self, node_id: &str) -> bool {
        match &self.backend {
            Backend::Tmux(tmux) => tmux.has_ready_session(node_id).unwrap_or(false),
            Backend::Pty(pty) => pty.get(node_id).is_some_and(|t| t.ready() && t.live()),
        }
    }

    fn has_live_session(&self, node_id: &str) -> bool {
        match &self.backend {
            Backend::Tmux(tmux) => tmux.has_live_session(node_id).unwrap_or(false),
            Backend::Pty(pty) => pty.get(node_id).is_some_and(|t| t.live()),
        }
    }

    fn write(&self, node_id: &str, text: &str) -> Result<(), String> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let result = if text == "\u{3}" {
                    tmux.interrupt(node_id)
                } else {
                    // Each carriage return is an Enter key press; the rest is typed literally.
                    let mut parts = text.split('\r').peekable();
                    let mut outcome = Ok(());
                    while let Some(part) = parts.next() {
                        outcome = if parts.peek().is_some() {
                            tmux.submit(node_id, part)
                        } else {
                            tmux.send_literal(node_id, part)
                        };
                        if outcome.is_err() {
                            break;
                        }
                    }
                    outcome
                };
                result.map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                let terminal = pty.get(node_id).ok_or("Terminal is not attached")?;
                let result = if text == "\u{3}" {
                    terminal.interrupt()
                } else {
                    terminal.write(text.as_bytes())
                };
                result.map_err(|e| e.to_string())
            }
        }
    }

    fn capture(&self, node_id: &str) -> Option<String> {
        match &self.backend {
            Backend::Tmux(tmux) => tmux
                .capture(node_id, MAX_CAPTURE_CHARS)
                .ok()
                .map(|text| inert(&text)),
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.read(MAX_CAPTURE_CHARS)),
        }
    }

    fn scrollback(&self, _node_id: &str) -> Option<String> {
        // Raw scrollback holds the program's escape sequences; agents only get `capture`.
        None
    }

    fn attach_external(&self, node_id: &str) -> Result<Value, String> {
        let Backend::Tmux(tmux) = &self.backend else {
            return Err(EXTERNAL_NEEDS_TMUX.to_string());
        };
        let configured = self.external_command()?;
        let program = tmux
            .external(node_id, configured.as_deref())
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "nodeId": node_id,
            "program": program,
            "message": "Opened a second view of this terminal in a window; closing that window only detaches",
        }))
    }
}

/// The user's `$SHELL`, else `/bin/sh`.
fn user_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| FALLBACK_SHELL.to_string())
}

/// `text` without control characters other than newline and tab.
fn inert(text: &str) -> String {
    text.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!("auto".parse(), Ok(TerminalsMode::Auto));
        assert_eq!("tmux".parse(), Ok(TerminalsMode::Tmux));
        assert_eq!("pty".parse(), Ok(TerminalsMode::Pty));
        assert!("screen"
            .parse::<TerminalsMode>()
            .unwrap_err()
            .contains("auto, tmux or pty"));
    }

    #[test]
    fn captures_are_made_inert() {
        assert_eq!(inert("a\u{1b}[31mb\r\n\tc\u{7}\u{9b}d"), "a[31mb\n\tcd");
    }

    #[test]
    fn pty_backend_has_no_external_view_and_no_warm_sessions() {
        let data = std::env::temp_dir().join(format!("host-terminals-{}", std::process::id()));
        let terminals = HostTerminals::new(TerminalsMode::Pty, &data).unwrap();
        assert_eq!(terminals.backend_name(), "pty");
        assert_eq!(
            terminals.attach_external("n1").unwrap_err(),
            EXTERNAL_NEEDS_TMUX
        );
        let cwd = std::env::temp_dir();
        terminals
            .start("n1", &cwd, &BTreeMap::new(), Some("sleep 5"))
            .unwrap();
        assert!(terminals.is_warm("n1") && terminals.has_live_session("n1"));
        assert_eq!(
            terminals.states().get("n1"),
            Some(&SessionState {
                live: true,
                warm: false
            })
        );
        assert_eq!(terminals.adopt(&|_| false).unwrap(), Vec::<String>::new());
        terminals.close("n1").unwrap();
        assert!(!terminals.has_session("n1"));
        terminals.shutdown(false);
    }

    #[test]
    fn tmux_listing_is_reused_but_dropped_on_start_and_close() {
        if !TmuxServer::available() {
            eprintln!("skipped: no tmux");
            return;
        }
        let data = std::env::temp_dir().join(format!("ht-list-{}", std::process::id()));
        let terminals = HostTerminals::new(TerminalsMode::Tmux, &data).unwrap();
        assert!(terminals.states().is_empty());
        let cwd = std::env::temp_dir();
        terminals
            .start("n1", &cwd, &BTreeMap::new(), Some("sleep 30"))
            .unwrap();
        // Seen at once although the empty listing above is younger than LISTING_TTL.
        assert_eq!(
            terminals.states().get("n1"),
            Some(&SessionState {
                live: true,
                warm: false
            })
        );
        terminals.close("n1").unwrap();
        assert!(!terminals.states().contains_key("n1"));
        terminals.shutdown(true);
        let _ = std::fs::remove_dir_all(&data);
    }
}
