//! The person's keys into a terminal, from the canvas view.
//!
//! The page turns key presses into the bytes a terminal sends for them (xterm's, in normal
//! cursor mode: printable text as it is, Enter `\r`, Backspace DEL, Tab, Escape, arrows
//! `ESC [ A`…, Home/End `ESC [ H` / `ESC [ F`, F1–F4 `ESC O P`…, F5–F12 `ESC [ 15 ~`…,
//! Ctrl+letter its control character) and sends them in batches (one `POST` per 15 ms of
//! typing at most). A paste is sent as plain text, never bracketed: the view cannot tell
//! whether the program asked for bracketed paste (tmux keeps that mode to itself), so it
//! sends what a terminal without that mode sends: its control characters other than
//! newline and tab removed (so a pasted text cannot carry escape sequences), and each
//! newline as Enter (`\r`).
//!
//! Here the text is only bounded; it goes to the terminal through
//! `HostTerminals::person_typed`, the input path of `terminal_input`.

use crate::protocol::is_valid_node_id;

/// Most characters one batch of keys (or one paste) may hold.
pub const MAX_TEXT_CHARS: usize = 16_000;

/// Refuses what cannot be typed: a malformed node id, no text, too much text, or NUL.
pub fn check(node_id: &str, text: &str) -> Result<(), String> {
    if !is_valid_node_id(node_id) {
        return Err("Invalid nodeId: name a terminal node of this canvas".into());
    }
    if text.is_empty() {
        return Err("Missing text: nothing to type".into());
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(format!(
            "Too much text at once: at most {MAX_TEXT_CHARS} characters; paste it in parts"
        ));
    }
    if text.contains('\0') {
        return Err("Invalid text: it holds a NUL character".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bounded() {
        assert!(check("term-1", "ls\r\x1b[A\x03").is_ok());
        assert!(check("term-1", "").is_err());
        assert!(check("../x", "a").is_err());
        assert!(check("term-1", "a\0b").is_err());
        assert!(check("term-1", &"é".repeat(MAX_TEXT_CHARS)).is_ok());
        assert!(check("term-1", &"a".repeat(MAX_TEXT_CHARS + 1)).is_err());
    }
}
