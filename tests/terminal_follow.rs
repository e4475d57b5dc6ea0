//! Terminals agents follow and steer, through the real `serve` on both backends (PTY, and
//! real tmux where it is installed; skipped with a notice otherwise): `terminal_read` with
//! `since` returns every line of 100,000 once, in order, and says in `lost` what the
//! history no longer held; `search` finds three error lines among 50,000 with their
//! numbers and context; `terminal_input` with `keys` steers `less`, Python's REPL and
//! `vim`; unknown key names are refused; hostile output reads as plain text.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::*;

/// Bytes of one `L0000000` line as the program's terminal writes it (`\r\n`).
const LINE_BYTES: u64 = 10;

/// A serve with an agent `me` on `backend`, and a shell terminal at its prompt; `None`
/// (with a notice) for tmux where it is not installed.
fn terminal_on(backend: &str, name: &str) -> Option<(Dirs, Serve, String)> {
    if backend == "tmux" && !tmux_installed() {
        eprintln!("tmux is not installed: skipping {name} on tmux");
        return None;
    }
    let dirs = Dirs::new(&format!("{name}-{backend}"));
    let serve = Serve::start(&dirs, &["--terminals", backend, "--agent", "me"]);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    screen_until(&serve, &dirs, &term, "the first prompt", at_prompt);
    Some((dirs, serve, term))
}

/// Whether `program` is found on PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The shell (`sh`) waits at its prompt: `$`, or `#` for root.
fn at_prompt(screen: &str) -> bool {
    screen.ends_with('$') || screen.ends_with('#')
}

fn screen(serve: &Serve, dirs: &Dirs, term: &str) -> String {
    let read = serve.ok(dirs, "me", "terminal_read", json!({"nodeId": term}));
    read["output"].as_str().unwrap().to_string()
}

fn screen_until(
    serve: &Serve,
    dirs: &Dirs,
    term: &str,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> String {
    let mut last = String::new();
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        poll(what, Duration::from_secs(15), || {
            last = screen(serve, dirs, term);
            wanted(last.trim_end()).then(|| last.clone())
        })
    }));
    found.unwrap_or_else(|_| panic!("timed out waiting for {what}; the screen:\n{last}"))
}

fn cursor(serve: &Serve, dirs: &Dirs, term: &str) -> u64 {
    let read = serve.ok(dirs, "me", "terminal_read", json!({"nodeId": term}));
    read["cursor"]
        .as_u64()
        .unwrap_or_else(|| panic!("no cursor: {read}"))
}

fn submit(serve: &Serve, dirs: &Dirs, term: &str, command: &str) {
    serve.ok(
        dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": command}),
    );
}

fn press(serve: &Serve, dirs: &Dirs, term: &str, text: Option<&str>, keys: &[&str]) {
    let mut args = json!({"nodeId": term});
    if !keys.is_empty() {
        args["keys"] = json!(keys);
    }
    if let Some(text) = text {
        args["text"] = json!(text);
    }
    serve.ok(dirs, "me", "terminal_input", args);
}

/// What reads since a cursor returned of lines `<prefix>NNNNNNN`, checked as it goes:
/// each number once, in order, and a gap only where the read said `lost` (at least the
/// gap's bytes, and at most one partial line and a command line more).
#[derive(Default)]
struct Followed {
    last: Option<u64>,
    seen: u64,
    lost_lines: u64,
    reads: u64,
    lost_reads: u64,
    pending: String,
}

impl Followed {
    fn take(&mut self, prefix: char, read: &Value) {
        self.reads += 1;
        let lost = read["lost"].as_u64().unwrap();
        let mut gap_allowed = lost > 0;
        if gap_allowed {
            self.lost_reads += 1;
            self.pending.clear(); // a read after a loss starts at a whole line
        }
        let text = format!("{}{}", self.pending, read["output"].as_str().unwrap());
        let mut lines: Vec<&str> = text.split('\n').collect();
        self.pending = lines.pop().unwrap_or("").to_string();
        for line in lines {
            let Some(number) = line
                .strip_prefix(prefix)
                .filter(|digits| digits.len() == 7)
                .and_then(|digits| digits.parse::<u64>().ok())
            else {
                continue; // the prompt, the command line
            };
            let expected = self.last.map_or(0, |last| last + 1);
            if number != expected {
                assert!(
                    gap_allowed && number > expected,
                    "{prefix}{number:07} after {:?} without a loss said (lost {lost})",
                    self.last
                );
                let gap = number - expected;
                assert!(
                    lost >= gap * LINE_BYTES && lost < gap * LINE_BYTES + 300,
                    "{gap} lines missing, lost {lost}"
                );
                self.lost_lines += gap;
            }
            gap_allowed = false;
            self.last = Some(number);
            self.seen += 1;
        }
    }
}

/// Reads `term` since `from` until line `<prefix><last>` came, checking each read.
fn follow(serve: &Serve, dirs: &Dirs, term: &str, from: u64, prefix: char, last: u64) -> Followed {
    let mut followed = Followed::default();
    let mut since = from;
    let deadline = Instant::now() + Duration::from_secs(90);
    while followed.last != Some(last) {
        assert!(Instant::now() < deadline, "still at {:?}", followed.last);
        let read = serve.ok(
            dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "since": since, "maxChars": 100_000}),
        );
        assert!(read["output"].as_str().unwrap().chars().count() <= 100_000);
        let cursor = read["cursor"].as_u64().unwrap();
        assert!(cursor >= since, "{cursor} < {since}");
        if cursor == since {
            std::thread::sleep(Duration::from_millis(20));
        }
        followed.take(prefix, &read);
        since = cursor;
    }
    // Nothing more, nothing again.
    std::thread::sleep(Duration::from_millis(300));
    let again = serve.ok(
        dirs,
        "me",
        "terminal_read",
        json!({"nodeId": term, "since": since}),
    );
    assert!(
        !again["output"].as_str().unwrap().contains(prefix),
        "{again}"
    );
    assert_eq!(again["lost"], 0);
    followed
}

#[test]
fn reads_since_a_cursor_return_every_line_once_and_say_what_was_lost() {
    for backend in ["pty", "tmux"] {
        let Some((dirs, serve, term)) = terminal_on(backend, "follow") else {
            continue;
        };
        // Followed as it runs: whatever the reader missed, it is told.
        let from = cursor(&serve, &dirs, &term);
        submit(&serve, &dirs, &term, "seq -f 'L%07g' 0 99999");
        let live = follow(&serve, &dirs, &term, from, 'L', 99_999);
        println!(
            "{backend}: 100,000 lines followed in {} reads: {} seen, {} lost in {} reads",
            live.reads, live.seen, live.lost_lines, live.lost_reads
        );
        assert_eq!(live.seen + live.lost_lines, 100_000);

        // 3,000,000 bytes written before the next read: more than the history holds.
        let from = cursor(&serve, &dirs, &term);
        let ran = serve.ok(
            &dirs,
            "me",
            "terminal_submit",
            json!({"nodeId": term, "command": "seq -f 'M%07g' 0 299999", "wait": "exit", "timeoutMs": 120000, "maxChars": 200}),
        );
        assert_eq!(ran["exitCode"], 0, "{ran}");
        let late = follow(&serve, &dirs, &term, from, 'M', 299_999);
        println!(
            "{backend}: 300,000 lines read after they were written: {} seen, {} lost",
            late.seen, late.lost_lines
        );
        assert!(late.lost_reads >= 1 && late.lost_lines > 0);
        assert_eq!(late.seen + late.lost_lines, 300_000);
        // The history keeps at least its bound (1 MiB).
        assert!(late.seen * LINE_BYTES >= (1 << 20) - 100, "{}", late.seen);
        // A cursor from nowhere is refused; one at the end reads nothing.
        let end = cursor(&serve, &dirs, &term);
        let ahead = serve.err(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "since": end + 1000}),
        );
        assert!(
            ahead.starts_with("Invalid since: this terminal's output ends at cursor"),
            "{ahead}"
        );
        let at_end = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "since": end}),
        );
        assert_eq!(
            (at_end["output"].as_str(), at_end["lost"].as_u64()),
            (Some(""), Some(0))
        );
    }
}

#[test]
fn search_finds_the_error_lines_among_fifty_thousand_with_their_numbers() {
    for backend in ["pty", "tmux"] {
        let Some((dirs, serve, term)) = terminal_on(backend, "search") else {
            continue;
        };
        let program = r#"awk 'BEGIN { for (i = 1; i <= 50000; i++) if (i == 7 || i == 25000 || i == 49999) printf "\033[1;31m%s:\033[0m step %d failed\n", "ERR" "OR", i; else print "ok " i }'"#;
        let ran = serve.ok(
            &dirs,
            "me",
            "terminal_submit",
            json!({"nodeId": term, "command": program, "wait": "exit", "timeoutMs": 60000, "maxChars": 200}),
        );
        assert_eq!(ran["exitCode"], 0, "{ran}");
        let found = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "search": "ERROR:"}),
        );
        println!("{backend}: {found}");
        assert_eq!(found["matchCount"], 3, "{found}");
        let matches = found["matches"].as_array().unwrap();
        let texts: Vec<&str> = matches
            .iter()
            .map(|m| m["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            texts,
            [
                "ERROR: step 7 failed",
                "ERROR: step 25000 failed",
                "ERROR: step 49999 failed"
            ]
        );
        assert_eq!(matches[0]["before"], json!(["ok 6"]));
        assert_eq!(matches[0]["after"], json!(["ok 8"]));
        assert_eq!(matches[2]["after"], json!(["ok 50000"]));
        // Numbers count the terminal's lines: "ok 12345" is 12,345 - 7 lines after the first.
        let line = |m: &Value| m["line"].as_u64().unwrap();
        let first = line(&matches[0]);
        assert_eq!(line(&matches[1]) - first, 25_000 - 7);
        assert_eq!(line(&matches[2]) - first, 49_999 - 7);
        let ok = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "search": "ok 12345"}),
        );
        assert_eq!(ok["matchCount"], 1, "{ok}");
        assert_eq!(line(&ok["matches"][0]), first + 12_345 - 7);
        // The newest, when fewer are asked for; none where nothing matches.
        let two = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "search": "error:", "maxMatches": 2}),
        );
        assert_eq!(two["matchCount"], 3);
        assert_eq!(two["matches"].as_array().unwrap().len(), 2);
        assert_eq!(two["matches"][0]["text"], "ERROR: step 25000 failed");
        let none = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "search": "segfault"}),
        );
        assert_eq!(
            (
                none["matchCount"].as_u64(),
                none["matches"].as_array().map(Vec::len)
            ),
            (Some(0), Some(0))
        );
        // One way to read at a time.
        let both = serve.err(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "search": "x", "since": 0}),
        );
        assert!(
            both.contains("give one of command, since and search"),
            "{both}"
        );
        let stray = serve.err(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "maxMatches": 3}),
        );
        assert!(stray.contains("maxMatches: it goes with search"), "{stray}");
    }
}

#[test]
fn named_keys_steer_less_python_and_vim() {
    let python = match std::path::Path::new("/usr/bin/python3").exists() {
        true => "/usr/bin/python3", // built with readline: Up recalls a line
        false => "python3",
    };
    let missing: Vec<&str> = ["less", "vim"]
        .into_iter()
        .filter(|program| !on_path(program))
        .collect();
    if !missing.is_empty() {
        eprintln!("{missing:?} not installed: skipping the keys into less, Python and vim");
        return;
    }
    for backend in ["pty", "tmux"] {
        let Some((dirs, serve, term)) = terminal_on(backend, "keys") else {
            continue;
        };
        // less: G to the end, g to the start, Down twice (application cursor keys), q.
        let before_less = cursor(&serve, &dirs, &term);
        submit(&serve, &dirs, &term, "seq 1 1000 | less");
        screen_until(&serve, &dirs, &term, "less", |s| {
            s.starts_with("1\n2\n") && s.ends_with(':')
        });
        // What a full-screen program drew since a cursor is said to be that, not a screen.
        let drawn = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "since": before_less}),
        );
        assert_eq!(drawn["fullscreen"], true, "{drawn}");
        press(&serve, &dirs, &term, None, &["G"]);
        screen_until(&serve, &dirs, &term, "less at the end", |s| {
            s.ends_with("1000\n(END)")
        });
        press(&serve, &dirs, &term, None, &["g", "Down", "Down"]);
        screen_until(&serve, &dirs, &term, "less at line 3", |s| {
            s.starts_with("3\n4\n")
        });
        press(&serve, &dirs, &term, None, &["q"]);
        screen_until(&serve, &dirs, &term, "the prompt after less", |s| {
            at_prompt(s) && !s.contains("(END)")
        });

        // Python: a line, Up + Enter runs it again, C-c interrupts a loop, C-d ends it.
        submit(&serve, &dirs, &term, &format!("{python} -q"));
        screen_until(&serve, &dirs, &term, "python's prompt", |s| {
            s.ends_with(">>>")
        });
        press(&serve, &dirs, &term, Some("print(6 * 7)"), &["Enter"]);
        screen_until(&serve, &dirs, &term, "42", |s| s.ends_with("42\n>>>"));
        press(&serve, &dirs, &term, None, &["Up", "Enter"]);
        screen_until(&serve, &dirs, &term, "42 again", |s| {
            s.matches("\n42\n").count() == 2
        });
        press(
            &serve,
            &dirs,
            &term,
            Some("while True: pass"),
            &["Enter", "Enter"],
        );
        std::thread::sleep(Duration::from_millis(300));
        press(&serve, &dirs, &term, None, &["C-c"]);
        screen_until(&serve, &dirs, &term, "KeyboardInterrupt", |s| {
            s.contains("KeyboardInterrupt") && s.ends_with(">>>")
        });
        press(&serve, &dirs, &term, None, &["C-d"]);
        screen_until(&serve, &dirs, &term, "the prompt after python", |s| {
            at_prompt(s)
        });

        // vim: typed text, then Escape : q ! Enter quits without writing.
        submit(&serve, &dirs, &term, "vim -u NONE -N notes.txt");
        screen_until(&serve, &dirs, &term, "vim", |s| s.contains("\n~\n"));
        press(&serve, &dirs, &term, Some("iHello from an agent"), &[]);
        screen_until(&serve, &dirs, &term, "the typed text", |s| {
            s.starts_with("Hello from an agent")
        });
        press(
            &serve,
            &dirs,
            &term,
            None,
            &["Escape", ":", "q", "!", "Enter"],
        );
        screen_until(&serve, &dirs, &term, "the prompt after vim", |s| {
            at_prompt(s) && !s.contains("\n~\n")
        });
        let checked = submit_and_wait(
            &serve,
            &dirs,
            &term,
            "test -e notes.txt; echo exists=$?",
            json!({}),
        );
        assert!(
            checked["output"].as_str().unwrap().contains("exists=1"),
            "{checked}"
        );
    }
}

#[test]
fn unknown_keys_are_refused_and_nothing_is_typed() {
    for backend in ["pty", "tmux"] {
        let Some((dirs, serve, term)) = terminal_on(backend, "badkeys") else {
            continue;
        };
        let before = cursor(&serve, &dirs, &term);
        for keys in [
            json!(["a", "F13"]),
            json!(["ctrl-c"]),
            json!(["enter"]),
            json!(["hello"]),
        ] {
            let refused = serve.err(
                &dirs,
                "me",
                "terminal_input",
                json!({"nodeId": term, "text": "echo typed", "keys": keys}),
            );
            assert!(
                refused.starts_with("Invalid keys: unknown key"),
                "{refused}"
            );
            assert!(
                refused.contains("Enter, Tab") && refused.contains("C-x"),
                "{refused}"
            );
        }
        let neither = serve.err(&dirs, "me", "terminal_input", json!({"nodeId": term}));
        assert_eq!(neither, "Missing argument: text (give text, keys or both)");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(cursor(&serve, &dirs, &term), before, "nothing was typed");
    }
}

#[test]
fn hostile_output_reads_as_plain_text() {
    for backend in ["pty", "tmux"] {
        let Some((dirs, serve, term)) = terminal_on(backend, "hostile") else {
            continue;
        };
        let from = cursor(&serve, &dirs, &term);
        // A clipboard write, a title, a C1 CSI (UTF-8), a bidi override, a screen clear, a
        // fake prompt drawn over a line with a carriage return, an unfinished escape.
        let printed = submit_and_wait(
            &serve,
            &dirs,
            &term,
            r"printf 'pwned \033]52;c;aGk=\007\033]0;title\007\302\23331mred\033[0m \342\200\256txt\n\033[2Jfake\r$ rm -rf /\033[K\nsafe\n\033['",
            json!({}),
        );
        assert_eq!(printed["exitCode"], 0, "{printed}");
        let read = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "since": from}),
        );
        let text = read["output"].as_str().unwrap();
        println!("{backend}: {text:?}");
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{text:?}"
        );
        // What the program wrote, after the command line as typed: as a terminal shows it.
        let (_typed, written) = text.split_once('\n').unwrap();
        assert!(
            written.starts_with("pwned red \u{202e}txt\n$ rm -rf /\nsafe\n"),
            "{written:?}"
        );
        let found = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "search": "red"}),
        );
        for m in found["matches"].as_array().unwrap() {
            let line = m["text"].as_str().unwrap();
            assert!(!line.chars().any(char::is_control), "{line:?}");
        }
        // A tmux pane's history is a private folder in the data folder, gone with it.
        let log = dirs
            .agent_tools()
            .join("tmux/panes")
            .join(format!("{term}.out"));
        if backend == "tmux" {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&log).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": term}));
        assert!(!log.exists(), "{}", log.display());
    }
}
