//! Key names for `terminal_input`'s `keys`, and the bytes each sends as an xterm-style
//! terminal sends it: what a program in the terminal expects from a keyboard.
//!
//! Names: a single character (`G`, `:`, `é`); `Enter`, `Tab`, `BTab` (Shift+Tab),
//! `Escape`, `Backspace`, `Space`, `Up`, `Down`, `Left`, `Right`, `Home`, `End`, `PageUp`,
//! `PageDown`, `Insert`, `Delete`, `F1`–`F12` (as written here; `Return`, `S-Tab`, `Esc`,
//! `BSpace`, `ArrowUp`…, `PgUp`, `PgDn` too); `C-x` (Ctrl with a letter, or with
//! `[ \ ] ^ _ ?`) and `M-x` (Meta/Alt: Escape before any other key, `M-b`, `M-Left`,
//! `M-C-x`, also written `C-M-x`). Names are exact (case matters, as in `C-c` and `G`),
//! so the published schema states the same rule as a pattern, [`KEY_NAME_PATTERN`].
//!
//! The arrows, `Home` and `End` depend on the program's cursor-key mode (`CSI ? 1 h`,
//! which `less`, `vim` and readline set): in application mode they are `ESC O A`, else
//! `ESC [ A`. Keys are never wrapped in a bracketed paste: each is a key press.

/// The sentence naming every key a `keys` item may be (for error messages and schemas).
pub const KNOWN_KEYS: &str = "a single character, Enter, Tab, BTab, Escape, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1 to F12, C-x (Ctrl with a letter or one of [ \\ ] ^ _ ?) or M-x (Alt with any of these)";

/// The longest key name: longer items are refused without looking further.
pub const MAX_KEY_NAME_CHARS: usize = 16;

/// The JSON Schema pattern every key name matches, and nothing else:
/// [`TerminalKey::parse`] as a regular expression (a character other than C0, DEL and
/// C1 controls; a named key of the module docs; a chord).
pub const KEY_NAME_PATTERN: &str = "^((M-)?([^\\u0000-\\u001f\\u007f-\\u009f]|Enter|Return|Tab|BTab|S-Tab|Escape|Esc|Backspace|BSpace|Space|Up|ArrowUp|Down|ArrowDown|Right|ArrowRight|Left|ArrowLeft|Home|End|Insert|Delete|PageUp|PgUp|PageDown|PgDn|F[1-9]|F1[0-2]|C-[a-zA-Z\\[\\\\\\]^_?])|C-M-[a-zA-Z\\[\\\\\\]^_?])$";

/// One key press, parsed from its name (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TerminalKey {
    /// Alt held: an Escape is sent first.
    meta: bool,
    press: Press,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Press {
    /// A character as typed (Ctrl chords are their control character).
    Char(char),
    /// A fixed sequence.
    Fixed(&'static str),
    /// `ESC [ x` in normal mode, `ESC O x` in application cursor-key mode.
    Cursor(char),
}

/// Named keys and their presses.
const NAMED: &[(&str, Press)] = &[
    ("Enter", Press::Fixed("\r")),
    ("Return", Press::Fixed("\r")),
    ("Tab", Press::Fixed("\t")),
    ("BTab", Press::Fixed("\x1b[Z")),
    ("S-Tab", Press::Fixed("\x1b[Z")),
    ("Escape", Press::Fixed("\x1b")),
    ("Esc", Press::Fixed("\x1b")),
    ("Backspace", Press::Fixed("\x7f")),
    ("BSpace", Press::Fixed("\x7f")),
    ("Space", Press::Char(' ')),
    ("Up", Press::Cursor('A')),
    ("ArrowUp", Press::Cursor('A')),
    ("Down", Press::Cursor('B')),
    ("ArrowDown", Press::Cursor('B')),
    ("Right", Press::Cursor('C')),
    ("ArrowRight", Press::Cursor('C')),
    ("Left", Press::Cursor('D')),
    ("ArrowLeft", Press::Cursor('D')),
    ("Home", Press::Cursor('H')),
    ("End", Press::Cursor('F')),
    ("Insert", Press::Fixed("\x1b[2~")),
    ("Delete", Press::Fixed("\x1b[3~")),
    ("PageUp", Press::Fixed("\x1b[5~")),
    ("PgUp", Press::Fixed("\x1b[5~")),
    ("PageDown", Press::Fixed("\x1b[6~")),
    ("PgDn", Press::Fixed("\x1b[6~")),
    ("F1", Press::Fixed("\x1bOP")),
    ("F2", Press::Fixed("\x1bOQ")),
    ("F3", Press::Fixed("\x1bOR")),
    ("F4", Press::Fixed("\x1bOS")),
    ("F5", Press::Fixed("\x1b[15~")),
    ("F6", Press::Fixed("\x1b[17~")),
    ("F7", Press::Fixed("\x1b[18~")),
    ("F8", Press::Fixed("\x1b[19~")),
    ("F9", Press::Fixed("\x1b[20~")),
    ("F10", Press::Fixed("\x1b[21~")),
    ("F11", Press::Fixed("\x1b[23~")),
    ("F12", Press::Fixed("\x1b[24~")),
];

impl TerminalKey {
    /// The key `name` stands for; `None` for a name not in the module docs' list.
    pub fn parse(name: &str) -> Option<TerminalKey> {
        if name.chars().count() > MAX_KEY_NAME_CHARS {
            return None;
        }
        let mut chars = name.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            // One character types itself; a control character has a name instead.
            return (!c.is_control()).then_some(TerminalKey {
                meta: false,
                press: Press::Char(c),
            });
        }
        if let Some(rest) = name.strip_prefix("M-") {
            let key = TerminalKey::parse(rest).filter(|key| !key.meta)?;
            return Some(TerminalKey { meta: true, ..key });
        }
        if let Some(rest) = name.strip_prefix("C-") {
            if let Some(inner) = rest.strip_prefix("M-") {
                return TerminalKey::parse(&format!("M-C-{inner}"));
            }
            return control(rest).map(|c| TerminalKey {
                meta: false,
                press: Press::Char(c),
            });
        }
        NAMED
            .iter()
            .find(|(known, _)| *known == name)
            .map(|&(_, press)| TerminalKey { meta: false, press })
    }

    /// The text the key sends, for a program in application cursor-key mode or not.
    pub fn text(self, application_cursor: bool) -> String {
        let mut text = String::new();
        if self.meta {
            text.push('\x1b');
        }
        match self.press {
            Press::Char(c) => text.push(c),
            Press::Fixed(sequence) => text.push_str(sequence),
            Press::Cursor(c) => {
                text.push_str(if application_cursor { "\x1bO" } else { "\x1b[" });
                text.push(c);
            }
        }
        text
    }
}

/// The control character of `C-<rest>`: a letter (either case) or one of `[ \ ] ^ _ ?`.
/// `C-@` and `C-Space` (NUL) are not offered: no terminal write carries a NUL.
fn control(rest: &str) -> Option<char> {
    let mut chars = rest.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    let code = match c {
        'a'..='z' => c as u8 - b'a' + 1,
        'A'..='Z' => c as u8 - b'A' + 1,
        '[' => 0x1b,
        '\\' => 0x1c,
        ']' => 0x1d,
        '^' => 0x1e,
        '_' => 0x1f,
        '?' => 0x7f,
        _ => return None,
    };
    Some(code as char)
}

/// The text `names` send, in order, or the first name that is not a key.
pub fn keys_text<'a>(
    names: impl IntoIterator<Item = &'a str>,
    application_cursor: bool,
) -> Result<String, &'a str> {
    let mut text = String::new();
    for name in names {
        let key = TerminalKey::parse(name).ok_or(name)?;
        text.push_str(&key.text(application_cursor));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(names: &[&str], application: bool) -> String {
        keys_text(names.iter().copied(), application).unwrap()
    }

    #[test]
    fn characters_type_themselves() {
        assert_eq!(sent(&["G", "g", "q", ":", "!", "é", " "], false), "Ggq:!é ");
        assert_eq!(sent(&["Space"], false), " ");
    }

    #[test]
    fn named_keys_are_xterm_sequences() {
        assert_eq!(
            sent(&["Enter", "Tab", "Escape", "Backspace"], false),
            "\r\t\x1b\x7f"
        );
        assert_eq!(sent(&["Return", "Esc", "BSpace"], false), "\r\x1b\x7f");
        assert_eq!(
            sent(&["PageUp", "PageDown", "Insert", "Delete"], false),
            "\x1b[5~\x1b[6~\x1b[2~\x1b[3~"
        );
        assert_eq!(
            sent(&["F1", "F4", "F5", "F10", "F12"], false),
            "\x1bOP\x1bOS\x1b[15~\x1b[21~\x1b[24~"
        );
        assert_eq!(sent(&["BTab", "S-Tab"], false), "\x1b[Z\x1b[Z");
    }

    #[test]
    fn arrows_follow_the_cursor_key_mode() {
        let arrows = ["Up", "Down", "Right", "Left", "Home", "End"];
        assert_eq!(sent(&arrows, false), "\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F");
        assert_eq!(sent(&arrows, true), "\x1bOA\x1bOB\x1bOC\x1bOD\x1bOH\x1bOF");
        assert_eq!(sent(&["ArrowUp"], true), "\x1bOA");
    }

    #[test]
    fn chords() {
        assert_eq!(
            sent(&["C-c", "C-C", "C-d", "C-z", "C-["], false),
            "\x03\x03\x04\x1a\x1b"
        );
        assert_eq!(sent(&["C-?", "C-_", "C-\\"], false), "\x7f\x1f\x1c");
        assert_eq!(
            sent(&["M-b", "M-Left", "M-Enter"], false),
            "\x1bb\x1b\x1b[D\x1b\r"
        );
        assert_eq!(sent(&["M-C-x", "C-M-x"], false), "\x1b\x18\x1b\x18");
    }

    #[test]
    fn unknown_names_are_refused() {
        for name in [
            "", "Foo", "enter", "ESC", "ctrl-c", "C-", "C-1", "C-@", "C-Space", "M-", "M-M-x",
            "hello", "\u{3}", "\n", "C-cc", "F13", "F0", "Up ",
        ] {
            assert_eq!(TerminalKey::parse(name), None, "{name:?}");
        }
        assert_eq!(keys_text(["Up", "Nope", "Down"], false), Err("Nope"));
        assert_eq!(TerminalKey::parse(&"x".repeat(1000)), None);
    }
}
