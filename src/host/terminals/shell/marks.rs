//! The marks our injected shell code prints, and the streaming parser that takes them
//! out of a terminal's output.
//!
//! A mark is `ESC ] 5379 ; NONCE ; KIND [; ARG] TERMINATOR`, the terminator BEL or ST
//! (`ESC \`). OSC 5379 is ours: no terminal or prompt framework we know of uses it
//! (xterm's numbers stop below 1000; 133 and 633 are FinalTerm's and VS Code's, which
//! starship or powerlevel10k already print, 7 and 8 are folders and links, 777, 1337,
//! 3008, 5113, 5522 are rxvt's, iTerm2's, systemd's and kitty's), and a terminal that
//! does not know it ignores it. Kinds:
//!
//! | kind | printed | argument |
//! | --- | --- | --- |
//! | `A` | before each prompt | — |
//! | `B` | when the shell runs a command line | the line, `%`-escaped (`%25`, `%0A`, …) |
//! | `C` | where the command's output starts | — |
//! | `D` | when the command ended | its exit status |
//! | `P` | the shell's folder after each command | the path, `%`-escaped |
//! | `p` | the same from POSIX `sh`, which cannot escape it | the path as it is |
//!
//! Only marks carrying the terminal's nonce count, and they are removed from the output;
//! any other (no nonce, a wrong one, one longer than [`MARK_CAP`]) is passed through
//! untouched (an ESC in it ends it, and one too long ends at its cap, so program output
//! that starts a mark and never ends it cannot swallow the shell's next mark), as the program wrote it, and never counts: what reaches the screen is then
//! exactly what the program printed, and the screen model drops unknown OSC strings
//! anyway. The nonce itself appearing in the remaining output means a program learnt it
//! (`set -x`, `declare -p`, a dump of the shell's memory): [`Parsed::nonce_seen`] says so.

/// The OSC number of our marks.
pub const OSC_NUMBER: u32 = 5379;
/// A mark's payload (nonce, kind, argument) longer than this many bytes is not ours.
pub const MARK_CAP: usize = 16 * 1024;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const PREFIX: &[u8] = b"\x1b]5379;";

/// One verified mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A prompt is about to be shown.
    PromptStart,
    /// The shell runs this command line.
    CommandStart(String),
    /// The command's output starts here.
    OutputStart,
    /// The command ended with this status.
    CommandEnd(i32),
    /// The shell's current folder.
    Cwd(String),
}

/// A chunk of output with our marks taken out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The output without our marks.
    pub plain: Vec<u8>,
    /// Each mark with the length `plain` had where it stood.
    pub marks: Vec<(usize, Mark)>,
    /// The nonce appeared in plain output (in this chunk or across its start).
    pub nonce_seen: bool,
}

/// Streaming mark parser for one terminal: chunks may split a mark at any byte.
#[derive(Debug)]
pub struct MarkParser {
    nonce: Vec<u8>,
    /// A possible mark held back until it is complete (starts with ESC).
    pending: Vec<u8>,
    /// The last plain bytes, so a nonce split across chunks is still seen.
    recent: Vec<u8>,
}

impl MarkParser {
    /// A parser accepting marks that carry `nonce` (non-empty ASCII).
    pub fn new(nonce: &str) -> MarkParser {
        MarkParser {
            nonce: nonce.as_bytes().to_vec(),
            pending: Vec::new(),
            recent: Vec::new(),
        }
    }

    /// Takes our marks out of `chunk`.
    pub fn feed(&mut self, chunk: &[u8]) -> Parsed {
        let mut parsed = Parsed::default();
        for &byte in chunk {
            self.step(byte, &mut parsed);
        }
        parsed.nonce_seen = self.scan_for_nonce(&parsed.plain);
        parsed
    }

    fn step(&mut self, byte: u8, out: &mut Parsed) {
        if self.pending.is_empty() {
            match byte {
                ESC => self.pending.push(byte),
                _ => out.plain.push(byte),
            }
            return;
        }
        if self.pending.len() < PREFIX.len() {
            if byte == PREFIX[self.pending.len()] {
                self.pending.push(byte);
            } else {
                self.pass_through(out);
                self.step(byte, out);
            }
            return;
        }
        if self.pending.len() > PREFIX.len() && self.pending.last() == Some(&ESC) {
            if byte == b'\\' {
                self.pending.pop();
                self.finish(b"\x1b\\", out);
            } else {
                // ESC ends the string without ST: not a mark; the ESC starts anew.
                self.pending.pop();
                self.pass_through(out);
                self.pending.push(ESC);
                self.step(byte, out);
            }
            return;
        }
        if byte == BEL {
            self.finish(&[BEL], out);
            return;
        }
        if self.pending.len() == PREFIX.len() + MARK_CAP {
            // Too long to be ours: program output. The byte is looked at anew, so an ESC
            // starting the shell's next mark is not swallowed with it.
            self.pass_through(out);
            self.step(byte, out);
            return;
        }
        self.pending.push(byte);
    }

    fn pass_through(&mut self, out: &mut Parsed) {
        out.plain.append(&mut self.pending);
    }

    /// A complete OSC 5379 string is in `pending` (without its terminator).
    fn finish(&mut self, terminator: &[u8], out: &mut Parsed) {
        match self.verified(&self.pending[PREFIX.len()..]) {
            Some(mark) => {
                out.marks.push((out.plain.len(), mark));
                self.pending.clear();
            }
            None => {
                self.pass_through(out);
                out.plain.extend_from_slice(terminator);
            }
        }
    }

    fn verified(&self, payload: &[u8]) -> Option<Mark> {
        let mut fields = payload.splitn(3, |&b| b == b';');
        let nonce = fields.next()?;
        if !same_bytes(nonce, &self.nonce) {
            return None;
        }
        let kind = fields.next()?;
        let argument = fields.next();
        match (kind, argument) {
            (b"A", None) => Some(Mark::PromptStart),
            (b"B", Some(line)) => Some(Mark::CommandStart(percent_decoded(line))),
            (b"C", None) => Some(Mark::OutputStart),
            (b"D", Some(status)) => std::str::from_utf8(status)
                .ok()?
                .trim()
                .parse()
                .ok()
                .map(Mark::CommandEnd),
            (b"P", Some(path)) => Some(Mark::Cwd(percent_decoded(path))),
            (b"p", Some(path)) => Some(Mark::Cwd(String::from_utf8_lossy(path).into_owned())),
            _ => None,
        }
    }

    fn scan_for_nonce(&mut self, plain: &[u8]) -> bool {
        let keep = self.nonce.len().saturating_sub(1);
        self.recent.extend_from_slice(plain);
        let seen = self
            .recent
            .windows(self.nonce.len().max(1))
            .any(|window| window == self.nonce.as_slice());
        let excess = self.recent.len().saturating_sub(keep);
        self.recent.drain(..excess);
        seen
    }
}

/// Equal bytes, compared without stopping at the first difference.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `%XX` sequences decoded; a `%` not followed by two hex digits stays as it is.
fn percent_decoded(text: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some((&first, after)) = rest.split_first() {
        let hex = after.get(..2).and_then(|digits| {
            let digits = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(digits, 16).ok()
        });
        match (first, hex) {
            (b'%', Some(byte)) => {
                bytes.push(byte);
                rest = &after[2..];
            }
            _ => {
                bytes.push(first);
                rest = after;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    fn mark(payload: &str, terminator: &str) -> String {
        format!("\x1b]5379;{NONCE};{payload}{terminator}")
    }

    fn sample() -> String {
        format!(
            "before{}{}{}out\x1b[1mput\n{}{}{}after",
            mark("B;echo%20a%3Bb%0Ac", "\x07"),
            mark("C", "\x1b\\"),
            "\x1b]0;title\x07",
            mark("D;7", "\x07"),
            mark("P;/tmp/x%25y", "\x1b\\"),
            mark("A", "\x07"),
        )
    }

    fn expected_marks() -> Vec<(usize, Mark)> {
        vec![
            (6, Mark::CommandStart("echo a;b\nc".into())),
            (6, Mark::OutputStart),
            (27, Mark::CommandEnd(7)),
            (27, Mark::Cwd("/tmp/x%y".into())),
            (27, Mark::PromptStart),
        ]
    }

    #[test]
    fn marks_are_taken_out_with_either_terminator() {
        let parsed = MarkParser::new(NONCE).feed(sample().as_bytes());
        assert_eq!(
            String::from_utf8(parsed.plain).unwrap(),
            "before\x1b]0;title\x07out\x1b[1mput\nafter"
        );
        assert_eq!(parsed.marks, expected_marks());
        assert!(!parsed.nonce_seen);
    }

    #[test]
    fn a_split_at_every_byte_gives_the_same_result() {
        let bytes = sample().into_bytes();
        for at in 0..=bytes.len() {
            let mut parser = MarkParser::new(NONCE);
            let first = parser.feed(&bytes[..at]);
            let second = parser.feed(&bytes[at..]);
            let mut plain = first.plain.clone();
            plain.extend_from_slice(&second.plain);
            let mut marks = first.marks.clone();
            marks.extend(
                second
                    .marks
                    .into_iter()
                    .map(|(offset, mark)| (offset + first.plain.len(), mark)),
            );
            assert_eq!(
                plain, b"before\x1b]0;title\x07out\x1b[1mput\nafter",
                "split at {at}"
            );
            assert_eq!(marks, expected_marks(), "split at {at}");
            assert!(!first.nonce_seen && !second.nonce_seen);
        }
        // One byte at a time.
        let mut parser = MarkParser::new(NONCE);
        let marks: Vec<Mark> = bytes
            .iter()
            .flat_map(|b| parser.feed(&[*b]).marks)
            .map(|(_, mark)| mark)
            .collect();
        assert_eq!(marks.len(), 5);
    }

    #[test]
    fn marks_without_the_nonce_pass_through_and_never_count() {
        let forged = [
            "\x1b]5379;D;0\x07".to_string(),
            "\x1b]5379;;D;0\x07".to_string(),
            "\x1b]5379;ffffffffffffffffffffffffffffffff;D;0\x1b\\".to_string(),
            format!("\x1b]5379;{};D;0\x07", &NONCE[..31]),
            format!("\x1b]5379;{NONCE}x;D;0\x07"),
            format!("\x1b]5379;{NONCE};Z\x07"),
            format!("\x1b]5379;{NONCE};D;zero\x07"),
            format!("\x1b]5379;{NONCE};A;extra\x07"),
            format!("\x1b]5379;{NONCE};D;0\x1bX"),
            format!("\x1b]53790;{NONCE};D;0\x07"),
            format!("\x1b]133;{NONCE};D;0\x07"),
        ];
        for text in &forged {
            let parsed = MarkParser::new(NONCE).feed(text.as_bytes());
            assert!(parsed.marks.is_empty(), "{text:?} counted");
            assert_eq!(parsed.plain, text.as_bytes(), "{text:?} changed");
        }
    }

    #[test]
    fn an_oversized_mark_is_not_ours() {
        let text = mark(&format!("B;{}", "x".repeat(MARK_CAP)), "\x07");
        let parsed = MarkParser::new(NONCE).feed(text.as_bytes());
        assert!(parsed.marks.is_empty());
        assert_eq!(parsed.plain, text.as_bytes());
        // It carried the nonce, which now shows in plain output.
        assert!(parsed.nonce_seen);
        let fits = mark(
            &format!("B;{}", "x".repeat(MARK_CAP - NONCE.len() - 3)),
            "\x07",
        );
        assert_eq!(MarkParser::new(NONCE).feed(fits.as_bytes()).marks.len(), 1);
    }

    #[test]
    fn unfinished_mark_starts_never_swallow_the_next_mark() {
        for filler in [MARK_CAP - 1, MARK_CAP, MARK_CAP + 1, 3 * MARK_CAP] {
            let unfinished = format!("\x1b]5379;{}", "x".repeat(filler));
            let text = format!("{unfinished}{}", mark("D;3", "\x07"));
            let parsed = MarkParser::new(NONCE).feed(text.as_bytes());
            assert_eq!(parsed.marks, vec![(unfinished.len(), Mark::CommandEnd(3))]);
            assert_eq!(parsed.plain, unfinished.as_bytes(), "{filler}");
            assert!(!parsed.nonce_seen, "{filler}");
        }
    }

    #[test]
    fn the_nonce_in_plain_output_is_seen_even_split() {
        let text = format!("declare -- __termsprawl_nonce=\"{NONCE}\"\n");
        assert!(MarkParser::new(NONCE).feed(text.as_bytes()).nonce_seen);
        for at in 1..text.len() {
            let mut parser = MarkParser::new(NONCE);
            let seen = parser.feed(&text.as_bytes()[..at]).nonce_seen
                || parser.feed(&text.as_bytes()[at..]).nonce_seen;
            assert!(seen, "split at {at}");
        }
        assert!(
            !MarkParser::new(NONCE)
                .feed(&NONCE.as_bytes()[1..])
                .nonce_seen
        );
    }

    #[test]
    fn percent_escapes_decode_and_bad_ones_stay() {
        assert_eq!(percent_decoded(b"a%20b%zz%2"), "a b%zz%2");
        assert_eq!(percent_decoded(b"%C3%A9"), "é");
        assert_eq!(percent_decoded(b"%FF"), "\u{fffd}");
    }
}
