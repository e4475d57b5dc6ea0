//! A terminal screen as the view draws it: lines of styled runs.
//!
//! The input is a screen's text that may hold SGR escapes (tmux's `capture-pane -e`) or
//! none (the PTY model's text). The output holds no escape or control character at all:
//! SGR sets a small closed set of attributes (foreground, background, bold, underline,
//! inverse) whose colours are made here as `#rrggbb` (16 and 256 colours through the
//! xterm palette, truecolor as given); every other escape (OSC strings such as
//! hyperlinks and titles, other CSI sequences, charset designations) and every control
//! character but tab is dropped. The page sets each run's text as `textContent` and its
//! colours through `element.style`, so nothing the terminal printed can become markup or
//! a style.
//!
//! Bounded: the last [`super::snapshot::SCREEN_LINES`] lines (each at most a pane's
//! width), adjacent runs of one style merged, and at most [`MAX_STYLED_RUNS`] styled runs
//! per screen; past that, the rest of each line is one unstyled run.

use serde_json::{json, Map, Value};

use crate::host::terminals::screen::sgr::{apply_sgr, Style};

/// Most styled runs one screen may hold (then the rest of each line is plain).
pub const MAX_STYLED_RUNS: usize = 2_000;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';

/// Text of one style.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub text: String,
    pub style: Style,
}

impl Run {
    /// `{text, fg?, bg?, bold?, underline?, inverse?}`, defaults left out.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("text".into(), json!(self.text));
        let style = &self.style;
        if let Some(fg) = style.fg {
            object.insert("fg".into(), json!(css_colour(fg)));
        }
        if let Some(bg) = style.bg {
            object.insert("bg".into(), json!(css_colour(bg)));
        }
        for (name, on) in [
            ("bold", style.bold),
            ("underline", style.underline),
            ("inverse", style.inverse),
        ] {
            if on {
                object.insert(name.into(), json!(true));
            }
        }
        Value::Object(object)
    }
}

/// The last `max_lines` lines of `screen` as runs (module docs), after how many lines
/// were left out at the top.
pub fn screen_lines(screen: &str, max_lines: usize) -> (usize, Vec<Vec<Run>>) {
    let mut lines: Vec<Vec<Run>> = vec![Vec::new()];
    let mut style = Style::default();
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => lines.push(Vec::new()),
            ESC => match chars.next() {
                Some('[') => {
                    let mut params = String::new();
                    let mut final_byte = None;
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            final_byte = Some(c);
                            break;
                        }
                        params.push(c);
                    }
                    if final_byte == Some('m') {
                        apply_sgr(&mut style, &params);
                    }
                }
                // OSC and the other strings: swallowed to BEL or ST, as a terminal does.
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(c) = chars.next() {
                        if c == BEL || (c == ESC && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                // ESC + intermediates + final byte (charset designations and the like).
                Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
                    while chars
                        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                        .is_some()
                    {}
                    chars.next();
                }
                _ => {}
            },
            c if c == '\t' || !c.is_control() => {
                if let Some(line) = lines.last_mut() {
                    push_char(line, c, style);
                }
            }
            _ => {}
        }
    }
    while lines.len() > 1
        && lines
            .last()
            .is_some_and(|l| text_of(l).trim_end().is_empty())
    {
        lines.pop();
    }
    let skip = lines.len().saturating_sub(max_lines);
    let mut lines: Vec<Vec<Run>> = lines.into_iter().skip(skip).collect();
    cap_styled_runs(&mut lines, MAX_STYLED_RUNS);
    (skip, lines)
}

/// The plain text of runs.
pub fn text_of(line: &[Run]) -> String {
    line.iter().map(|run| run.text.as_str()).collect()
}

/// Past `cap` styled runs, each line's remaining runs become one unstyled run.
fn cap_styled_runs(lines: &mut [Vec<Run>], cap: usize) {
    let mut styled = 0;
    for line in lines.iter_mut() {
        let keep = line
            .iter()
            .position(|run| {
                styled += usize::from(run.style != Style::default());
                styled > cap
            })
            .unwrap_or(line.len());
        if keep < line.len() {
            let text = text_of(&line[keep..]);
            line.truncate(keep);
            line.push(Run {
                text,
                style: Style::default(),
            });
        }
    }
}

fn push_char(line: &mut Vec<Run>, c: char, style: Style) {
    match line.last_mut() {
        Some(run) if run.style == style => run.text.push(c),
        _ => line.push(Run {
            text: c.to_string(),
            style,
        }),
    }
}

fn css_colour([r, g, b]: [u8; 3]) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs_json(screen: &str) -> Value {
        let (_, lines) = screen_lines(screen, 60);
        json!(lines
            .iter()
            .map(|l| l.iter().map(Run::to_json).collect::<Vec<_>>())
            .collect::<Vec<_>>())
    }

    #[test]
    fn sgr_colours_become_runs() {
        assert_eq!(
            runs_json("a\u{1b}[31mred\u{1b}[0m b"),
            json!([[{"text": "a"}, {"text": "red", "fg": "#cd0000"}, {"text": " b"}]])
        );
        assert_eq!(
            runs_json("\u{1b}[1;4;7;38;5;196;48;2;1;2;3mx\u{1b}[22;24;27;39;49my"),
            json!([[{"text": "x", "fg": "#ff0000", "bg": "#010203", "bold": true, "underline": true, "inverse": true}, {"text": "y"}]])
        );
        assert_eq!(
            runs_json("\u{1b}[38:5:232m1\u{1b}[92;104m2"),
            json!([[{"text": "1", "fg": "#080808"}, {"text": "2", "fg": "#00ff00", "bg": "#5c5cff"}]])
        );
    }

    #[test]
    fn runs_of_one_style_merge_and_lines_split() {
        assert_eq!(
            runs_json("\u{1b}[31ma\u{1b}[31mb\nc\n\n"),
            json!([[{"text": "ab", "fg": "#cd0000"}], [{"text": "c", "fg": "#cd0000"}]])
        );
    }

    #[test]
    fn other_escapes_and_controls_are_dropped() {
        let screen = "\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{7}\u{1b}(B\u{1b}[?25l\u{1b}[2J\r\u{9b}\u{7}ok\t<b>";
        // The OSC 8 hyperlink's text stays; its target does not.
        assert_eq!(runs_json(screen), json!([[{"text": "linkok\t<b>"}]]));
    }

    #[test]
    fn malformed_colours_are_ignored() {
        assert_eq!(
            runs_json("\u{1b}[38;5;999ma\u{1b}[48;2;300;0;0mb\u{1b}[38mc\u{1b}[<31md"),
            json!([[{"text": "abcd"}]])
        );
    }

    #[test]
    fn only_the_last_lines_are_kept() {
        let (dropped, lines) = screen_lines("1\n2\n3\n4\n\n", 2);
        assert_eq!(dropped, 2);
        let texts: Vec<String> = lines.iter().map(|l| text_of(l)).collect();
        assert_eq!(texts, ["3", "4"]);
    }

    #[test]
    fn styled_runs_are_capped() {
        let screen = "\u{1b}[31ma\u{1b}[32mb".repeat(MAX_STYLED_RUNS);
        let (_, lines) = screen_lines(&screen, 60);
        assert_eq!(lines[0].len(), MAX_STYLED_RUNS + 1);
        assert_eq!(lines[0].last().unwrap().style, Style::default());
        assert_eq!(text_of(&lines[0]), "ab".repeat(MAX_STYLED_RUNS));
    }

    #[test]
    fn random_input_never_panics_and_holds_no_controls() {
        let mut seed: u32 = 7;
        for _ in 0..300 {
            let text: String = (0..200)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let pick = b"\x1b[];:0123456789mPX\\\x07\n\t ab"[(seed >> 16) as usize % 24];
                    pick as char
                })
                .collect();
            for line in screen_lines(&text, 60).1 {
                for run in line {
                    assert!(!run.text.chars().any(|c| c != '\t' && c.is_control()));
                }
            }
        }
    }
}
