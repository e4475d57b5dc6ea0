//! Classes of operations: what a person allows, asks about or denies per agent (the one
//! place that sorts the catalogue's operations; a test checks every operation has one).
//!
//! Why these classes: `read` changes nothing; `canvas` changes only the layout and notes
//! a person sees and can undo; a terminal is the way to run commands, so the terminals
//! an agent opened itself (`terminals-own`) are told apart from every other terminal
//! (`terminals-others`: shells the person opened, other agents' terminals), where an
//! agent's keys reach programs it did not start; typing into a terminal no boundary
//! confines (`terminals-unconfined`: the person's own shells) runs what is typed with the
//! person's authority, a way out of any confinement, so it is a class of its own; `browser`
//! acts on the web as the user; `launch` starts more agents; `messaging` talks to other
//! agents.

/// A class of operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationClass {
    /// Reads only: discovery, status, lists, terminal and page contents, context.
    Read,
    /// The canvas's layout and notes: select, move, resize, group, stickies, artifacts.
    Canvas,
    /// Terminals the agent opened itself (`terminal_open` and what follows in them).
    TerminalsOwn,
    /// Any other terminal: the person's shells and other agents' terminals.
    TerminalsOthers,
    /// Typing (`terminal_submit`, `terminal_input`) into another's terminal that no
    /// boundary confines: the person's own shells.
    TerminalsUnconfined,
    /// Every browser operation that acts (open, navigate, click, type, claim, transfer).
    Browser,
    /// `agent_launch`: starting another agent.
    Launch,
    /// Agent messaging: `agent_send`, `agent_task`, `agent_reply`.
    Messaging,
}

/// Every class, in the order people read them.
pub const OPERATION_CLASSES: [OperationClass; 8] = [
    OperationClass::Read,
    OperationClass::Canvas,
    OperationClass::TerminalsOwn,
    OperationClass::TerminalsOthers,
    OperationClass::TerminalsUnconfined,
    OperationClass::Browser,
    OperationClass::Launch,
    OperationClass::Messaging,
];

impl OperationClass {
    /// Its name in policy files, `session_info` and the view.
    pub fn name(self) -> &'static str {
        match self {
            OperationClass::Read => "read",
            OperationClass::Canvas => "canvas",
            OperationClass::TerminalsOwn => "terminals-own",
            OperationClass::TerminalsOthers => "terminals-others",
            OperationClass::TerminalsUnconfined => "terminals-unconfined",
            OperationClass::Browser => "browser",
            OperationClass::Launch => "launch",
            OperationClass::Messaging => "messaging",
        }
    }

    /// The class named `name`.
    pub fn named(name: &str) -> Option<OperationClass> {
        OPERATION_CLASSES.into_iter().find(|c| c.name() == name)
    }

    /// The class of `operation` (`None`: not in the catalogue). An operation on an
    /// existing terminal is `TerminalsOthers` unless `own_terminal` says the calling
    /// agent opened it; `terminal_open` itself opens the agent's own.
    pub fn of(operation: &str, own_terminal: bool) -> Option<OperationClass> {
        use OperationClass::*;
        Some(match operation {
            "session_info" | "guide_read" | "agent_status" | "canvas_list" | "context_read"
            | "agent_cards" | "browser_list" | "browser_inspect" | "browser_screenshot"
            | "browser_wait" | "terminal_read" | "terminal_wait" => Read,
            // An agent saying it waits for the person must never wait for the person.
            "agent_state" => Read,
            "canvas_select" | "canvas_move" | "canvas_resize" | "canvas_group" | "sticky_open"
            | "artifact_open" => Canvas,
            "terminal_open" => TerminalsOwn,
            "terminal_submit" | "terminal_input" | "terminal_interrupt" | "terminal_external"
            | "terminal_close" => {
                if own_terminal {
                    TerminalsOwn
                } else {
                    TerminalsOthers
                }
            }
            "agent_launch" => Launch,
            "agent_send" | "agent_task" | "agent_reply" => Messaging,
            op if op.starts_with("browser_") => Browser,
            _ => return None,
        })
    }

    /// Whether `operation` types into a terminal (its class is `terminals-unconfined` when
    /// that terminal is another's and not confined).
    pub fn types(operation: &str) -> bool {
        matches!(operation, "terminal_submit" | "terminal_input")
    }

    /// Whether an operation's class depends on which terminal it names.
    pub fn depends_on_terminal(operation: &str) -> bool {
        OperationClass::of(operation, true) != OperationClass::of(operation, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::AGENT_TOOLS;

    #[test]
    fn every_operation_of_the_catalogue_has_a_class() {
        for tool in AGENT_TOOLS {
            assert!(
                OperationClass::of(tool.name, false).is_some(),
                "{}",
                tool.name
            );
        }
        assert_eq!(OperationClass::of("rm_rf", false), None);
    }

    #[test]
    fn names_go_both_ways_and_terminals_depend_on_who_opened_them() {
        for class in OPERATION_CLASSES {
            assert_eq!(OperationClass::named(class.name()), Some(class));
        }
        assert!(OperationClass::depends_on_terminal("terminal_submit"));
        assert!(!OperationClass::depends_on_terminal("terminal_read"));
        assert_eq!(
            OperationClass::of("browser_click", false),
            Some(OperationClass::Browser)
        );
        assert_eq!(
            OperationClass::of("browser_inspect", false),
            Some(OperationClass::Read)
        );
    }
}
