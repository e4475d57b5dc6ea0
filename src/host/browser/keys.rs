//! `browser_press`: a key or chord by name, as Chromium's input pipeline receives a real
//! key press (`Input.dispatchKeyEvent` down, then up), to whatever has the focus: the page
//! runs its own handlers, so Enter submits a form, Escape closes a dialog element, Tab
//! moves the focus, Control+A selects all.
//!
//! Names: a single character (`a`, `A`, `7`, `/`), `Enter`, `Tab`, `Escape`, `Backspace`,
//! `Delete`, `Space`, `ArrowUp`/`Down`/`Left`/`Right`, `Home`, `End`, `PageUp`,
//! `PageDown`, `Insert`, `F1`–`F12`; chords join modifiers with `+`: `Control`, `Shift`,
//! `Alt`, `Meta` (`Control+A`, `Shift+Tab`, `Control+Shift+ArrowLeft`).

use serde_json::{json, Value};

/// A key as `Input.dispatchKeyEvent` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    key: String,
    code: String,
    key_code: u32,
    /// The text it types (none with Control, Alt or Meta held).
    text: Option<String>,
    /// CDP's modifier bits: Alt 1, Control 2, Meta 4, Shift 8.
    modifiers: u32,
}

/// The named keys: (name, code, Windows virtual key code, text typed).
const NAMED: &[(&str, &str, u32, Option<&str>)] = &[
    ("Enter", "Enter", 13, Some("\r")),
    ("Tab", "Tab", 9, None),
    ("Escape", "Escape", 27, None),
    ("Backspace", "Backspace", 8, None),
    ("Delete", "Delete", 46, None),
    ("Space", "Space", 32, Some(" ")),
    ("ArrowUp", "ArrowUp", 38, None),
    ("ArrowDown", "ArrowDown", 40, None),
    ("ArrowLeft", "ArrowLeft", 37, None),
    ("ArrowRight", "ArrowRight", 39, None),
    ("Home", "Home", 36, None),
    ("End", "End", 35, None),
    ("PageUp", "PageUp", 33, None),
    ("PageDown", "PageDown", 34, None),
    ("Insert", "Insert", 45, None),
];

/// The modifiers a chord may hold, with their bits.
const MODIFIERS: &[(&str, u32)] = &[("Alt", 1), ("Control", 2), ("Meta", 4), ("Shift", 8)];

/// What an unknown name is told.
pub fn known_names() -> String {
    let named: Vec<&str> = NAMED.iter().map(|(name, ..)| *name).collect();
    format!(
        "a single character, {}, F1 to F12, with Control+, Shift+, Alt+ or Meta+ before it",
        named.join(", ")
    )
}

/// Parses `name` (see the module docs).
pub fn parse(name: &str) -> Result<Key, String> {
    let unknown = || format!("Unknown key {name:?}: use {}", known_names());
    let mut parts: Vec<&str> = name.split('+').collect();
    // A lone "+" (or a chord ending in "++") names the plus key.
    if name.ends_with("++") || name == "+" {
        parts.pop();
        if let Some(last) = parts.last_mut() {
            *last = "+";
        }
    }
    let (base, held) = parts.split_last().ok_or_else(unknown)?;
    let mut modifiers = 0;
    for modifier in held {
        let bit = MODIFIERS
            .iter()
            .find(|(m, _)| m == modifier)
            .map(|(_, bit)| *bit)
            .ok_or_else(unknown)?;
        modifiers |= bit;
    }
    let commanding = modifiers & (1 | 2 | 4) != 0;
    if let Some((key, code, key_code, text)) = NAMED.iter().find(|(n, ..)| n == base) {
        let key = if *key == "Space" { " " } else { key };
        return Ok(Key {
            key: key.to_string(),
            code: code.to_string(),
            key_code: *key_code,
            text: text.filter(|_| !commanding).map(str::to_string),
            modifiers,
        });
    }
    if let Some(n) = base.strip_prefix('F').and_then(|n| n.parse::<u32>().ok()) {
        if (1..=12).contains(&n) {
            return Ok(Key {
                key: base.to_string(),
                code: base.to_string(),
                key_code: 111 + n,
                text: None,
                modifiers,
            });
        }
    }
    let mut chars = base.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return Err(unknown());
    };
    if c.is_control() {
        return Err(unknown());
    }
    let shifted = modifiers & 8 != 0;
    let typed = match (c.is_ascii_alphabetic(), shifted) {
        (true, true) => c.to_ascii_uppercase(),
        _ => c,
    };
    let (code, key_code) = match c {
        'a'..='z' | 'A'..='Z' => (
            format!("Key{}", c.to_ascii_uppercase()),
            c.to_ascii_uppercase() as u32,
        ),
        '0'..='9' => (format!("Digit{c}"), c as u32),
        _ => (String::new(), 0),
    };
    Ok(Key {
        key: typed.to_string(),
        code,
        key_code,
        text: (!commanding).then(|| typed.to_string()),
        modifiers,
    })
}

impl Key {
    /// The two `Input.dispatchKeyEvent` parameters: the press and the release.
    pub fn events(&self) -> [Value; 2] {
        let mut down = json!({
            "type": if self.text.is_some() { "keyDown" } else { "rawKeyDown" },
            "key": self.key,
            "code": self.code,
            "windowsVirtualKeyCode": self.key_code,
            "nativeVirtualKeyCode": self.key_code,
            "modifiers": self.modifiers,
        });
        if let Some(text) = &self.text {
            down["text"] = json!(text);
            down["unmodifiedText"] = json!(text);
        }
        let up = json!({
            "type": "keyUp",
            "key": self.key,
            "code": self.code,
            "windowsVirtualKeyCode": self.key_code,
            "nativeVirtualKeyCode": self.key_code,
            "modifiers": self.modifiers,
        });
        [down, up]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_chords_become_key_events() {
        let enter = parse("Enter").unwrap();
        assert_eq!((enter.key_code, enter.text.as_deref()), (13, Some("\r")));
        let select_all = parse("Control+A").unwrap();
        assert_eq!(
            (select_all.modifiers, select_all.text.as_deref()),
            (2, None)
        );
        assert_eq!(select_all.code, "KeyA");
        let back_tab = parse("Shift+Tab").unwrap();
        assert_eq!((back_tab.modifiers, back_tab.key_code), (8, 9));
        assert_eq!(parse("Shift+a").unwrap().text.as_deref(), Some("A"));
        assert_eq!(parse("F5").unwrap().key_code, 116);
        assert_eq!(parse("Space").unwrap().key, " ");
        assert_eq!(parse("+").unwrap().key, "+");
        assert_eq!(parse("Control++").unwrap().modifiers, 2);
        for bad in ["F13", "Hyper+a", "Enterr", "", "ab", "\u{7}"] {
            assert!(parse(bad).unwrap_err().contains("Unknown key"), "{bad}");
        }
        let [down, up] = enter.events();
        assert_eq!(
            (down["type"].as_str(), up["type"].as_str()),
            (Some("keyDown"), Some("keyUp"))
        );
    }
}
