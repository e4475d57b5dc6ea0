//! The person's keys into a terminal, from the canvas view.
//!
//! The page turns key presses into the bytes a terminal sends for them (xterm's, in normal
//! cursor mode: printable text as it is, Enter `\r`, Backspace DEL, Tab, Escape, arrows
//! `ESC [ A`…, Home/End `ESC [ H` / `ESC [ F`, F1–F4 `ESC O P`…, F5–F12 `ESC [ 15 ~`…,
//! Ctrl+letter its control character) and sends them in batches (one `POST` per 15 ms of
//! typing at most). A paste is its own action, `paste`, with the text's control
//! characters other than newline and tab removed (by the page, and again by
//! `HostTerminals::person_pasted`), so a pasted text cannot carry an escape sequence
//! (nor `ESC [ 201 ~`, which would end a bracketed paste early). The server delivers it as
//! a terminal does: newlines as Enter (`\r`), between `ESC [ 200 ~` and `ESC [ 201 ~` when
//! the program asked for bracketed paste (the PTY model tracks that mode; tmux's
//! `paste-buffer -p` brackets by the pane's own mode).
//!
//! Here the text is only bounded; keys go to the terminal through
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
