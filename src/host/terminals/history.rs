//! A terminal's output history as `terminal_read` reads it with `since` and `search`: the
//! last bytes its program wrote (escape sequences included, our shell marks taken out),
//! each at a position counted from the program's first byte, turned into plain text
//! here ([`crate::host::terminals::shell::text`]) only when read.
//!
//! Both backends keep one: a PTY terminal in memory (its raw scrollback,
//! [`crate::host::terminals::pty::SCROLLBACK_BYTES`]), a tmux pane in files its pane
//! filter writes ([`crate::host::terminals::pane_filter::output_log`]). A read from a
//! cursor the history no longer holds says how many bytes were lost and starts at the
//! next whole line. Lines are counted by the newlines the program wrote: line numbers
//! go on across what was dropped.
//!
//! Texts are plain: escape sequences and control characters are removed (as every
//! terminal read removes them), never shown.
//!
//! A full-screen program (vim, less, top) redraws with cursor movements, not lines: what
//! it wrote since a cursor reads as the fragments it drew, in the order drawn. The
//! screen itself is what `terminal_read` without `since` answers.

use std::collections::VecDeque;

use crate::host::terminals::shell::text::TextCleaner;
use crate::runtime::{LineMatch, LinesFound, OutputAfter};

/// The longest line text a search answers (the rest cut with `…`).
pub const MATCH_LINE_CHARS: usize = 500;

/// The most bytes a read of `max_chars` characters from a cursor looks at: plenty for
/// text with colours, so a read far behind copies little; output denser in escape
/// sequences is read in more steps (the cursor says where each stopped).
pub fn bytes_to_read(max_chars: usize) -> usize {
    max_chars.saturating_mul(8).saturating_add(64 << 10)
}

/// Output bytes kept of a terminal, from a position on (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The position of the first byte in `bytes`: the first byte kept, or a later one a
    /// read asked for.
    pub start: u64,
    /// Newlines written before the first byte kept (read only when `start` is that byte).
    pub lines_before: u64,
    /// Whether the first byte kept starts a line (read only when `start` is that byte).
    pub starts_line: bool,
    /// The bytes from `start` on.
    pub bytes: Vec<u8>,
    /// `bytes` stop before the output's end (at the most a read looks at).
    pub cut: bool,
}

impl History {
    /// Where `bytes` end: the position after their last byte.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// The output after `since` as plain text, at most `max_chars` characters: whole
    /// lines while they fit, the unfinished last line too (not while it ends inside an
    /// escape sequence or a character); the cursor after them.
    pub fn after(&self, since: u64, max_chars: usize) -> OutputAfter {
        let end = self.end();
        if since >= end {
            return OutputAfter {
                cursor: end,
                ..OutputAfter::default()
            };
        }
        let mut from = since.max(self.start);
        let mut lost = self.start.saturating_sub(since);
        let mut bytes = &self.bytes[(from - self.start) as usize..];
        if lost > 0 && !self.starts_line {
            // The history starts inside a line: its rest is lost too.
            let skip = first_whole_line(bytes);
            (bytes, from, lost) = (&bytes[skip..], from + skip as u64, lost + skip as u64);
        }
        let (text, taken, omitted) = plain_lines(bytes, max_chars.max(1), self.cut);
        OutputAfter {
            text,
            cursor: from + taken as u64,
            lost,
            omitted,
            fullscreen: false,
        }
    }

    /// The lines containing `needle` (compared in lower case), the newest `max_matches`,
    /// each with the line before and after it.
    pub fn search(&self, needle: &str, max_matches: usize) -> LinesFound {
        let needle = needle.to_lowercase();
        let mut number = self.lines_before + 1;
        let mut bytes = &self.bytes[..];
        if !self.starts_line {
            bytes = &bytes[first_whole_line(bytes)..];
            number += 1;
        }
        let mut found = LinesFound {
            cursor: self.end(),
            ..LinesFound::default()
        };
        let mut kept: VecDeque<LineMatch> = VecDeque::new();
        let mut previous: Option<&[u8]> = None;
        let mut lowered = String::new();
        // A match's line after it is filled in when that line is read.
        let mut waiting_for_after = false;
        for raw in bytes.split_inclusive(|&b| b == b'\n') {
            if waiting_for_after {
                if let Some(last) = kept.back_mut() {
                    last.after.push(cut(&plain_line(raw), MATCH_LINE_CHARS));
                }
            }
            waiting_for_after = false;
            if contains(raw, &needle, &mut lowered) {
                found.count += 1;
                kept.push_back(LineMatch {
                    line: number,
                    text: cut_around(&plain_line(raw), &needle),
                    before: previous
                        .map(|line| cut(&plain_line(line), MATCH_LINE_CHARS))
                        .into_iter()
                        .collect(),
                    after: Vec::new(),
                });
                if kept.len() > max_matches {
                    kept.pop_front();
                }
                waiting_for_after = true;
            }
            previous = Some(raw);
            number += 1;
        }
        found.matches = kept.into();
        found
    }
}

/// Where the first whole line of `bytes` starts (after the first newline; none: the end).
fn first_whole_line(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| i + 1)
}

/// Whether line `raw`'s plain text contains `needle` (lower case), ignoring case. A line of
/// printable ASCII only (most log lines) is its own text but for blanks at its end: it is
/// compared as it is, in `lowered`, without the cleaner.
fn contains(raw: &[u8], needle: &str, lowered: &mut String) -> bool {
    let line = raw.strip_suffix(b"\n").unwrap_or(raw);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line
        .iter()
        .all(|&b| (b' '..=b'~').contains(&b) || b == b'\t')
    {
        let shown = line.len() - line.iter().rev().take_while(|&&b| b == b' ').count();
        lowered.clear();
        lowered.extend(
            line[..shown]
                .iter()
                .map(|&b| b.to_ascii_lowercase() as char),
        );
        return lowered.contains(needle);
    }
    plain_line(raw).to_lowercase().contains(needle)
}

/// `text` cut to `max` characters, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A matching line's text cut to [`MATCH_LINE_CHARS`] characters around the first match
/// of `needle` (lower case), with `…` where cut.
fn cut_around(text: &str, needle: &str) -> String {
    let chars = text.chars().count();
    if chars <= MATCH_LINE_CHARS {
        return text.to_string();
    }
    // Lower case changes few characters' lengths: the match's place is close enough.
    let lower = text.to_lowercase();
    let at = lower
        .find(needle)
        .map_or(0, |at| lower[..at].chars().count());
    let first = at
        .saturating_sub(MATCH_LINE_CHARS / 3)
        .min(chars - MATCH_LINE_CHARS);
    let shown: String = text.chars().skip(first).take(MATCH_LINE_CHARS).collect();
    let before = if first > 0 { "…" } else { "" };
    let after = if first + MATCH_LINE_CHARS < chars {
        "…"
    } else {
        ""
    };
    format!("{before}{shown}{after}")
}

/// One line of output (its bytes, newline included) as plain text without the newline.
fn plain_line(raw: &[u8]) -> String {
    let mut cleaner = TextCleaner::new(raw.len() * 4 + 16, 0);
    cleaner.feed(raw);
    let output = cleaner.output();
    output.head.trim_end_matches('\n').replace('\n', " ")
}

/// `bytes` as plain text, line by line while the text stays within `max_chars`
/// characters: the text and how many bytes it took, and the characters left out of a
/// first line longer than `max_chars`. Such a line is cut (its text then ends with a
/// newline if it had one) and taken whole, or up to where `bytes` stop when they are
/// `cut` there. An unfinished last line is taken when the cleaner is at rest after it
/// (not inside an escape sequence or a character), and not when `bytes` were cut inside
/// it after other lines.
fn plain_lines(bytes: &[u8], max_chars: usize, cut: bool) -> (String, usize, u64) {
    // Room for all the text `bytes` can make (at most 4 bytes of text a byte): the head
    // keeps it all, so each line's text is the head's new end.
    let mut cleaner = TextCleaner::new(bytes.len().saturating_mul(4).saturating_add(16), 0);
    let (mut taken, mut chars, mut kept_len) = (0usize, 0usize, 0usize);
    for raw in bytes.split_inclusive(|&b| b == b'\n') {
        cleaner.feed(raw);
        let finished = raw.ends_with(b"\n");
        let unfinished;
        let text: &str = match finished {
            true => cleaner.text_so_far(),
            false => {
                let output = cleaner.output();
                unfinished = output.head + &output.tail;
                &unfinished
            }
        };
        let new = &text[kept_len.min(text.len())..];
        let line = new.strip_suffix('\n').unwrap_or(new);
        let new_chars = line.chars().count() + usize::from(finished);
        if chars + new_chars > max_chars {
            if taken > 0 {
                break;
            }
            let keep = max_chars - usize::from(finished);
            let end = line
                .char_indices()
                .nth(keep)
                .map_or(line.len(), |(at, _)| at);
            let mut text = line[..end].to_string();
            if finished {
                text.push('\n');
            }
            let omitted = (line.chars().count() - keep) as u64;
            return (text, raw.len(), omitted);
        }
        if !finished && (!cleaner.at_rest() || (cut && taken > 0)) {
            break;
        }
        taken += raw.len();
        chars += new_chars;
        kept_len = text.len();
        if !finished {
            return (text.to_string(), taken, 0);
        }
    }
    let mut text = cleaner.text_so_far().to_string();
    text.truncate(kept_len);
    (text, taken, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(start: u64, lines_before: u64, starts_line: bool, bytes: &[u8]) -> History {
        History {
            start,
            lines_before,
            starts_line,
            bytes: bytes.to_vec(),
            cut: false,
        }
    }

    #[test]
    fn reads_from_a_cursor_never_repeat_and_go_on_where_they_stopped() {
        let mut output = Vec::new();
        for n in 0..1000 {
            output.extend_from_slice(format!("line {n:04}\r\n").as_bytes());
        }
        let kept = history(0, 0, true, &output);
        let (mut since, mut seen) = (0, String::new());
        loop {
            let read = kept.after(since, 1000);
            assert!(read.text.chars().count() <= 1000);
            assert_eq!((read.lost, read.omitted), (0, 0));
            if read.text.is_empty() {
                assert_eq!(read.cursor, since);
                break;
            }
            assert!(read.text.ends_with('\n'), "whole lines: {:?}", read.text);
            seen.push_str(&read.text);
            since = read.cursor;
        }
        let expected: String = (0..1000).map(|n| format!("line {n:04}\n")).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn an_unfinished_line_is_read_once_and_its_rest_later() {
        let mut kept = history(0, 0, true, b"$ ech");
        let first = kept.after(0, 100);
        assert_eq!((first.text.as_str(), first.cursor), ("$ ech", 5));
        kept.bytes
            .extend_from_slice(b"o hi\r\nhi\r\n\x1b[1;32m$\x1b[0m ");
        let second = kept.after(first.cursor, 100);
        // Blanks at a line's end are not shown (as on a screen).
        assert_eq!(second.text, "o hi\nhi\n$");
        assert_eq!(second.cursor, kept.end());
    }

    #[test]
    fn progress_lines_read_as_their_state_and_controls_never_pass() {
        let kept = history(
            0,
            0,
            true,
            b"10%\r50%\r100%\r\n\x1b]0;title\x07\x1b[31merr\x1b[0m\xc2\x9b0m\r\n",
        );
        let read = kept.after(0, 100);
        assert_eq!(read.text, "100%\nerr\n");
    }

    #[test]
    fn what_was_dropped_is_counted_and_the_read_starts_at_a_whole_line() {
        // Kept from position 1000, inside a line.
        let kept = history(1000, 99, false, b"tail of a line\nline 101\nline 102\n");
        let read = kept.after(900, 10_000);
        assert_eq!(read.text, "line 101\nline 102\n");
        assert_eq!(read.lost, 100 + "tail of a line\n".len() as u64);
        // Kept from a line's start: only what was dropped is lost.
        let kept = history(1000, 99, true, b"line 100\nline 101\n");
        let read = kept.after(990, 10_000);
        assert_eq!(
            (read.text.as_str(), read.lost),
            ("line 100\nline 101\n", 10)
        );
    }

    #[test]
    fn a_line_longer_than_the_limit_is_cut_and_passed() {
        let mut bytes = vec![b'x'; 500];
        bytes.extend_from_slice(b"\nnext\n");
        let kept = history(0, 0, true, &bytes);
        let read = kept.after(0, 100);
        assert_eq!(read.text, format!("{}\n", "x".repeat(99)));
        assert_eq!((read.omitted, read.cursor), (401, 501));
        assert_eq!(kept.after(read.cursor, 100).text, "next\n");
    }

    #[test]
    fn an_unfinished_line_waits_for_its_escape_and_its_character() {
        let spinner = "⠋".as_bytes();
        for tail in [&b"\r\x1b"[..], b"\r\x1b[", &spinner[..2]] {
            let mut bytes = b"done\n50%".to_vec();
            bytes.extend_from_slice(tail);
            let read = history(0, 0, true, &bytes).after(0, 100);
            assert_eq!((read.text.as_str(), read.cursor), ("done\n", 5), "{tail:?}");
        }
        // Once complete, the rest reads as it is shown.
        let kept = history(0, 0, true, b"done\n50%\r\x1b[K60%");
        assert_eq!(kept.after(5, 100).text, "60%");
    }

    #[test]
    fn a_read_cut_by_its_limit_stops_at_a_whole_line() {
        let mut kept = history(0, 0, true, b"one\ntwo\nthr");
        kept.cut = true;
        let read = kept.after(0, 100);
        assert_eq!((read.text.as_str(), read.cursor), ("one\ntwo\n", 8));
        // A line longer than the whole window still moves on.
        let mut long = history(0, 0, true, &[b'z'; 300]);
        long.cut = true;
        let read = long.after(0, 100);
        assert_eq!(
            (read.text.len(), read.cursor, read.omitted),
            (100, 300, 200)
        );
    }

    #[test]
    fn many_short_lines_read_in_linear_time() {
        // 100,000 empty lines: each line's text is looked at once, not the whole so far.
        let kept = history(0, 0, true, &vec![b'\n'; 200_000]);
        let read = kept.after(0, 100_000);
        assert_eq!((read.text.len(), read.cursor), (100_000, 100_000));
    }

    #[test]
    fn a_cursor_past_the_end_reads_nothing() {
        let kept = history(0, 0, true, b"abc\n");
        let read = kept.after(99, 100);
        assert_eq!((read.text.as_str(), read.cursor), ("", 4));
    }

    #[test]
    fn search_numbers_lines_from_the_first_one_written_with_context() {
        let mut bytes = b"ial line\n".to_vec();
        for n in 101..=200 {
            let text = match n {
                120 | 150 | 199 => format!("\x1b[31mError\x1b[0m: case {n}\r\n"),
                _ => format!("ok {n}\r\n"),
            };
            bytes.extend_from_slice(text.as_bytes());
        }
        // 99 newlines were dropped, and the kept bytes start inside line 100.
        let kept = history(5000, 99, false, &bytes);
        let found = kept.search("error:", 2);
        assert_eq!(found.count, 3);
        assert_eq!(found.cursor, kept.end());
        let lines: Vec<u64> = found.matches.iter().map(|m| m.line).collect();
        assert_eq!(lines, [150, 199]);
        assert_eq!(found.matches[0].text, "Error: case 150");
        assert_eq!(found.matches[0].before, ["ok 149"]);
        assert_eq!(found.matches[0].after, ["ok 151"]);
        assert_eq!(found.matches[1].after, ["ok 200"]);
        assert_eq!(kept.search("nowhere", 5).count, 0);
        // Text split by colours, or drawn over with a carriage return, is found as shown.
        let drawn = history(
            0,
            0,
            true,
            b"\x1b[31merr\x1b[0mor: one\r\nwarn: x\rerror: two\n  ERROR:\tthree  \n",
        );
        let lines: Vec<u64> = drawn
            .search("error:", 5)
            .matches
            .iter()
            .map(|m| m.line)
            .collect();
        assert_eq!(lines, [1, 2, 3]);
        assert_eq!(drawn.search("warn", 5).count, 0);
    }

    #[test]
    fn search_answers_plain_text_cut() {
        let line = format!(
            "bad \x1b]52;c;aGk=\x07\x1b[2Jname\x08\x08{}\n",
            "y".repeat(1000)
        );
        let found = history(0, 0, true, line.as_bytes()).search("BAD", 5);
        let text = &found.matches[0].text;
        assert!(text.starts_with("bad nayy"), "{text}");
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert_eq!(text.chars().count(), MATCH_LINE_CHARS + 1);
        assert!(text.ends_with('…'));
        // A match far into a long line is shown with what is around it.
        let line = format!("{} panic: here {}\n", "a".repeat(2000), "b".repeat(2000));
        let found = history(0, 0, true, line.as_bytes()).search("PANIC", 5);
        let text = &found.matches[0].text;
        assert!(
            text.starts_with('…') && text.ends_with('…') && text.contains("panic: here"),
            "{text}"
        );
        assert_eq!(text.chars().count(), MATCH_LINE_CHARS + 2);
    }
}
