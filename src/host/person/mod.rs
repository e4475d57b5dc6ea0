//! What the person runs and decides besides `serve`: the commands of the `termsprawl-tools`
//! binary that read the trail and change what agents may do, and the files they write.
//!
//! - [`activity`]: `activity`, the trail for people.
//! - [`attention`]: `serve`'s watch of what agents are doing: trail lines and
//!   `--notify-command` when one starts waiting for the person or is done.
//! - [`approvals`]: `approvals` and `policy`, answering held calls and setting the rules
//!   (and `serve`'s side: the list it writes, the requests it applies).
//! - [`browser_control`]: `browser-control on|off`, switched while `serve` runs.
//! - [`links`]: `link`/`unlink`, the link files `context_read` and messaging read.
//! - [`worktrees`]: `worktrees list|diff|merge|discard`, taking (or not) what agents did
//!   in their git worktrees.
//!
//! The canvas view's actions reach the same code ([`links`], [`browser_control`]).

pub mod activity;
pub mod approvals;
pub mod attention;
pub mod browser_control;
pub mod links;
pub mod worktrees;
