//! A streaming filter that removes terminal *queries* from a program's output.
//!
//! A query is a sequence a program prints to ask its terminal something (device
//! attributes, cursor position, a colour, a mode, a capability); the terminal answers by
//! typing the reply into the program's input. tmux answers some of them itself, always:
//! when the asking program has exited, or never reads the reply, the reply lands in the
//! shell's next command line (`printf '\033[6n'` leaves `^[[1;1R` there). The pane filter
//! ([`crate::host::terminals::pane_filter`]) runs every tmux terminal's output through [`QueryFilter`], so no
//! query reaches tmux and nothing is typed on anyone's behalf.
//!
//! Dropped, whatever their parameters:
//! - CSI: DA1 `CSI c`, DA2 `CSI > c`, DA3 `CSI = c`; DSR `CSI n` and `CSI ? n` (status,
//!   cursor position); DECRQM `CSI $ p` and `CSI ? $ p`; XTVERSION `CSI > q`; window
//!   reports `CSI 11/13/14/15/16/18/19/20/21 t`; kitty keyboard flags `CSI ? u`;
//!   DECREQTPARM `CSI x`; XTQMODKEYS `CSI ? m`; DECRQPSR `CSI $ w`; DECRQTSR `CSI $ u`;
//!   DECRQCRA `CSI * y`.
//! - OSC 4, 5 and 10–19 (colours) and 52 (clipboard) with a `?` among their values. A
//!   sequence that sets some colours and asks for others is dropped whole.
//! - DCS DECRQSS `DCS $ q … ST` and XTGETTCAP `DCS + q … ST`.
//!
//! Every other byte passes through unchanged and in order: text, colours, cursor moves,
//! titles, modes (bracketed paste, mouse, alternate screen), hyperlinks, clipboard
//! writes. A sequence is judged the way tmux parses it: C0 controls inside a CSI are
//! carried out without ending it (so they are kept when the query around them is
//! dropped), CAN and SUB abort it, ESC starts a new one, and an OSC ends at BEL, ST or
//! any ESC. Only 7-bit sequences exist here: tmux reads UTF-8, where 0x80–0x9F are not
//! controls.
//!
//! A sequence split across reads is held until its end arrives ([`QueryFilter::feed`]);
//! the caller passes held bytes on unjudged after a quiet time ([`QueryFilter::flush`]).
//! A sequence still open after [`MAX_HELD`] bytes (a long clipboard write, say) is passed
//! on as it is: no query is that long.

/// The most bytes of one unfinished sequence held back.
pub const MAX_HELD: usize = 4096;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;

/// Removes queries from a byte stream; see the module docs.
#[derive(Debug, Default)]
pub struct QueryFilter {
    /// The start of a sequence whose end has not arrived yet.
    held: Vec<u8>,
}

impl QueryFilter {
    /// A filter with nothing held.
    pub fn new() -> QueryFilter {
        QueryFilter::default()
    }

    /// Appends `input` to `out` without its queries. An unfinished sequence at the end is
    /// held back, to be judged with the next input.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.held.is_empty() {
            self.filter(input, out);
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(input);
            self.filter(&joined, out);
        }
    }

    /// Whether an unfinished sequence is held back.
    pub fn holds_partial(&self) -> bool {
        !self.held.is_empty()
    }

    /// Appends the held bytes to `out` as they are (no more input is coming soon).
    pub fn flush(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.held);
    }

    fn filter(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        while let Some(start) = bytes.iter().position(|&b| b == ESC) {
            out.extend_from_slice(&bytes[..start]);
            bytes = &bytes[start..];
            let len = match scan(bytes) {
                Scan::Sequence { len, query: None } => {
                    out.extend_from_slice(&bytes[..len]);
                    len
                }
                Scan::Sequence {
                    len,
                    query: Some(controls_end),
                } => {
                    let controls = bytes[..controls_end].iter().filter(|&&b| executed(b));
                    out.extend(controls);
                    len
                }
                Scan::Incomplete if bytes.len() < MAX_HELD => {
                    self.held.extend_from_slice(bytes);
                    return;
                }
                Scan::Incomplete => {
                    out.extend_from_slice(bytes); // over-long: passed on unjudged
                    return;
                }
            };
            bytes = &bytes[len..];
        }
        out.extend_from_slice(bytes);
    }
}

/// What [`scan`] found at an ESC.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// The sequence's end has not arrived.
    Incomplete,
    /// A whole sequence of `len` bytes. `query` is `None` for anything but a query; for
    /// a query, the C0 controls before index `Some(end)` are carried out by a terminal
    /// and must be kept.
    Sequence { len: usize, query: Option<usize> },
}

/// A C0 control that tmux carries out even inside an escape or control sequence.
fn executed(byte: u8) -> bool {
    byte < 0x20 && !matches!(byte, ESC | CAN | SUB)
}

/// Judges the sequence at the start of `bytes`, which begins with ESC.
fn scan(bytes: &[u8]) -> Scan {
    let mut i = 1;
    while let Some(&byte) = bytes.get(i) {
        match byte {
            CAN | SUB => return passed(i + 1),
            ESC => return passed(i),
            b if executed(b) => i += 1,
            b'[' => return csi(bytes, i + 1),
            b']' => return osc(bytes, i + 1),
            b'P' => return dcs(bytes, i + 1),
            // Two-byte escapes, and the start of longer ones (charsets): no queries.
            _ => return passed(i + 1),
        }
    }
    Scan::Incomplete
}

fn passed(len: usize) -> Scan {
    Scan::Sequence { len, query: None }
}

/// A CSI from `start` (after `ESC [`): parameter bytes, intermediate bytes, final byte.
fn csi(bytes: &[u8], start: usize) -> Scan {
    let mut private = None;
    let mut started = false; // a parameter or intermediate byte was seen
    let mut first_param: Option<u32> = None;
    let mut in_first_param = true;
    let mut intermediates: Vec<u8> = Vec::new();
    let mut ignored = false; // malformed: tmux parses it to its end and does nothing
    for (k, &byte) in bytes.iter().enumerate().skip(start) {
        match byte {
            CAN | SUB => return passed(k + 1),
            ESC => return passed(k),
            b if executed(b) || b == 0x7f => continue,
            b'<'..=b'?' if !started => private = Some(byte),
            0x30..=0x3f if !intermediates.is_empty() => ignored = true,
            b'0'..=b'9' if in_first_param => {
                let digit = u32::from(byte - b'0');
                first_param = Some(
                    first_param
                        .unwrap_or(0)
                        .saturating_mul(10)
                        .saturating_add(digit),
                );
            }
            0x30..=0x3f => in_first_param = false,
            0x20..=0x2f => intermediates.push(byte),
            0x40..=0x7e => {
                let query = !ignored && csi_is_query(private, first_param, &intermediates, byte);
                let len = k + 1;
                return Scan::Sequence {
                    len,
                    query: query.then_some(len),
                };
            }
            _ => return passed(k), // a byte no sequence has: tmux gives up on it
        }
        started = true;
    }
    Scan::Incomplete
}

fn csi_is_query(
    private: Option<u8>,
    first_param: Option<u32>,
    intermediates: &[u8],
    final_byte: u8,
) -> bool {
    match (private, intermediates, final_byte) {
        // DA1, DA2, DA3: device attributes.
        (None | Some(b'>') | Some(b'='), b"", b'c') => true,
        // DSR, DECXCPR: status and cursor position reports.
        (None | Some(b'?'), b"", b'n') => true,
        // DECRQM: mode reports.
        (None | Some(b'?'), b"$", b'p') => true,
        // XTVERSION.
        (Some(b'>'), b"", b'q') => true,
        // XTWINOPS reports; its other operations act on the window.
        (None, b"", b't') => matches!(first_param, Some(11 | 13..=16 | 18..=21)),
        // Kitty keyboard flags.
        (Some(b'?'), b"", b'u') => true,
        // DECREQTPARM: terminal parameters.
        (None, b"", b'x') => true,
        // XTQMODKEYS: key modifier options.
        (Some(b'?'), b"", b'm') => true,
        // DECRQPSR, DECRQTSR: presentation and terminal state reports.
        (None, b"$", b'w' | b'u') => true,
        // DECRQCRA: checksum of a rectangle.
        (None, b"*", b'y') => true,
        _ => false,
    }
}

/// An OSC from `start` (after `ESC ]`): its text up to BEL, ST, CAN, SUB or any ESC.
fn osc(bytes: &[u8], start: usize) -> Scan {
    for (k, &byte) in bytes.iter().enumerate().skip(start) {
        let len = match byte {
            BEL | CAN | SUB => k + 1,
            ESC => match bytes.get(k + 1) {
                None => return Scan::Incomplete, // maybe ST
                Some(b'\\') => k + 2,
                Some(_) => k, // ends the string; the ESC starts the next sequence
            },
            _ => continue,
        };
        let query = osc_is_query(&bytes[start..k]);
        return Scan::Sequence {
            len,
            query: query.then_some(start),
        };
    }
    Scan::Incomplete
}

fn osc_is_query(text: &[u8]) -> bool {
    // tmux skips C0 controls inside the string, so they cannot hide a `?`.
    let text: Vec<u8> = text.iter().copied().filter(|&b| b >= 0x20).collect();
    let mut fields = text.split(|&b| b == b';');
    let number = fields
        .next()
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<u32>().ok());
    matches!(number, Some(4 | 5 | 10..=19 | 52)) && fields.any(|value| value == b"?")
}

/// A DCS from `start` (after `ESC P`): its header (parameters, intermediates, final byte)
/// decides; a query is held to its ST, anything else passes on from its header.
fn dcs(bytes: &[u8], start: usize) -> Scan {
    let mut intermediates: Vec<u8> = Vec::new();
    for (k, &byte) in bytes.iter().enumerate().skip(start) {
        match byte {
            CAN | SUB => return passed(k + 1),
            ESC => return passed(k),
            0x20..=0x2f => intermediates.push(byte),
            0x40..=0x7e => {
                let query = byte == b'q' && matches!(intermediates.as_slice(), b"$" | b"+");
                if !query {
                    return passed(k + 1);
                }
                return string_end(bytes, k + 1).map_or(Scan::Incomplete, |len| Scan::Sequence {
                    len,
                    query: Some(start),
                });
            }
            _ => {} // parameters, and C0 controls tmux skips here
        }
    }
    Scan::Incomplete
}

/// The length up to and including the ST (`ESC \`), CAN or SUB ending a DCS string that
/// continues at `from`.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len()).find_map(|k| match bytes[k] {
        CAN | SUB => Some(k + 1),
        ESC if bytes.get(k + 1) == Some(&b'\\') => Some(k + 2),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(input: &[u8]) -> Vec<u8> {
        let mut filter = QueryFilter::new();
        let mut out = Vec::new();
        filter.feed(input, &mut out);
        filter.flush(&mut out);
        out
    }

    /// Feeds `input` in pieces of `size` bytes, flushing only at the end.
    fn filtered_in_pieces(input: &[u8], size: usize) -> Vec<u8> {
        let mut filter = QueryFilter::new();
        let mut out = Vec::new();
        for piece in input.chunks(size) {
            filter.feed(piece, &mut out);
        }
        filter.flush(&mut out);
        out
    }

    const QUERIES: &[&[u8]] = &[
        b"\x1b[c",
        b"\x1b[0c",
        b"\x1b[>c",
        b"\x1b[>0c",
        b"\x1b[=c",
        b"\x1b[=0c",
        b"\x1b[5n",
        b"\x1b[6n",
        b"\x1b[?6n",
        b"\x1b[?15n",
        b"\x1b[?996n",
        b"\x1b[4$p",
        b"\x1b[?2004$p",
        b"\x1b[?1049$p",
        b"\x1b[>q",
        b"\x1b[>0q",
        b"\x1b[11t",
        b"\x1b[13t",
        b"\x1b[13;2t",
        b"\x1b[14t",
        b"\x1b[14;2t",
        b"\x1b[15t",
        b"\x1b[16t",
        b"\x1b[18t",
        b"\x1b[19t",
        b"\x1b[20t",
        b"\x1b[21t",
        b"\x1b[?u",
        b"\x1b[1x",
        b"\x1b[?4m",
        b"\x1b[1$w",
        b"\x1b[1$u",
        b"\x1b[1;1;1;1;2;2*y",
        b"\x1b]4;1;?\x07",
        b"\x1b]4;1;?;2;?\x1b\\",
        b"\x1b]5;0;?\x07",
        b"\x1b]10;?\x07",
        b"\x1b]11;?\x07",
        b"\x1b]11;?\x1b\\",
        b"\x1b]12;?\x07",
        b"\x1b]10;?;?\x07",
        b"\x1b]19;?\x07",
        b"\x1b]52;c;?\x07",
        b"\x1b]52;;?\x1b\\",
        b"\x1bP$qm\x1b\\",
        b"\x1bP$q q\x1b\\",
        b"\x1bP+q544e\x1b\\",
        b"\x1bP+q544e;636f\x1b\\",
    ];

    #[test]
    fn every_query_form_is_dropped() {
        for query in QUERIES {
            let mut input = b"before ".to_vec();
            input.extend_from_slice(query);
            input.extend_from_slice(b" after");
            assert_eq!(
                filtered(&input),
                b"before  after",
                "{:?}",
                String::from_utf8_lossy(query)
            );
        }
    }

    #[test]
    fn queries_split_across_reads_are_dropped() {
        let all: Vec<u8> = QUERIES.iter().flat_map(|q| [*q, b"x"].concat()).collect();
        let expected = b"x".repeat(QUERIES.len());
        for size in 1..8 {
            assert_eq!(filtered_in_pieces(&all, size), expected, "pieces of {size}");
        }
    }

    const PASSED: &[&[u8]] = &[
        b"plain text\r\n",
        "unicode: \u{e9}\u{65e5}\u{1f600}".as_bytes(),
        b"\x1b[31mred\x1b[0m \x1b[38;5;196mx\x1b[38;2;1;2;3my\x1b[m",
        b"\x1b[H\x1b[2J\x1b[10;20H\x1b[3A\x1b[2B\x1b[K\x1b[1P\x1b[2@",
        b"\x1b[?2004h\x1b[?2004l\x1b[?1049h\x1b[?1049l\x1b[?25l\x1b[?1000h",
        b"\x1b[200~pasted\x1b[201~",
        b"\x1b]0;title\x07\x1b]2;other title\x1b\\",
        b"\x1b]8;;https://example.com\x07link\x1b]8;;\x07",
        b"\x1b]52;c;aGVsbG8=\x07",
        b"\x1b]11;#000000\x07\x1b]4;1;rgb:ff/00/00\x07\x1b]104\x07\x1b]0;?\x07",
        b"\x1b]133;A\x07\x1b]7;file://host/tmp\x07",
        b"\x1b[?c\x1b[>1m\x1b[>4;2m\x1b[>0n\x1b[2 q\x1b[!p\x1b[u\x1b[s\x1b[>1u\x1b[<u",
        b"\x1b[8;24;80t\x1b[22;0t\x1b[23;0t\x1b[1t\x1b[2$x",
        b"\x1b7\x1b8\x1bc\x1b(B\x1b)0\x1bM\x1b=\x1b>\x1b\\",
        b"\x1bPq#0;2;0;0;0#0~~\x1b\\\x1bP1$r0m\x1b\\",
        b"\x1b_Gf=24;AAAA\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\",
        b"\x07\x08\t\x0b\x0c\x0e\x0f\x7f",
    ];

    #[test]
    fn everything_else_passes_byte_exact() {
        for sample in PASSED {
            assert_eq!(
                filtered(sample),
                *sample,
                "{:?}",
                String::from_utf8_lossy(sample)
            );
            for size in 1..6 {
                assert_eq!(filtered_in_pieces(sample, size), *sample);
            }
        }
    }

    #[test]
    fn queries_among_other_output_go_and_the_rest_stays() {
        let input = b"\x1b[1mbold\x1b[6n\x1b[0m \x1b]11;?\x07\x1b]0;t\x07ok\x1b[c\r\n";
        let expected = b"\x1b[1mbold\x1b[0m \x1b]0;t\x07ok\r\n";
        for size in 1..input.len() {
            assert_eq!(
                filtered_in_pieces(input, size),
                expected,
                "pieces of {size}"
            );
        }
    }

    #[test]
    fn controls_inside_a_query_are_kept_and_do_not_hide_it() {
        // tmux carries out the CR and LF and still answers the DSR.
        assert_eq!(filtered(b"a\x1b[\r6\nn b"), b"a\r\n b");
        assert_eq!(filtered(b"\x1b\n[6n"), b"\n");
        // Controls inside an OSC are skipped by tmux (and dropped with the query).
        assert_eq!(filtered(b"\x1b]11;\x01?\x07"), b"");
    }

    #[test]
    fn aborted_sequences_are_not_queries() {
        for aborted in [
            &b"\x1b[6\x18n"[..],
            b"\x1b[6\x1an",
            b"\x1b[6\x1b[1m",
            b"\x1bP$\x18q",
        ] {
            assert_eq!(filtered(aborted), aborted, "{aborted:?}");
        }
        // An OSC ends at any ESC, and is answered if it was a query.
        assert_eq!(filtered(b"\x1b]11;?\x1b[1mX"), b"\x1b[1mX");
    }

    #[test]
    fn a_held_partial_sequence_waits_then_passes_on_flush() {
        let mut filter = QueryFilter::new();
        let mut out = Vec::new();
        filter.feed(b"text\x1b[", &mut out);
        assert_eq!(out, b"text");
        assert!(filter.holds_partial());
        filter.feed(b"3", &mut out);
        assert_eq!(out, b"text");
        filter.flush(&mut out);
        assert_eq!(out, b"text\x1b[3");
        assert!(!filter.holds_partial());
        filter.feed(b"1mred", &mut out);
        assert_eq!(out, b"text\x1b[31mred");
    }

    #[test]
    fn over_long_sequences_pass_unjudged() {
        let mut long = b"\x1b]52;c;".to_vec();
        long.extend(std::iter::repeat(b'A').take(3 * MAX_HELD));
        long.extend_from_slice(b"\x07done");
        assert_eq!(filtered(&long), long);
        assert_eq!(filtered_in_pieces(&long, 1000), long);
        // Held bytes never grow past the limit.
        let mut filter = QueryFilter::new();
        let mut out = Vec::new();
        for piece in long.chunks(100) {
            filter.feed(piece, &mut out);
            assert!(filter.held.len() < MAX_HELD);
        }
        filter.flush(&mut out);
        assert_eq!(out, long);
    }

    #[test]
    fn arbitrary_bytes_never_grow_and_keep_everything_without_esc() {
        // A deterministic pseudo-random stream: output is never longer than input, and
        // bytes outside escape sequences survive in order.
        let mut state = 0x2545_f491_u32;
        let bytes: Vec<u8> = (0..20_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                [
                    b'a', b'[', b'6', b'n', b'?', b';', 0x1b, 0x07, b']', b'1', b'c',
                ][state as usize % 11]
            })
            .collect();
        for size in [1, 7, 64, 4096] {
            let out = filtered_in_pieces(&bytes, size);
            assert!(out.len() <= bytes.len());
        }
        let no_esc: Vec<u8> = bytes.iter().copied().filter(|&b| b != 0x1b).collect();
        assert_eq!(filtered_in_pieces(&no_esc, 13), no_esc);
    }
}
