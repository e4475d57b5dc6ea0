//! Text from agents, pages or files made safe to print for a person in a terminal: the
//! characters a terminal would act on or hide are shown escaped, never written raw.
//! `activity`, `doctor`, the command-line messages and `serve`'s log lines that quote
//! such text print through it.
//!
//! Escaped ([`is_escaped_for_terminal`]):
//! - C0 controls U+0000–U+001F (ESC starts cursor moves, erasing, window titles), DEL
//!   U+007F and C1 controls U+0080–U+009F (U+009B is a one-character CSI);
//! - every Unicode default-ignorable code point, which terminals draw as nothing: the
//!   bidi controls (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069), zero-width
//!   characters and joiners (U+200B–U+200D, U+2060–U+2064, U+FEFF), the soft hyphen
//!   U+00AD, fillers (U+115F–U+1160, U+3164, U+FFA0), variation selectors (U+180B–U+180F,
//!   U+FE00–U+FE0F, U+E0100–U+E01EF), tags (U+E0000–U+E007F) and the other reserved
//!   ranges of that property (U+034F, U+17B4–U+17B5, U+2065–U+206F, U+FFF0–U+FFF8,
//!   U+1BCA0–U+1BCA3, U+1D173–U+1D17A, U+E0000–U+E0FFF);
//! - the line and paragraph separators U+2028–U+2029 and the interlinear annotation
//!   characters U+FFF9–U+FFFB, which end or hide a line in some terminals.
//!
//! Forms: `\n`, `\r`, `\t`; `\x1b` for the other C0 controls, DEL and C1; `\u202e` for
//! the rest of the Basic Multilingual Plane and `\u{e0041}` beyond it.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is shown escaped (the set is in the module docs).
pub fn is_escaped_for_terminal(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Appends `c` to `out`, escaped if [`is_escaped_for_terminal`] says so.
pub fn push_escaped(out: &mut String, c: char) {
    if !is_escaped_for_terminal(c) {
        out.push(c);
        return;
    }
    // Writing to a String cannot fail.
    let _ = match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        '\u{0}'..='\u{9f}' => write!(out, "\\x{:02x}", u32::from(c)),
        '\u{a0}'..='\u{ffff}' => write!(out, "\\u{:04x}", u32::from(c)),
        _ => write!(out, "\\u{{{:x}}}", u32::from(c)),
    };
}

/// `text` cut to its first `max` characters (`…` marks a cut), then escaped as
/// [`escape_for_terminal`] does: text from agents and pages kept or shown short.
pub fn cut_escaped(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => escape_for_terminal(text),
        Some((end, _)) => {
            let mut out = escape_for_terminal(&text[..end]).into_owned();
            out.push('…');
            Cow::Owned(out)
        }
    }
}

/// `text` with every character a terminal would act on or hide escaped (see the module
/// docs); borrowed when there is none.
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_escaped_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_invisible_characters_are_escaped_and_the_rest_kept() {
        let forged = "\r\x1b[2K\x1b[1A\u{9b}31m\x1b]0;x\x07\u{7f}";
        assert_eq!(
            escape_for_terminal(forged),
            "\\r\\x1b[2K\\x1b[1A\\x9b31m\\x1b]0;x\\x07\\x7f"
        );
        assert_eq!(
            escape_for_terminal("a\u{202e}b\u{200b}\u{feff}\u{2066}\u{e0041}\u{ad}\n\t"),
            "a\\u202eb\\u200b\\ufeff\\u2066\\u{e0041}\\u00ad\\n\\t"
        );
        // Printable text, accents, CJK and emoji are untouched (and not copied).
        let plain = "cargo test -- é 漢字 🦀 \\x1b";
        assert!(matches!(escape_for_terminal(plain), Cow::Borrowed(_)));
    }

    #[test]
    fn no_escaped_form_holds_a_character_it_escapes() {
        let mut out = String::new();
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            if is_escaped_for_terminal(c) {
                out.clear();
                push_escaped(&mut out, c);
                assert!(out.starts_with('\\') && out.len() > 1, "{out}");
                assert!(!out.chars().any(is_escaped_for_terminal), "{out:?}");
            }
        }
    }
}
