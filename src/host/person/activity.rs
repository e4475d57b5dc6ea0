//! `termsprawl-tools activity [--data DIR] [--project-id ID] [--follow] [--json]`: the
//! activity trail for people (see `crate::activity` for what a line holds).
//!
//! Without `--project-id` it shows the only project's trail under
//! `<data>/agent-tools/activity/`, and names the choices when there are several. A
//! `--project-id` with no trail file is an error naming the projects that have one (a
//! mistyped id would otherwise show nothing, as an idle project does), with `--follow`
//! too: a project's file appears with its first call. The previous (rotated) file comes
//! first, then the current one. `--follow` prints the last ten lines and then each new one
//! as it is written (checked every [`FOLLOW_EVERY`]), starting over when the file is
//! rotated. Times are UTC.
//!
//! Each line is shown for people with every character a terminal would act on or hide
//! escaped and every field cut (`ActivityLine::display`); `--json` prints each line
//! exactly as the file holds it (lines that do not parse are skipped either way).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use crate::activity::{
    open_private_for_reading, previous_file, read_from, read_tail_lines, trail_file, TrailLine,
    COLUMN_CHARS,
};
use crate::host::help::unknown_word;

/// How often `--follow` looks for new lines.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Lines `--follow` shows before waiting for new ones (as `tail -f`).
const FOLLOW_BACKLOG: usize = 10;

/// What `activity` was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivityOptions {
    /// `--data DIR`.
    pub data: PathBuf,
    /// `--project-id ID`.
    pub project_id: Option<String>,
    /// `--follow`.
    pub follow: bool,
    /// `--json`: the raw lines.
    pub json: bool,
}

impl ActivityOptions {
    /// Parses the words after `activity`; `env` gives the `--data` default.
    pub fn parse(
        args: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ActivityOptions, String> {
        let (mut data, mut project_id, mut follow, mut json) = (None, None, false, false);
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (word.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| words.next().cloned())
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag {
                "--data" => data = Some(crate::host::options::data_folder(value()?.into())),
                "--project-id" => project_id = Some(value()?),
                "--follow" if inline.is_none() => follow = true,
                "--json" if inline.is_none() => json = true,
                "--follow" | "--json" => return Err(format!("{flag} takes no value")),
                _ => return Err(unknown_word("activity", word)),
            }
        }
        let data = match data {
            Some(data) => data,
            None => crate::host::options::default_data_dir(&env)?,
        };
        Ok(ActivityOptions {
            data,
            project_id,
            follow,
            json,
        })
    }
}

/// Runs `activity`: prints the trail on `out` (and, with `--follow`, never returns
/// unless writing fails). The error text tells a person what to do.
pub fn run(options: &ActivityOptions, out: &mut impl Write) -> Result<(), String> {
    let dir = options.data.join("agent-tools").join("activity");
    let project_id = match &options.project_id {
        Some(id) => id.clone(),
        None => only_project(&dir)?,
    };
    let file = trail_file(&dir, &project_id)
        .ok_or_else(|| format!("{project_id} is not a project id (letters, digits, - and _)"))?;
    // A mistyped id would otherwise print nothing, as an idle project does.
    let held = |file: &Path| std::fs::symlink_metadata(file).is_ok();
    if !held(&file) && !held(&previous_file(&file)) {
        return Err(no_trail(&dir, &project_id));
    }
    // A closed pipe (`activity | head`) is the reader being done, not a failure.
    let write_failed = |e: io::Error| match e.kind() {
        io::ErrorKind::BrokenPipe => String::new(),
        _ => format!("cannot write: {e}"),
    };
    if !options.follow {
        let lines = read_tail_lines(&dir, &project_id, usize::MAX);
        return print_lines(&lines, options.json, out).map_err(write_failed);
    }
    let backlog = read_tail_lines(&dir, &project_id, FOLLOW_BACKLOG);
    print_lines(&backlog, options.json, out).map_err(write_failed)?;
    follow(&file, options.json, out).map_err(write_failed)
}

/// Prints each new line of `file` as it is written, forever.
fn follow(file: &Path, json: bool, out: &mut impl Write) -> io::Result<()> {
    // Start at the current end: what is there was printed as the backlog.
    let mut open = open_private_for_reading(file).ok();
    let mut offset = open
        .as_ref()
        .map_or(0, |f| f.metadata().map_or(0, |m| m.len()));
    loop {
        thread::sleep(FOLLOW_EVERY);
        // Rotated (a new inode at the name) or cut: read the new file from its start.
        let current = std::fs::symlink_metadata(file).ok();
        let same = |f: &File| {
            let (Ok(now), Some(named)) = (f.metadata(), &current) else {
                return false;
            };
            now.ino() == named.ino() && named.len() >= offset
        };
        if !open.as_ref().is_some_and(same) {
            if let Some(mut old) = open.take() {
                // The rest of the file that was rotated away.
                if let Ok((lines, _)) = read_from(&mut old, offset) {
                    print_lines(&lines, json, out)?;
                }
            }
            open = open_private_for_reading(file).ok();
            offset = 0;
        }
        if let Some(f) = open.as_mut() {
            if let Ok((lines, next)) = read_from(f, offset) {
                print_lines(&lines, json, out)?;
                offset = next;
            }
        }
    }
}

/// The one project with a trail in `dir`, or an error naming the choices.
fn only_project(dir: &Path) -> Result<String, String> {
    let ids = projects_with_a_trail(dir)
        .map_err(|e| format!("no activity trail in {}: {e}", dir.display()))?;
    match ids.as_slice() {
        [id] => Ok(id.clone()),
        [] => Err(format!("no activity trail in {} yet", dir.display())),
        _ => Err(format!(
            "several projects have a trail; choose one with --project-id: {}",
            ids.join(", ")
        )),
    }
}

/// Why `project_id` shows nothing: it has no trail in `dir`, and which projects have one.
fn no_trail(dir: &Path, project_id: &str) -> String {
    let ids = projects_with_a_trail(dir).unwrap_or_default();
    let choices = match ids.as_slice() {
        [] => "no project has one yet (a trail starts with a project's first call)".to_string(),
        _ => format!("projects with a trail: {}", ids.join(", ")),
    };
    format!(
        "project {project_id} has no activity trail in {}; {choices}",
        dir.display()
    )
}

/// The project ids with a trail file in `dir`, sorted.
fn projects_with_a_trail(dir: &Path) -> io::Result<Vec<String>> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".jsonl").map(str::to_string)
        })
        .collect();
    ids.sort();
    Ok(ids)
}

/// Prints `lines` on `out`: with `json`, each exactly as the file holds it; else one
/// line for people each ([`ActivityLine::display`](crate::activity::ActivityLine::display):
/// escaped, cut, columns as wide as this batch's longest node id and operation up to
/// [`COLUMN_CHARS`]).
pub fn print_lines(lines: &[TrailLine], json: bool, out: &mut impl Write) -> io::Result<()> {
    if json {
        for read in lines {
            out.write_all(&read.bytes)?;
            out.write_all(b"\n")?;
        }
        return out.flush();
    }
    let width = |column: fn(&TrailLine) -> String| {
        lines
            .iter()
            .map(|read| column(read).chars().count().min(COLUMN_CHARS))
            .max()
            .unwrap_or(0)
    };
    let widths = (
        width(|read| read.line.node_column()),
        width(|read| read.line.operation_column()),
    );
    for read in lines {
        writeln!(out, "{}", read.line.display(widths))?;
    }
    out.flush()
}
