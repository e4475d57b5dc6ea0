//! A small terminal-text model: what a person would see on a terminal, as plain text.
//!
//! [`Screen::feed`] takes a program's raw output. It applies what decides where text
//! lands — printable characters with line wrapping, CR, LF, backspace, tab, the CSI
//! cursor movements and erasures, insert/delete of characters and lines, scrolling, the
//! alternate screen — and, for the canvas view, keeps each cell's SGR style (see
//! `sgr.rs` beside it) and tracks two modes, the cursor's visibility and bracketed paste. It
//! drops every other control sequence unexecuted: other modes, OSC (window titles, OSC 52 clipboard, hyperlinks), DCS/SOS/PM/APC strings,
//! charset designations, and all queries (the model never answers; nothing a program
//! prints can type into the terminal). Invalid UTF-8 becomes U+FFFD.
//!
//! The text it yields ([`Screen::text`], [`Screen::tail`]) contains no control
//! characters other than `\n`: rows are joined with `\n` (rows that wrapped are joined
//! without one), trailing spaces and trailing blank rows are trimmed, and lines that
//! scrolled off the top are kept as history (at most [`HISTORY_MAX_BYTES`]).
//!
//! Simplifications, stated: every character takes one cell (no wide or combining
//! widths), there are no scroll regions (`DECSTBM` is ignored) and no reflow on resize.

pub(crate) mod sgr;

use std::collections::VecDeque;

use crate::host::terminals::screen::sgr::{apply_sgr_codes, Style};

/// The most text kept in history, in bytes of UTF-8; the oldest lines go first.
pub const HISTORY_MAX_BYTES: usize = 1 << 20;

const TAB_WIDTH: usize = 8;
const MAX_PARAMS: usize = 16;
const MAX_PARAM_VALUE: u32 = 65_535;
const ESC: char = '\u{1b}';

/// One character cell and its SGR style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    ch: char,
    style: Style,
}

/// An erased cell (erasures use the default style, not the current background).
const BLANK: Cell = Cell {
    ch: ' ',
    style: Style {
        fg: None,
        bg: None,
        bold: false,
        underline: false,
        inverse: false,
    },
};

#[derive(Clone, Debug, Default)]
struct Row {
    cells: Vec<Cell>,
    /// The text continues on the next row (it reached the right margin).
    wrapped: bool,
}

impl Row {
    fn text(&self) -> String {
        let text: String = self.cells.iter().map(|cell| cell.ch).collect();
        if self.wrapped {
            text
        } else {
            text.trim_end_matches(' ').to_string()
        }
    }
}

#[derive(Clone, Debug)]
struct HistoryLine {
    text: String,
    wrapped: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cursor {
    row: usize,
    /// May equal the width: the last column was written and the next character wraps.
    col: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    /// ESC followed by intermediate bytes (charset designation and the like).
    EscapeIntermediate,
    Csi,
    /// Inside OSC, DCS, SOS, PM or APC: everything is swallowed until ST or BEL.
    Text,
    /// ESC seen inside a swallowed string: `\` ends it, anything else starts a new escape.
    TextEscape,
}

/// The main screen kept aside while the alternate screen is shown.
#[derive(Clone, Debug)]
struct MainScreen {
    grid: Vec<Row>,
    cursor: Cursor,
}

/// A terminal screen of `cols` x `rows` cells plus history. See the module docs.
#[derive(Clone, Debug)]
pub struct Screen {
    cols: usize,
    rows: usize,
    grid: Vec<Row>,
    cursor: Cursor,
    saved_cursor: Cursor,
    /// Some while the alternate screen is active.
    main: Option<MainScreen>,
    history: VecDeque<HistoryLine>,
    history_bytes: usize,
    state: State,
    params: Vec<u32>,
    param: Option<u32>,
    private_marker: Option<char>,
    intermediates: bool,
    /// An incomplete UTF-8 sequence at the end of the last chunk (at most 3 bytes).
    utf8_carry: Vec<u8>,
    /// The cursor is shown (DECTCEM, `CSI ? 25 h` / `l`).
    cursor_visible: bool,
    /// The program asked for bracketed paste (`CSI ? 2004 h` / `l`).
    bracketed_paste: bool,
    /// The program asked for application cursor keys (DECCKM, `CSI ? 1 h` / `l`).
    application_cursor: bool,
    /// The style SGR set for the characters printed next.
    pen: Style,
}

impl Screen {
    /// An empty screen of `cols` x `rows` (each at least 1).
    pub fn new(cols: u16, rows: u16) -> Screen {
        let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
        Screen {
            cols,
            rows,
            grid: vec![Row::default(); rows],
            cursor: Cursor::default(),
            saved_cursor: Cursor::default(),
            main: None,
            history: VecDeque::new(),
            history_bytes: 0,
            state: State::Ground,
            params: Vec::new(),
            param: None,
            private_marker: None,
            intermediates: false,
            utf8_carry: Vec::new(),
            cursor_visible: true,
            bracketed_paste: false,
            application_cursor: false,
            pen: Style::default(),
        }
    }

    /// Applies a chunk of program output. Chunks may split UTF-8 sequences and escape
    /// sequences anywhere.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut carry = std::mem::take(&mut self.utf8_carry);
        decode_utf8(&mut carry, bytes, |c| self.step(c));
        self.utf8_carry = carry;
    }

    /// Whether the alternate screen is shown (a full-screen program: vim, less, htop).
    pub fn alternate(&self) -> bool {
        self.main.is_some()
    }

    /// The visible screen's rows as text with SGR escapes for their styles (each row
    /// starts in the default style; trailing unstyled blanks and trailing blank rows
    /// trimmed; wrapped rows not joined: one line per row), and the cursor's row and
    /// column on it when it is shown. No other escape or control character but `\n`.
    pub fn rows_and_cursor(&self) -> (String, Option<(usize, usize)>) {
        let rows: Vec<String> = self.grid.iter().map(styled_row).collect();
        let used = rows
            .iter()
            .rposition(|r| !r.is_empty())
            .map_or(0, |i| i + 1);
        let cursor =
            (self.cursor_visible).then(|| (self.cursor.row, self.cursor.col.min(self.cols - 1)));
        (rows[..used].join("\n"), cursor)
    }

    /// Whether the program asked for bracketed paste (and has not turned it off since).
    pub fn bracketed_paste(&self) -> bool {
        self.bracketed_paste
    }

    /// Whether the program asked for application cursor keys (arrows as `ESC O A`).
    pub fn application_cursor(&self) -> bool {
        self.application_cursor
    }

    /// The visible screen as text.
    pub fn text(&self) -> String {
        let lines: Vec<(String, bool)> = self.grid.iter().map(|r| (r.text(), r.wrapped)).collect();
        join_tail(lines.into_iter().rev(), usize::MAX)
    }

    /// The last `max_chars` characters of history followed by the visible screen.
    pub fn tail(&self, max_chars: usize) -> String {
        let history = self
            .history
            .iter()
            .map(|line| (line.text.clone(), line.wrapped));
        let screen = self.grid.iter().map(|row| (row.text(), row.wrapped));
        join_tail(history.chain(screen).rev(), max_chars)
    }

    /// Changes the size. Rows above the cursor that no longer fit go to history; rows are
    /// cut at the new width (no reflow).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
        self.cols = cols;
        self.rows = rows;
        let mut cursor = self.cursor;
        let off_top = resize_grid(&mut self.grid, &mut cursor, cols, rows);
        self.cursor = cursor;
        // Rows leaving the alternate screen are gone; the main screen's go to history.
        let to_history = match self.main.as_mut() {
            Some(main) => resize_grid(&mut main.grid, &mut main.cursor, cols, rows),
            None => off_top,
        };
        for row in to_history {
            self.push_history(row);
        }
        self.saved_cursor = clamp_cursor(self.saved_cursor, cols, rows);
    }

    fn step(&mut self, c: char) {
        match self.state {
            State::Text => match c {
                '\u{07}' | '\u{9c}' => self.state = State::Ground,
                ESC => self.state = State::TextEscape,
                '\u{18}' | '\u{1a}' => self.state = State::Ground,
                _ => {}
            },
            State::TextEscape => {
                if c == '\\' {
                    self.state = State::Ground;
                } else {
                    self.state = State::Escape;
                    self.step(c);
                }
            }
            _ if c == ESC => self.state = State::Escape,
            _ if c == '\u{18}' || c == '\u{1a}' => self.state = State::Ground,
            _ if is_c0(c) => self.control(c),
            _ if is_c1(c) => self.c1(c),
            State::Ground => {
                if c != '\u{7f}' {
                    self.print(c);
                }
            }
            State::Escape => self.escape(c),
            State::EscapeIntermediate => {
                if !('\u{20}'..='\u{2f}').contains(&c) {
                    self.state = State::Ground;
                }
            }
            State::Csi => self.csi(c),
        }
    }

    /// C1 controls as code points: the string and CSI introducers act as their ESC forms;
    /// the rest are dropped.
    fn c1(&mut self, c: char) {
        self.state = match c {
            '\u{9b}' => {
                self.start_csi();
                State::Csi
            }
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => State::Text,
            _ => State::Ground,
        };
    }

    fn control(&mut self, c: char) {
        match c {
            '\r' => self.cursor.col = 0,
            '\n' | '\u{0b}' | '\u{0c}' => {
                self.cursor.col = self.cursor.col.min(self.cols - 1);
                self.line_feed();
            }
            '\u{08}' => self.cursor.col = self.cursor.col.min(self.cols - 1).saturating_sub(1),
            '\t' => {
                let col = self.cursor.col.min(self.cols - 1);
                self.cursor.col = ((col / TAB_WIDTH + 1) * TAB_WIDTH).min(self.cols - 1);
            }
            _ => {} // BEL, NUL, SO/SI and the rest: nothing visible.
        }
    }

    fn escape(&mut self, c: char) {
        self.state = State::Ground;
        match c {
            '[' => {
                self.start_csi();
                self.state = State::Csi;
            }
            ']' | 'P' | 'X' | '^' | '_' => self.state = State::Text,
            '\u{20}'..='\u{2f}' => self.state = State::EscapeIntermediate,
            '7' => self.saved_cursor = self.cursor,
            '8' => self.cursor = clamp_cursor(self.saved_cursor, self.cols, self.rows),
            'D' => self.line_feed(),
            'E' => {
                self.cursor.col = 0;
                self.line_feed();
            }
            'M' => self.reverse_index(),
            'c' => self.reset(),
            _ => {}
        }
    }

    fn start_csi(&mut self) {
        self.params.clear();
        self.param = None;
        self.private_marker = None;
        self.intermediates = false;
    }

    fn csi(&mut self, c: char) {
        match c {
            '0'..='9' => {
                let digit = c as u32 - '0' as u32;
                let value = self
                    .param
                    .unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(digit);
                self.param = Some(value.min(MAX_PARAM_VALUE));
            }
            ';' | ':' => {
                if self.params.len() < MAX_PARAMS {
                    self.params.push(self.param.unwrap_or(0));
                }
                self.param = None;
            }
            '<' | '=' | '>' | '?' => {
                if self.params.is_empty() && self.param.is_none() {
                    self.private_marker = Some(c);
                } else {
                    self.intermediates = true; // malformed: ignore the whole sequence
                }
            }
            '\u{20}'..='\u{2f}' => self.intermediates = true,
            '\u{40}'..='\u{7e}' => {
                if self.params.len() < MAX_PARAMS {
                    if let Some(value) = self.param.take() {
                        self.params.push(value);
                    }
                }
                self.state = State::Ground;
                self.dispatch_csi(c);
            }
            _ => self.state = State::Ground, // not part of any CSI: abandon it
        }
    }

    /// The n-th parameter, with 0 or missing meaning `default`.
    fn count(&self, index: usize, default: usize) -> usize {
        match self.params.get(index) {
            Some(&value) if value > 0 => value as usize,
            _ => default,
        }
    }

    fn dispatch_csi(&mut self, final_byte: char) {
        if self.intermediates {
            return;
        }
        match self.private_marker {
            None => {}
            Some('?') => return self.private_mode(final_byte),
            Some(_) => return,
        }
        let (cols, rows) = (self.cols, self.rows);
        let n = self.count(0, 1);
        let col = self.cursor.col.min(cols - 1);
        match final_byte {
            'm' => apply_sgr_codes(&mut self.pen, &self.params),
            'A' => {
                self.cursor = Cursor {
                    row: self.cursor.row.saturating_sub(n),
                    col,
                }
            }
            'B' | 'e' => {
                self.cursor = Cursor {
                    row: (self.cursor.row + n).min(rows - 1),
                    col,
                }
            }
            'C' | 'a' => self.cursor.col = (col + n).min(cols - 1),
            'D' => self.cursor.col = col.saturating_sub(n),
            'E' => {
                self.cursor = Cursor {
                    row: (self.cursor.row + n).min(rows - 1),
                    col: 0,
                }
            }
            'F' => {
                self.cursor = Cursor {
                    row: self.cursor.row.saturating_sub(n),
                    col: 0,
                }
            }
            'G' | '`' => self.cursor.col = (n - 1).min(cols - 1),
            'd' => {
                self.cursor = Cursor {
                    row: (n - 1).min(rows - 1),
                    col,
                }
            }
            'H' | 'f' => {
                let row = (self.count(0, 1) - 1).min(rows - 1);
                let col = (self.count(1, 1) - 1).min(cols - 1);
                self.cursor = Cursor { row, col };
            }
            'J' => self.erase_display(self.params.first().copied().unwrap_or(0)),
            'K' => self.erase_line(self.params.first().copied().unwrap_or(0)),
            'X' => {
                let row = &mut self.grid[self.cursor.row];
                for cell in row.cells.iter_mut().skip(col).take(n) {
                    *cell = BLANK;
                }
            }
            'P' => {
                let row = &mut self.grid[self.cursor.row];
                if col < row.cells.len() {
                    let end = (col + n).min(row.cells.len());
                    row.cells.drain(col..end);
                }
                row.wrapped = false;
                self.cursor.col = col;
            }
            '@' => {
                let row = &mut self.grid[self.cursor.row];
                if col < row.cells.len() {
                    let blanks = n.min(cols - col);
                    row.cells
                        .splice(col..col, std::iter::repeat(BLANK).take(blanks));
                    row.cells.truncate(cols);
                }
                self.cursor.col = col;
            }
            'L' => {
                let at = self.cursor.row;
                for _ in 0..n.min(rows - at) {
                    self.grid.pop();
                    self.grid.insert(at, Row::default());
                }
                self.cursor.col = 0;
            }
            'M' => {
                let at = self.cursor.row;
                for _ in 0..n.min(rows - at) {
                    self.grid.remove(at);
                    self.grid.push(Row::default());
                }
                self.cursor.col = 0;
            }
            'S' => (0..n.min(rows)).for_each(|_| self.scroll_up()),
            'T' => {
                for _ in 0..n.min(rows) {
                    self.grid.pop();
                    self.grid.insert(0, Row::default());
                }
            }
            's' => self.saved_cursor = self.cursor,
            'u' => self.cursor = clamp_cursor(self.saved_cursor, cols, rows),
            _ => {} // SGR, modes, DECSTBM, device queries, ...: dropped.
        }
    }

    /// `CSI ? Pm h|l`: only the alternate-screen modes change what is visible.
    fn private_mode(&mut self, final_byte: char) {
        let on = match final_byte {
            'h' => true,
            'l' => false,
            _ => return,
        };
        for mode in &self.params {
            match mode {
                25 => self.cursor_visible = on,
                2004 => self.bracketed_paste = on,
                1 => self.application_cursor = on,
                _ => {}
            }
        }
        let alternate = |p: &u32| matches!(*p, 47 | 1047 | 1049);
        let Some(&mode) = self.params.iter().find(|p| alternate(p)) else {
            return;
        };
        match final_byte {
            'h' if self.main.is_none() => {
                if mode == 1049 {
                    self.saved_cursor = self.cursor;
                }
                let grid = std::mem::replace(&mut self.grid, vec![Row::default(); self.rows]);
                self.main = Some(MainScreen {
                    grid,
                    cursor: self.cursor,
                });
            }
            'l' => {
                if let Some(main) = self.main.take() {
                    self.grid = main.grid;
                    self.cursor = if mode == 1049 {
                        self.saved_cursor
                    } else {
                        main.cursor
                    };
                    self.cursor = clamp_cursor(self.cursor, self.cols, self.rows);
                }
            }
            _ => {}
        }
    }

    fn erase_display(&mut self, mode: u32) {
        let (row, col) = (self.cursor.row, self.cursor.col.min(self.cols));
        match mode {
            0 => {
                self.grid[row].cells.truncate(col);
                self.grid[row].wrapped = false;
                self.grid[row + 1..]
                    .iter_mut()
                    .for_each(|r| *r = Row::default());
            }
            1 => {
                self.grid[..row]
                    .iter_mut()
                    .for_each(|r| *r = Row::default());
                blank_through(&mut self.grid[row], col);
            }
            2 => self.grid.iter_mut().for_each(|r| *r = Row::default()),
            3 => {
                self.history.clear();
                self.history_bytes = 0;
            }
            _ => {}
        }
    }

    fn erase_line(&mut self, mode: u32) {
        let col = self.cursor.col.min(self.cols);
        let row = &mut self.grid[self.cursor.row];
        match mode {
            0 => {
                row.cells.truncate(col);
                row.wrapped = false;
            }
            1 => blank_through(row, col),
            2 => *row = Row::default(),
            _ => {}
        }
    }

    fn print(&mut self, c: char) {
        if self.cursor.col >= self.cols {
            self.grid[self.cursor.row].wrapped = true;
            self.cursor.col = 0;
            self.line_feed();
        }
        let col = self.cursor.col;
        let cells = &mut self.grid[self.cursor.row].cells;
        let cell = Cell {
            ch: c,
            style: self.pen,
        };
        if cells.len() <= col {
            cells.resize(col, BLANK);
            cells.push(cell);
        } else {
            cells[col] = cell;
        }
        self.cursor.col += 1;
    }

    fn line_feed(&mut self) {
        if self.cursor.row + 1 < self.rows {
            self.cursor.row += 1;
        } else {
            self.scroll_up();
        }
    }

    fn reverse_index(&mut self) {
        if self.cursor.row > 0 {
            self.cursor.row -= 1;
        } else {
            self.grid.pop();
            self.grid.insert(0, Row::default());
        }
    }

    /// The top row leaves the screen: into history on the main screen, gone on the
    /// alternate one.
    fn scroll_up(&mut self) {
        let top = self.grid.remove(0);
        self.grid.push(Row::default());
        if self.main.is_none() {
            self.push_history(top);
        }
    }

    fn push_history(&mut self, row: Row) {
        let line = HistoryLine {
            text: row.text(),
            wrapped: row.wrapped,
        };
        self.history_bytes += line.text.len() + 1;
        self.history.push_back(line);
        while self.history_bytes > HISTORY_MAX_BYTES {
            match self.history.pop_front() {
                Some(old) => self.history_bytes -= old.text.len() + 1,
                None => break,
            }
        }
    }

    fn reset(&mut self) {
        let (cols, rows) = (self.cols as u16, self.rows as u16);
        let history = std::mem::take(&mut self.history);
        let history_bytes = self.history_bytes;
        *self = Screen::new(cols, rows);
        self.history = history;
        self.history_bytes = history_bytes;
    }
}

/// A row's cells as text with an SGR sequence wherever the style changes.
fn styled_row(row: &Row) -> String {
    let used = (row.cells.iter())
        .rposition(|cell| *cell != BLANK)
        .map_or(0, |i| i + 1);
    let mut text = String::new();
    let mut style = Style::default();
    for cell in &row.cells[..used] {
        if cell.style != style {
            style = cell.style;
            text.push_str(&style.sequence());
        }
        text.push(cell.ch);
    }
    if style != Style::default() {
        text.push_str(&Style::default().sequence());
    }
    text
}

fn is_c0(c: char) -> bool {
    (c as u32) < 0x20
}

fn is_c1(c: char) -> bool {
    (0x80..0xa0).contains(&(c as u32))
}

/// Blanks the cells of `row` up to and including `col`.
fn blank_through(row: &mut Row, col: usize) {
    let end = (col + 1).min(row.cells.len());
    row.cells[..end].iter_mut().for_each(|cell| *cell = BLANK);
}

fn clamp_cursor(cursor: Cursor, cols: usize, rows: usize) -> Cursor {
    Cursor {
        row: cursor.row.min(rows - 1),
        col: cursor.col.min(cols - 1),
    }
}

/// Resizes `grid` in place; returns the rows pushed off the top to keep the cursor shown.
fn resize_grid(grid: &mut Vec<Row>, cursor: &mut Cursor, cols: usize, rows: usize) -> Vec<Row> {
    for row in grid.iter_mut() {
        if row.cells.len() > cols {
            row.cells.truncate(cols);
            row.wrapped = false;
        }
    }
    let mut off_top = Vec::new();
    if grid.len() > rows {
        let from_top = (cursor.row + 1).saturating_sub(rows);
        off_top = grid.drain(..from_top).collect();
        cursor.row -= from_top;
        grid.truncate(rows);
    }
    grid.resize_with(rows, Row::default);
    *cursor = clamp_cursor(*cursor, cols, rows);
    off_top
}

/// Joins lines given last-first into text (a wrapped line joins the next without `\n`),
/// skipping trailing blank lines, and returns at most the last `max_chars` characters.
fn join_tail(lines_last_first: impl Iterator<Item = (String, bool)>, max_chars: usize) -> String {
    let mut pieces: Vec<String> = Vec::new();
    let mut chars = 0usize;
    for (text, wrapped) in lines_last_first {
        if pieces.is_empty() && text.is_empty() {
            continue;
        }
        if chars >= max_chars {
            break;
        }
        if !pieces.is_empty() && !wrapped {
            pieces.push("\n".to_string());
            chars += 1;
        }
        chars += text.chars().count();
        pieces.push(text);
    }
    let text: String = pieces.into_iter().rev().collect();
    let total = text.chars().count();
    if total <= max_chars {
        return text;
    }
    match text.char_indices().nth(total - max_chars) {
        Some((start, _)) => text[start..].to_string(),
        None => String::new(),
    }
}

/// Decodes `bytes`, after the unfinished character `carry` holds from the last chunk,
/// calling `step` for each character: an invalid sequence is one U+FFFD, and an
/// unfinished one at the end is kept in `carry` for the next chunk.
pub(super) fn decode_utf8(carry: &mut Vec<u8>, bytes: &[u8], mut step: impl FnMut(char)) {
    let joined;
    let mut rest: &[u8] = if carry.is_empty() {
        bytes
    } else {
        carry.extend_from_slice(bytes);
        joined = std::mem::take(carry);
        &joined
    };
    loop {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                text.chars().for_each(&mut step);
                return;
            }
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                if let Ok(text) = std::str::from_utf8(valid) {
                    text.chars().for_each(&mut step);
                }
                match error.error_len() {
                    None => {
                        *carry = after.to_vec();
                        return;
                    }
                    Some(len) => {
                        step(char::REPLACEMENT_CHARACTER);
                        rest = &after[len..];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen_after(cols: u16, rows: u16, input: &[u8]) -> Screen {
        let mut screen = Screen::new(cols, rows);
        screen.feed(input);
        screen
    }

    fn text(input: &str) -> String {
        screen_after(80, 24, input.as_bytes()).text()
    }

    /// What an agent may receive: no control characters except newline.
    fn assert_inert(text: &str) {
        for c in text.chars() {
            assert!(
                c == '\n' || !(is_c0(c) || is_c1(c) || c == '\u{7f}'),
                "{c:?} in {text:?}"
            );
        }
    }

    #[test]
    fn plain_lines_and_crlf() {
        assert_eq!(text("hello\r\nworld\r\n"), "hello\nworld");
    }

    #[test]
    fn bare_line_feed_keeps_the_column() {
        assert_eq!(text("ab\ncd"), "ab\n  cd");
    }

    #[test]
    fn carriage_return_overwrites() {
        assert_eq!(text("progress 10%\rprogress 100%\r\n"), "progress 100%");
        assert_eq!(text("SAFE\rEV"), "EVFE");
    }

    #[test]
    fn backspace_moves_left_and_stops_at_margin() {
        assert_eq!(text("abc\x08\x08X"), "aXc");
        assert_eq!(text("\x08\x08\x08x"), "x");
    }

    #[test]
    fn tab_goes_to_next_stop() {
        assert_eq!(text("a\tb"), "a       b");
        assert_eq!(text("12345678\tb"), "12345678        b");
        assert_eq!(screen_after(10, 2, b"a\t\t\tb").text(), "a        b");
    }

    #[test]
    fn trailing_spaces_and_blank_rows_are_trimmed() {
        assert_eq!(text("a   \r\n\r\n\r\n"), "a");
        assert_eq!(text("a\r\n\r\nb"), "a\n\nb");
    }

    #[test]
    fn long_lines_wrap_and_join_back() {
        let screen = screen_after(5, 3, b"abcdefghij\r\nxy");
        assert_eq!(screen.text(), "abcdefghij\nxy");
        assert_eq!(screen.grid[0].text(), "abcde");
        assert_eq!(screen.grid[1].text(), "fghij");
    }

    #[test]
    fn wrap_is_pending_until_the_next_character() {
        // Exactly filling a row and then CR LF gives one line, not an empty extra one.
        assert_eq!(screen_after(5, 3, b"abcde\r\nz").text(), "abcde\nz");
        // A space at the wrap point is kept inside the joined line.
        assert_eq!(screen_after(5, 3, b"abcd  xyz").text(), "abcd  xyz");
    }

    #[test]
    fn scrolling_moves_lines_to_history() {
        let screen = screen_after(10, 2, b"one\r\ntwo\r\nthree\r\nfour");
        assert_eq!(screen.text(), "three\nfour");
        assert_eq!(screen.tail(usize::MAX), "one\ntwo\nthree\nfour");
        assert_eq!(screen.tail(8), "ree\nfour");
        assert_eq!(screen.tail(0), "");
    }

    #[test]
    fn erase_in_line() {
        assert_eq!(text("abcdef\x1b[3D\x1b[K"), "abc");
        assert_eq!(text("abcdef\x1b[3D\x1b[1K"), "    ef");
        assert_eq!(text("abcdef\x1b[2Kxy"), "      xy");
        assert_eq!(text("abcdef\x1b[0K!"), "abcdef!");
    }

    #[test]
    fn erase_in_display() {
        assert_eq!(text("one\r\ntwo\r\nthree\x1b[2;2H\x1b[J"), "one\nt");
        assert_eq!(text("one\r\ntwo\r\nthree\x1b[2;2H\x1b[1J"), "\n  o\nthree");
        assert_eq!(text("one\r\ntwo\x1b[2J"), "");
        assert_eq!(text("one\r\ntwo\x1b[H\x1b[2Jhome"), "home");
    }

    #[test]
    fn clear_scrollback_drops_history() {
        let mut screen = screen_after(10, 2, b"a\r\nb\r\nc\r\nd");
        assert_eq!(screen.tail(100), "a\nb\nc\nd");
        screen.feed(b"\x1b[H\x1b[2J\x1b[3Jnew");
        assert_eq!(screen.tail(100), "new");
    }

    #[test]
    fn cursor_movements() {
        assert_eq!(text("line1\r\nline2\x1b[AX"), "line1X\nline2");
        assert_eq!(text("a\x1b[2Bb"), "a\n\n b");
        assert_eq!(text("a\x1b[5Cb"), "a     b");
        assert_eq!(text("abcdef\x1b[10GX\x1b[2GY"), "aYcdef   X");
        assert_eq!(text("x\x1b[3;4Hy"), "x\n\n   y");
        assert_eq!(text("x\x1b[3dy"), "x\n\n y");
        assert_eq!(text("one\r\ntwo\x1b[FZ"), "Zne\ntwo");
        assert_eq!(text("one\x1b[2EZ"), "one\n\nZ");
        assert_eq!(text("abc\x1b[Hz"), "zbc");
    }

    #[test]
    fn movements_are_clamped_to_the_screen() {
        let screen = screen_after(10, 3, b"\x1b[999;999Hx\x1b[999Ay\x1b[65535Dz");
        assert_eq!(screen.text(), "z        y\n\n         x");
        // Parameters beyond any range saturate instead of overflowing.
        let screen = screen_after(10, 3, b"\x1b[99999999999999999999999Cq");
        assert_eq!(screen.text(), "         q");
    }

    #[test]
    fn save_and_restore_cursor() {
        assert_eq!(text("ab\x1b7\r\ncd\x1b8X"), "abX\ncd");
        assert_eq!(text("ab\x1b[s\r\ncd\x1b[uY"), "abY\ncd");
    }

    #[test]
    fn insert_delete_and_erase_characters() {
        assert_eq!(text("abcdef\x1b[4G\x1b[2P"), "abcf");
        assert_eq!(text("abcdef\x1b[2G\x1b[3@"), "a   bcdef");
        assert_eq!(text("abcdef\x1b[2G\x1b[2X"), "a  def");
        assert_eq!(screen_after(6, 2, b"abcdef\x1b[1G\x1b[2@").text(), "  abcd");
    }

    #[test]
    fn insert_and_delete_lines() {
        assert_eq!(
            text("one\r\ntwo\r\nthree\x1b[2H\x1b[L"),
            "one\n\ntwo\nthree"
        );
        assert_eq!(text("one\r\ntwo\r\nthree\x1b[2H\x1b[M"), "one\nthree");
        assert_eq!(screen_after(5, 3, b"a\r\nb\r\nc\x1b[2S").text(), "c");
        assert_eq!(screen_after(5, 3, b"a\r\nb\r\nc\x1b[T").text(), "\na\nb");
    }

    #[test]
    fn reverse_index_at_top_scrolls_down() {
        assert_eq!(screen_after(5, 3, b"a\r\nb\x1b[H\x1bMz").text(), "z\na\nb");
    }

    #[test]
    fn alternate_screen_is_shown_then_the_main_screen_returns() {
        let mut screen = screen_after(20, 4, b"$ less file\r\n");
        screen.feed(b"\x1b[?1049h\x1b[Hfull-screen page");
        assert!(screen.alternate());
        assert_eq!(screen.text(), "full-screen page");
        screen.feed(b"\x1b[?1049l$ ");
        assert_eq!(screen.text(), "$ less file\n$");
        assert!(!screen.tail(1000).contains("full-screen"));
    }

    #[test]
    fn osc_titles_and_clipboard_are_dropped() {
        let out = text("a\x1b]0;EVIL-TITLE\x07b\x1b]2;T2\x1b\\c\x1b]52;c;SGVsbG8=\x07d");
        assert_eq!(out, "abcd");
        // OSC 8 hyperlink: the link text stays, the URI does not.
        assert_eq!(
            text("\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"),
            "click"
        );
    }

    #[test]
    fn dcs_sos_pm_apc_are_dropped() {
        assert_eq!(text("a\x1bPq#0;2;0;0;0#1~~\x1b\\b"), "ab");
        assert_eq!(
            text("a\x1bXsos\x1b\\b\x1b^pm\x1b\\c\x1b_apc\x1b\\d"),
            "abcd"
        );
    }

    #[test]
    fn sgr_modes_and_queries_are_dropped() {
        assert_eq!(text("\x1b[1;31mred\x1b[0m \x1b[38;5;196mx\x1b[m"), "red x");
        assert_eq!(
            text("\x1b[?25l\x1b[?2004h\x1b[4hok\x1b[6n\x1b[c\x1b[>c\x1b[1;5r"),
            "ok"
        );
        assert_eq!(text("\x1b[38:2:1:2:3mrgb"), "rgb");
        assert_eq!(text("\x1b(B\x1b)0\x1b#8\x1b=\x1b>x"), "x");
    }

    #[test]
    fn styles_are_kept_per_cell_for_the_view_only() {
        let screen = screen_after(
            20,
            3,
            b"a\x1b[31mred\x1b[0m \x1b[1;7mx\x1b[m  \r\n\x1b[44m  ",
        );
        assert_eq!(screen.text(), "ared x");
        let red = "\x1b[0;38;2;205;0;0m";
        let (rows, _) = screen.rows_and_cursor();
        assert_eq!(
            rows,
            format!("a{red}red\x1b[0m \x1b[0;1;7mx\x1b[0m\n\x1b[0;48;2;0;0;238m  \x1b[0m")
        );
    }

    #[test]
    fn cursor_visibility_and_bracketed_paste_are_tracked() {
        let screen = screen_after(10, 4, b"ab\r\ncd");
        assert_eq!(
            screen.rows_and_cursor(),
            ("ab\ncd".to_string(), Some((1, 2)))
        );
        assert!(!screen.bracketed_paste());
        assert!(!screen.application_cursor());
        let screen = screen_after(10, 4, b"\x1b[?2004h\x1b[?25l\x1b[3;1Hx");
        assert_eq!(screen.rows_and_cursor(), ("\n\nx".to_string(), None));
        assert!(screen.bracketed_paste());
        assert!(screen_after(10, 2, b"\x1b[?1h").application_cursor());
        assert!(!screen_after(10, 2, b"\x1b[?1h\x1b[?1l").application_cursor());
        let screen = screen_after(3, 2, b"\x1b[?2004h\x1b[?1;2004labc");
        assert!(!screen.bracketed_paste());
        // A full row leaves the wrap pending: the cursor stays on the last column.
        assert_eq!(screen.rows_and_cursor(), ("abc".to_string(), Some((0, 2))));
        let screen = screen_after(10, 2, b"\x1b[?2004h\x1b[?25l\x1bc");
        assert_eq!(
            (screen.bracketed_paste(), screen.rows_and_cursor().1),
            (false, Some((0, 0)))
        );
    }

    #[test]
    fn c1_controls_are_never_output() {
        let out = text("a\u{9b}31mb\u{9d}0;title\u{9c}c\u{85}d\u{90}dcs\u{9c}e");
        assert_eq!(out, "abcde");
        // Raw C1 bytes are not UTF-8: they show as replacement characters, inertly.
        let screen = screen_after(80, 2, b"x\x9b2Jy");
        assert_eq!(screen.text(), "x\u{fffd}2Jy");
    }

    #[test]
    fn other_c0_controls_and_del_are_dropped() {
        assert_eq!(text("a\x00b\x07c\x0e\x0fd\x7fe\x05f"), "abcdef");
    }

    #[test]
    fn cancel_aborts_a_sequence() {
        assert_eq!(text("a\x1b[12\x18b"), "ab");
        assert_eq!(text("a\x1b]0;title\x1ab"), "ab");
    }

    #[test]
    fn escape_inside_a_string_starts_a_new_sequence() {
        assert_eq!(text("\x1b]0;t\x1b[31mred"), "red");
    }

    #[test]
    fn unterminated_osc_swallows_like_a_terminal() {
        let mut screen = screen_after(80, 2, b"before\x1b]52;c;AAAA");
        screen.feed(b"BBBB more payload");
        assert_eq!(screen.text(), "before");
        screen.feed(b"\x07after");
        assert_eq!(screen.text(), "beforeafter");
    }

    #[test]
    fn sequences_split_across_chunks() {
        let input = "x\x1b]0;title\x07\x1b[31my\x1b[0m é€𝄞".as_bytes();
        for split in 0..input.len() {
            let mut screen = Screen::new(80, 2);
            screen.feed(&input[..split]);
            screen.feed(&input[split..]);
            assert_eq!(screen.text(), "xy é€𝄞", "split at {split}");
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        let screen = screen_after(80, 2, b"a\xffb\xc3(c\xed\xa0\x80d\xf0\x9f\x98");
        let out = screen.text();
        assert!(out.starts_with("a\u{fffd}b\u{fffd}(c\u{fffd}"), "{out:?}");
        assert!(out.contains('d'), "{out:?}");
        assert_inert(&out);
    }

    #[test]
    fn malformed_csi_is_ignored() {
        assert_eq!(text("a\x1b[1?2Jb"), "ab");
        assert_eq!(text("a\x1b[1 qb"), "ab");
        assert_eq!(text("a\x1b[1é"), "a");
        let many_params = format!("a\x1b[{}mb", "1;".repeat(10_000));
        assert_eq!(text(&many_params), "ab");
    }

    #[test]
    fn full_reset_clears_the_screen() {
        assert_eq!(text("junk\r\nmore\x1bcclean"), "clean");
    }

    #[test]
    fn history_is_bounded() {
        let mut screen = Screen::new(80, 4);
        let line = format!("{}\r\n", "x".repeat(79));
        for _ in 0..20_000 {
            screen.feed(line.as_bytes());
        }
        assert!(screen.history_bytes <= HISTORY_MAX_BYTES);
        let all = screen.tail(usize::MAX);
        assert!(all.len() <= HISTORY_MAX_BYTES + 80 * 4, "{}", all.len());
        assert!(all.len() > HISTORY_MAX_BYTES - 200);
    }

    #[test]
    fn tail_counts_characters_not_bytes() {
        let screen = screen_after(80, 4, "ééé\r\nüüü".as_bytes());
        assert_eq!(screen.tail(5), "é\nüüü");
    }

    #[test]
    fn resize_keeps_the_cursor_row_visible() {
        let mut screen = screen_after(10, 4, b"a\r\nb\r\nc\r\nd");
        screen.resize(10, 2);
        assert_eq!(screen.text(), "c\nd");
        assert_eq!(screen.tail(100), "a\nb\nc\nd");
        screen.resize(3, 3);
        screen.feed(b"xyz");
        assert_eq!(screen.text(), "c\ndxyz");
        assert_eq!(screen.grid[2].text(), "z");
    }

    #[test]
    fn random_bytes_never_panic_and_stay_inert() {
        // Deterministic xorshift, biased towards the bytes that drive the parser.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        const INTERESTING: &[u8] = b"\x1b\x1b[[]]?;;0123456789\x07\x08\t\r\n\\PX^_HfmABCDEFGJKLMPSTXdehlsu@`c78\xc2\x9b\x9c\xe2\x82\xac\xff ";
        let mut screen = Screen::new(7, 3);
        for round in 0..2_000 {
            let len = (next() % 64) as usize;
            let chunk: Vec<u8> = (0..len)
                .map(|_| match next() % 3 {
                    0 => (next() & 0xff) as u8,
                    _ => INTERESTING[(next() as usize) % INTERESTING.len()],
                })
                .collect();
            screen.feed(&chunk);
            if round % 97 == 0 {
                screen.resize((next() % 12) as u16, (next() % 6) as u16);
            }
        }
        assert_inert(&screen.tail(usize::MAX));
        assert_inert(&screen.text());
    }

    #[test]
    fn hostile_mix_is_inert() {
        let hostile: &[u8] = b"\x1b]52;c;SGVsbG8=\x07\x1b]0;pwned\x07\x1b[2J\x1b[H\x1b[?1049h\
            \x1b[6n\x1bP$q\"p\x1b\\\x9b\x9d\xc2\x9b31m\x1b[999Bend\x00\x1b";
        let out = screen_after(40, 5, hostile).tail(10_000);
        assert_inert(&out);
        assert!(
            !out.contains("SGVsbG8") && !out.contains("pwned"),
            "{out:?}"
        );
    }
}
