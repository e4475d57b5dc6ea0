//! SGR (Select Graphic Rendition, `CSI … m`): the small closed set of attributes the
//! view draws — foreground, background, bold, underline, inverse — with colours as RGB
//! (16 and 256 colours through xterm's palette, truecolor as given). Shared by the PTY
//! screen model (which keeps a style per cell) and the view's runs (which parse tmux's
//! `capture-pane -e`), so both read SGR the same way.

/// The attributes of a run. `None` colours are the page's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Style {
    /// Foreground colour; `None` is the default.
    pub fg: Option<[u8; 3]>,
    /// Background colour; `None` is the default.
    pub bg: Option<[u8; 3]>,
    /// Bold.
    pub bold: bool,
    /// Underlined.
    pub underline: bool,
    /// Foreground and background swapped.
    pub inverse: bool,
}

impl Style {
    /// The SGR sequence that sets exactly this style from any other (`ESC [ 0 … m`).
    pub fn sequence(&self) -> String {
        let mut codes = String::from("0");
        for (on, code) in [
            (self.bold, ";1"),
            (self.underline, ";4"),
            (self.inverse, ";7"),
        ] {
            if on {
                codes.push_str(code);
            }
        }
        for (colour, layer) in [(self.fg, 38), (self.bg, 48)] {
            if let Some([r, g, b]) = colour {
                codes.push_str(&format!(";{layer};2;{r};{g};{b}"));
            }
        }
        format!("\u{1b}[{codes}m")
    }
}

/// Applies one SGR parameter list (`;` or `:` separated; empty means 0) to `style`.
pub fn apply_sgr(style: &mut Style, params: &str) {
    if params.starts_with(['<', '=', '>', '?']) {
        return; // a private sequence that happens to end in `m`
    }
    let codes: Vec<u32> = params
        .split([';', ':'])
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    apply_sgr_codes(style, &codes);
}

/// Applies SGR parameters (none means 0, a reset) to `style`.
pub fn apply_sgr_codes(style: &mut Style, codes: &[u32]) {
    if codes.is_empty() {
        *style = Style::default();
    }
    let mut i = 0;
    while i < codes.len() {
        match codes[i] {
            0 => *style = Style::default(),
            1 => style.bold = true,
            22 => style.bold = false,
            4 => style.underline = true,
            24 => style.underline = false,
            7 => style.inverse = true,
            27 => style.inverse = false,
            code @ 30..=37 => style.fg = Some(palette(code - 30)),
            39 => style.fg = None,
            code @ 40..=47 => style.bg = Some(palette(code - 40)),
            49 => style.bg = None,
            code @ 90..=97 => style.fg = Some(palette(code - 90 + 8)),
            code @ 100..=107 => style.bg = Some(palette(code - 100 + 8)),
            code @ (38 | 48) => {
                let (colour, used) = extended_colour(&codes[i + 1..]);
                i += used;
                if let Some(colour) = colour {
                    if code == 38 {
                        style.fg = Some(colour);
                    } else {
                        style.bg = Some(colour);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// `5;N` (256 colours) or `2;R;G;B` (truecolor) after a 38/48: the colour and how many
/// parameters it used.
fn extended_colour(rest: &[u32]) -> (Option<[u8; 3]>, usize) {
    let byte = |v: u32| u8::try_from(v).ok();
    match rest {
        [5, n, ..] => (byte(*n).map(|n| palette(u32::from(n))), 2),
        [2, r, g, b, ..] => match (byte(*r), byte(*g), byte(*b)) {
            (Some(r), Some(g), Some(b)) => (Some([r, g, b]), 4),
            _ => (None, 4),
        },
        _ => (None, rest.len()),
    }
}

/// xterm's 256-colour palette (0–15 its default 16 colours).
fn palette(index: u32) -> [u8; 3] {
    const SIXTEEN: [[u8; 3]; 16] = [
        [0x00, 0x00, 0x00],
        [0xcd, 0x00, 0x00],
        [0x00, 0xcd, 0x00],
        [0xcd, 0xcd, 0x00],
        [0x00, 0x00, 0xee],
        [0xcd, 0x00, 0xcd],
        [0x00, 0xcd, 0xcd],
        [0xe5, 0xe5, 0xe5],
        [0x7f, 0x7f, 0x7f],
        [0xff, 0x00, 0x00],
        [0x00, 0xff, 0x00],
        [0xff, 0xff, 0x00],
        [0x5c, 0x5c, 0xff],
        [0xff, 0x00, 0xff],
        [0x00, 0xff, 0xff],
        [0xff, 0xff, 0xff],
    ];
    const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];
    match index {
        0..=15 => SIXTEEN[index as usize],
        16..=231 => {
            let n = (index - 16) as usize;
            [CUBE[n / 36], CUBE[(n / 6) % 6], CUBE[n % 6]]
        }
        _ => {
            let level = 8 + 10 * (index.min(255) - 232) as u8;
            [level, level, level]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_style_round_trips_through_its_sequence() {
        let style = Style {
            fg: Some([1, 2, 3]),
            bg: Some([255, 0, 9]),
            bold: true,
            underline: false,
            inverse: true,
        };
        let mut read = Style::default();
        let sequence = style.sequence();
        apply_sgr(&mut read, &sequence[2..sequence.len() - 1]);
        assert_eq!(read, style);
        let mut reset = style;
        apply_sgr_codes(&mut reset, &[]);
        assert_eq!(reset, Style::default());
    }
}
