//! Plain text from a program's output bytes, for agents: escape sequences and control
//! characters removed, each line as a terminal would last show it (a `\r` progress line
//! becomes its final state, `ESC [ K` erases), and only the head and tail of long output
//! kept ([`HeadTail`]).

use crate::host::terminals::screen::decode_utf8;
use crate::runtime::CommandOutput;

/// How many bytes of text a command's output keeps from its start, and from its end.
pub const HEAD_BYTES: usize = 64 * 1024;
/// See [`HEAD_BYTES`].
pub const TAIL_BYTES: usize = 64 * 1024;
/// A line longer than this many characters is kept as several (a program that never
/// prints a newline cannot grow one line without bound).
const LINE_CHARS: usize = 16 * 1024;
/// A control sequence's parameters longer than this are not looked at.
const CSI_BYTES: usize = 32;

/// Text kept as its first `head_cap` bytes and its last `tail_cap` bytes (cut at
/// character boundaries), with the characters in between counted.
#[derive(Clone, Debug)]
pub struct HeadTail {
    head: String,
    tail: String,
    omitted: u64,
    head_cap: usize,
    tail_cap: usize,
}

impl HeadTail {
    /// Empty, keeping at most `head_cap` + `tail_cap` bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> HeadTail {
        HeadTail {
            head: String::new(),
            tail: String::new(),
            omitted: 0,
            head_cap,
            tail_cap,
        }
    }

    /// Appends `text`.
    pub fn push_str(&mut self, mut text: &str) {
        if self.tail.is_empty() && self.omitted == 0 {
            let room = self.head_cap.saturating_sub(self.head.len());
            let fits = floor_boundary(text, room.min(text.len()));
            self.head.push_str(&text[..fits]);
            text = &text[fits..];
        }
        self.tail.push_str(text);
        // Trimmed in batches, so appending stays linear.
        if self.tail.len() > 2 * self.tail_cap.max(1) {
            self.trim_tail();
        }
    }

    fn trim_tail(&mut self) {
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        let cut = ceil_boundary(&self.tail, excess);
        self.omitted += self.tail[..cut].chars().count() as u64;
        self.tail.drain(..cut);
    }

    /// The text kept, as the contract's [`CommandOutput`].
    pub fn output(&self) -> CommandOutput {
        let mut kept = self.clone();
        kept.trim_tail();
        CommandOutput {
            head: kept.head,
            tail: kept.tail,
            omitted: kept.omitted,
        }
    }
}

/// The largest character boundary of `text` at or below `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `text` at or above `at`.
fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    EscapeIntermediate,
    Csi,
    /// Inside OSC, DCS, SOS, PM or APC: swallowed until BEL or ST.
    Text,
    TextEscape,
}

/// Turns output bytes, fed in chunks split anywhere, into plain text lines kept in a
/// [`HeadTail`].
#[derive(Clone, Debug)]
pub struct TextCleaner {
    state: State,
    csi: String,
    line: Vec<char>,
    column: usize,
    utf8_carry: Vec<u8>,
    text: HeadTail,
}

impl Default for TextCleaner {
    fn default() -> Self {
        TextCleaner::new(HEAD_BYTES, TAIL_BYTES)
    }
}

impl TextCleaner {
    /// A cleaner keeping `head_cap` and `tail_cap` bytes of text.
    pub fn new(head_cap: usize, tail_cap: usize) -> TextCleaner {
        TextCleaner {
            state: State::Ground,
            csi: String::new(),
            line: Vec::new(),
            column: 0,
            utf8_carry: Vec::new(),
            text: HeadTail::new(head_cap, tail_cap),
        }
    }

    /// Applies a chunk of output.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut carry = std::mem::take(&mut self.utf8_carry);
        decode_utf8(&mut carry, bytes, |c| self.step(c));
        self.utf8_carry = carry;
    }

    /// The finished lines so far, as kept from the start (the head).
    pub fn text_so_far(&self) -> &str {
        &self.text.head
    }

    /// Whether the last byte fed left nothing half read: no escape sequence, no part of
    /// a character.
    pub fn at_rest(&self) -> bool {
        self.state == State::Ground && self.utf8_carry.is_empty()
    }

    /// The text so far, the unfinished last line included.
    pub fn output(&self) -> CommandOutput {
        if self.line.is_empty() {
            return self.text.output();
        }
        let mut text = self.text.clone();
        let line: String = self.line.iter().collect();
        text.push_str(line.trim_end_matches(' '));
        text.output()
    }

    fn step(&mut self, c: char) {
        match self.state {
            State::Ground => self.ground(c),
            State::Escape => {
                self.state = match c {
                    '[' => {
                        self.csi.clear();
                        State::Csi
                    }
                    ']' | 'P' | 'X' | '^' | '_' => State::Text,
                    ' '..='/' => State::EscapeIntermediate,
                    _ => State::Ground,
                }
            }
            State::EscapeIntermediate => {
                if !(' '..='/').contains(&c) {
                    self.state = State::Ground;
                }
            }
            State::Csi => match c {
                '@'..='~' => {
                    self.state = State::Ground;
                    if c == 'K' {
                        self.erase_in_line();
                    }
                }
                '\u{1b}' => self.state = State::Escape,
                c if c.is_control() => {}
                c => {
                    if self.csi.len() < CSI_BYTES {
                        self.csi.push(c);
                    }
                }
            },
            State::Text => match c {
                '\u{07}' | '\u{9c}' => self.state = State::Ground,
                '\u{1b}' => self.state = State::TextEscape,
                _ => {}
            },
            State::TextEscape => {
                self.state = State::Escape;
                if c == '\\' {
                    self.state = State::Ground;
                } else {
                    self.step(c);
                }
            }
        }
    }

    fn ground(&mut self, c: char) {
        match c {
            '\u{1b}' => self.state = State::Escape,
            '\u{9b}' => {
                self.csi.clear();
                self.state = State::Csi;
            }
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => self.state = State::Text,
            '\n' => self.end_line(true),
            '\r' => self.column = 0,
            '\u{08}' => self.column = self.column.saturating_sub(1),
            '\t' => self.put('\t'),
            c if c.is_control() => {}
            c => self.put(c),
        }
    }

    fn put(&mut self, c: char) {
        if self.column < self.line.len() {
            self.line[self.column] = c;
        } else {
            self.line.push(c);
        }
        self.column += 1;
        if self.line.len() >= LINE_CHARS {
            self.end_line(false);
        }
    }

    /// `CSI K` (to the end), `CSI 1 K` (to the cursor), `CSI 2 K` (all of it).
    fn erase_in_line(&mut self) {
        match self.csi.as_str() {
            "" | "0" => self.line.truncate(self.column),
            "1" => {
                let end = self.column.min(self.line.len());
                self.line[..end].fill(' ');
            }
            "2" => self.line.iter_mut().for_each(|c| *c = ' '),
            _ => {}
        }
    }

    fn end_line(&mut self, newline: bool) {
        let mut text: String = self.line.drain(..).collect();
        let kept = text.trim_end_matches(' ').len();
        text.truncate(kept);
        if newline {
            text.push('\n');
        }
        self.text.push_str(&text);
        self.column = 0;
    }
}

/// `bytes` as plain text (see [`TextCleaner`]), its head and tail kept.
pub fn plain_text(bytes: &[u8], head_cap: usize, tail_cap: usize) -> CommandOutput {
    let mut cleaner = TextCleaner::new(head_cap, tail_cap);
    cleaner.feed(bytes);
    cleaner.output()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(bytes: &[u8]) -> String {
        let output = plain_text(bytes, 1 << 20, 1 << 20);
        assert_eq!(output.omitted, 0);
        output.head + &output.tail
    }

    #[test]
    fn progress_lines_keep_their_last_state() {
        assert_eq!(clean(b"10%\r50%\r100%\ndone\n"), "100%\ndone\n");
        assert_eq!(clean(b"[###   ]\r[######]\r\n"), "[######]\n");
        assert_eq!(clean(b"long line\r\x1b[Kshort\n"), "short\n");
        assert_eq!(clean(b"abcdef\rxy\n"), "xycdef\n");
        assert_eq!(clean(b"line\r\n"), "line\n");
        assert_eq!(clean(b"abc\x08\x08X\n"), "aXc\n");
        assert_eq!(clean(b"gone\x1b[2K\rnew\n"), "new\n");
    }

    #[test]
    fn colours_titles_and_controls_are_removed() {
        assert_eq!(
            clean(b"\x1b[1;31merror\x1b[0m: \x1b]0;title\x07bad\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x07\x00\n"),
            "error: badlink\n"
        );
        assert_eq!(clean("\u{9b}31mred\u{9d}t\u{9c}!\n".as_bytes()), "red!\n");
        assert_eq!(clean(b"\x1b(Bplain\x1b=\n"), "plain\n");
        assert_eq!(clean("é".as_bytes()), "é");
        assert_eq!(clean(b"bad \xff byte"), "bad \u{fffd} byte");
    }

    #[test]
    fn chunks_split_anywhere_give_the_same_text() {
        let bytes = "\x1b[32mgrün\x1b[0m 50%\r100% ✓\n\x1b]0;t\x1b\\end".as_bytes();
        let whole = clean(bytes);
        for at in 0..bytes.len() {
            let mut cleaner = TextCleaner::new(1 << 20, 1 << 20);
            cleaner.feed(&bytes[..at]);
            cleaner.feed(&bytes[at..]);
            let output = cleaner.output();
            assert_eq!(output.head + &output.tail, whole, "split at {at}");
        }
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_middle() {
        let mut text = HeadTail::new(10, 10);
        for i in 0..1000 {
            text.push_str(&format!("{:03}\n", i % 1000));
        }
        let output = text.output();
        assert_eq!(output.head, "000\n001\n00");
        assert_eq!(output.tail, "7\n998\n999\n");
        assert_eq!(output.omitted, 4000 - 20);
        let mut wide = HeadTail::new(3, 5);
        wide.push_str(&"é".repeat(100));
        let output = wide.output();
        assert_eq!(output.head, "é");
        assert_eq!(output.tail, "éé");
        assert_eq!(output.omitted, 97);
    }

    #[test]
    fn an_endless_line_is_bounded() {
        let mut cleaner = TextCleaner::new(100, 100);
        for _ in 0..100 {
            cleaner.feed(&[b'x'; 10_000]);
        }
        let output = cleaner.output();
        assert_eq!(output.head.len(), 100);
        assert!(output.tail.len() <= 100);
        assert_eq!(output.omitted, 1_000_000 - 200);
    }
}
