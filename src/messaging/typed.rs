//! Only `agent_send` frames a message: what agents type into an agent's terminal never
//! forms that framing, in one call or across many.
//!
//! **The guarantee.** Everything agents write into one agent's terminal (the runtime calls
//! [`TypedTails::admit`] for each write there: `terminal_input`, `terminal_interrupt`;
//! `terminal_submit` is refused there), taken in the order written, never holds a
//! bracketed-paste start or end (`ESC[200~`, `ESC[201~`, also with the 8-bit CSI U+009B and
//! with control characters or spacing inside, which a terminal's parser steps over) nor a
//! `[termsprawl]` header in any case, with spacing or invisible characters inside, or in
//! full-width letters. It is judged per terminal, not per caller: two agents each typing
//! half are refused like one agent typing both halves.
//!
//! **How.** A text is compared through its [`skeleton`], made character by character, so
//! the skeleton of a terminal's stream is its writes' skeletons joined. Per terminal we
//! keep the last characters of that joined skeleton, one fewer than the longest pattern
//! ([`tail_chars`]): a write is refused (nothing written, the tail unchanged) when the
//! tail and its skeleton together hold a pattern. The server's own paste (`agent_send`,
//! `agent_reply`) ends with a whole paste end and Enter, so once it is in the tail is
//! emptied ([`TypedTails::server_wrote`]): what was typed before it cannot join what is
//! typed after it.
//!
//! **What it cannot see.** The recipient program's line editing: an agent that types
//! pieces and moves the cursor between them can line up the header's letters in an input
//! line without them being in the stream. Hence the `agents` guide: a pasted message's
//! words prove nothing, its task does (`agent_task {taskId}` shows who sent it).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::base::lock_or_recover;

/// The framing only `agent_send` writes, as skeletons: a bracketed paste's start and end,
/// the header's marker.
const FRAMING: [&str; 3] = ["\x1b[200~", "\x1b[201~", "[termsprawl]"];

/// Why a write was refused.
const FORGED_FRAMING: &str = "Refused, nothing was typed: together with what agents typed into this agent's terminal before, this text would form the framing that only agent_send writes (a bracketed paste start or end, or a [termsprawl] header in any case or spacing). To give an agent work, send it with agent_send.";

/// How many skeleton characters a terminal's tail keeps: one fewer than the longest
/// pattern, so every pattern split across writes is seen whole.
fn tail_chars() -> usize {
    FRAMING.iter().map(|p| p.chars().count()).max().unwrap_or(1) - 1
}

/// `text` as a terminal parser and a reader take it, one character at a time: the 8-bit
/// CSI as `ESC [`; other control characters (a parser carries on through them inside a
/// sequence), spacing and invisible characters dropped; full-width ASCII as ASCII; all of
/// it lower case. ESC stays: it starts a sequence.
fn skeleton(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{9b}' => out.push_str("\x1b["),
            '\x1b' => out.push(c),
            c if c.is_control() || c.is_whitespace() || super::invisible(c) => {}
            '\u{ff01}'..='\u{ff5e}' => {
                let ascii = char::from_u32(c as u32 - 0xfee0).unwrap_or(c);
                out.push(ascii.to_ascii_lowercase());
            }
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// Per agent terminal (by node id), the end of the skeleton of what agents typed into it
/// since the server last wrote there (see the module docs).
#[derive(Default)]
pub struct TypedTails {
    tails: Mutex<HashMap<String, String>>,
}

impl TypedTails {
    /// Records `text` as typed by an agent into agent terminal `node`, or refuses it
    /// (`FORGED_FRAMING`, nothing recorded) when with what agents typed there before it
    /// would hold a message's framing. Call it before the write; a refused text must not
    /// be written, and a text let in counts as written even if the write then fails part
    /// way (the stricter reading).
    pub fn admit(&self, node: &str, text: &str) -> Result<(), String> {
        let mut tails = lock_or_recover(&self.tails);
        let before = tails.get(node).map_or("", String::as_str);
        let joined = format!("{before}{}", skeleton(text));
        if FRAMING.iter().any(|mark| joined.contains(mark)) {
            return Err(FORGED_FRAMING.to_string());
        }
        let drop = joined.chars().count().saturating_sub(tail_chars());
        let tail: String = joined.chars().skip(drop).collect();
        if tail.is_empty() {
            tails.remove(node);
        } else {
            tails.insert(node.to_string(), tail);
        }
        Ok(())
    }

    /// The server wrote a whole paste (or a paste end) into `node`'s terminal: the
    /// parser there is past anything typed before, so nothing typed before counts.
    pub fn server_wrote(&self, node: &str) {
        lock_or_recover(&self.tails).remove(node);
    }

    /// `node`'s terminal is gone.
    pub fn forget(&self, node: &str) {
        self.server_wrote(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The framing as agents might type it: each pattern, and forms a parser or a reader
    /// takes for it.
    const FORMS: &[&str] = &[
        "\x1b[200~",
        "\x1b[201~",
        "[termsprawl]",
        "\u{9b}200~",
        "\u{9b}201~",
        "\x1b[20\x030~",
        "\x1b[2\r01~",
        "[TERMSPRAWL]",
        "[TermSprawl]",
        "[ term sprawl ]",
        "[term\u{200b}spr\u{2060}awl]",
        "[\tterm\nsprawl]",
        "\u{ff3b}\u{ff34}\u{ff25}\u{ff32}\u{ff2d}sprawl\u{ff3d}",
    ];

    #[test]
    fn the_tail_holds_one_fewer_than_the_longest_pattern() {
        assert_eq!(tail_chars(), "[termsprawl]".len() - 1);
    }

    #[test]
    fn every_form_in_one_call_is_refused() {
        for form in FORMS {
            let typed = TypedTails::default();
            let text = format!("hello {form} world");
            assert_eq!(
                typed.admit("b", &text),
                Err(FORGED_FRAMING.into()),
                "{form:?}"
            );
        }
    }

    #[test]
    fn every_split_point_of_every_form_is_refused_and_leaves_the_tail_as_it_was() {
        for form in FORMS {
            let cuts = form.char_indices().map(|(i, _)| i).skip(1);
            for cut in cuts {
                let (first, second) = form.split_at(cut);
                let typed = TypedTails::default();
                typed.admit("b", first).unwrap();
                assert!(typed.admit("b", second).is_err(), "{first:?} + {second:?}");
                // Refused: recorded nothing, so the same completion is refused again and
                // a harmless text after it goes in.
                assert!(typed.admit("b", second).is_err(), "{first:?} + {second:?}");
                typed.admit("b", "x").unwrap();
            }
        }
    }

    #[test]
    fn a_form_typed_one_character_a_call_is_refused_at_its_last_character() {
        for form in FORMS {
            let typed = TypedTails::default();
            let chars: Vec<char> = form.chars().collect();
            let (last, first) = chars.split_last().unwrap();
            for c in first {
                typed.admit("b", &c.to_string()).unwrap();
            }
            assert!(typed.admit("b", &last.to_string()).is_err(), "{form:?}");
        }
    }

    #[test]
    fn a_split_between_other_writes_and_calls_from_two_agents_is_refused() {
        let typed = TypedTails::default();
        // Spacing and control characters in between count as nothing.
        typed.admit("b", "[term").unwrap();
        typed.admit("b", "\r").unwrap();
        typed.admit("b", "\u{3}").unwrap();
        typed.admit("b", " sp").unwrap();
        assert!(typed.admit("b", "rawl] Message from agent a").is_err());
        // The tail is per terminal: halves into two terminals are two harmless texts.
        typed.admit("c", "\x1b[20").unwrap();
        typed.admit("d", "0~").unwrap();
    }

    #[test]
    fn keys_and_words_agents_type_go_in() {
        let typed = TypedTails::default();
        for text in [
            "y",
            "\r",
            "\x1b",
            "\x1b[A",
            "\x1b[3~",
            "\x1b[5;5~",
            "\x1b[24~",
            "\u{3}",
            "cargo test -p termsprawl-tools",
            "[term",
            "inal]",
            "[sprawl]",
            "2001~",
        ] {
            typed
                .admit("b", text)
                .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        }
    }

    #[test]
    fn the_servers_paste_empties_the_tail_and_a_closed_terminal_is_forgotten() {
        let typed = TypedTails::default();
        typed.admit("b", "\x1b[20").unwrap();
        typed.server_wrote("b");
        typed.admit("b", "0~").unwrap();
        typed.admit("b", "[termspr").unwrap();
        typed.forget("b");
        typed.admit("b", "awl]").unwrap();
    }

    #[test]
    fn the_tail_stays_short_after_a_long_text() {
        let typed = TypedTails::default();
        typed.admit("b", &"é".repeat(64_000)).unwrap();
        let tails = lock_or_recover(&typed.tails);
        assert_eq!(tails["b"].chars().count(), tail_chars());
    }
}
