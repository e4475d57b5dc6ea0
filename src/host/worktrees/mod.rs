//! Agents side by side: each launched agent may work in a git worktree of its own, on a
//! branch of its own, and the person takes its work (or not) when it is done.
//!
//! Where they live: `<project>/.termsprawl/worktrees/<node-id>`, inside the project
//! folder so `artifact_open` and the canvas view reach their files, and inside
//! `.termsprawl/`, which confined agents see read-only: an agent writes its own worktree
//! (shown writable again) and what git writes to commit (objects, refs, reflogs), not the project's
//! checkout nor another agent's worktree, nor `.git`'s config, hooks or `info/`.
//! `serve` reads a worktree's state through the project's own repository, never through
//! the worktree's `.git` file or administrative folder, which its agent can rewrite.
//! `.termsprawl/` is added to the repository's own
//! `.git/info/exclude` (never to a tracked file) when git does not ignore it yet, so the
//! project's checkout shows nothing new. Which node has which worktree, on which branch,
//! from which base branch, is kept in `.termsprawl/worktrees.json` (agents cannot write
//! it); git itself knows the rest, so a restart finds them again.
//!
//! Nothing here is done by halves: every step that can be refused (not a repository, a
//! detached `HEAD`, a branch that exists or is not a valid name, a dirty target checkout,
//! a conflict, uncommitted work that a removal would lose) is checked before anything
//! changes, and a merge that conflicts is aborted, leaving both branches as they were.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::base::files::{read_json, regenerated_write};

/// How long a worktree's state (`canvas_list`'s `worktree`) is reused before git is asked
/// again: the view lists twice a second, and each look is a few git processes.
const STATE_FOR: Duration = Duration::from_secs(2);

/// A diff is cut after this many bytes (`worktrees diff` and the view page the rest).
pub const DIFF_BYTES_MAX: usize = 512 * 1024;

/// One agent's worktree, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worktree {
    /// The agent's node.
    pub node: String,
    /// Its folder.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
    /// The branch it was made from, where a merge goes.
    pub base: String,
}

/// The worktrees of one project folder.
pub struct Worktrees {
    project: PathBuf,
    /// Each node's state and when it was found.
    states: Mutex<BTreeMap<String, (Instant, Value)>>,
    /// The repository's own git folder (`--git-common-dir`), once found.
    common: OnceLock<PathBuf>,
}

impl Worktrees {
    /// The worktrees of `project` (a folder; it need not be a repository until one is made).
    pub fn new(project: &Path) -> Worktrees {
        Worktrees {
            project: project.to_path_buf(),
            states: Mutex::new(BTreeMap::new()),
            common: OnceLock::new(),
        }
    }

    fn record_file(&self) -> PathBuf {
        self.project.join(".termsprawl").join("worktrees.json")
    }

    /// Every recorded worktree, by node.
    pub fn list(&self) -> BTreeMap<String, Worktree> {
        let Ok(Some(record)) = read_json(&self.record_file()) else {
            return BTreeMap::new();
        };
        let mut found = BTreeMap::new();
        for (node, entry) in record["worktrees"].as_object().into_iter().flatten() {
            let text = |key: &str| entry[key].as_str().map(str::to_string);
            if let (Some(branch), Some(base)) = (text("branch"), text("base")) {
                let path = self.folder_of(node);
                found.insert(
                    node.clone(),
                    Worktree {
                        node: node.clone(),
                        path,
                        branch,
                        base,
                    },
                );
            }
        }
        found
    }

    /// What `session_info` and `agent_status` say of each: node -> `{path, branch, base}`.
    pub fn facts(&self) -> Vec<(String, Value)> {
        self.list()
            .into_values()
            .map(|w| {
                let facts =
                    json!({"path": w.path.to_string_lossy(), "branch": w.branch, "base": w.base});
                (w.node, facts)
            })
            .collect()
    }

    /// Node `node`'s worktree, if it has one.
    pub fn get(&self, node: &str) -> Option<Worktree> {
        self.list().remove(node)
    }

    fn folder_of(&self, node: &str) -> PathBuf {
        self.project
            .join(".termsprawl")
            .join("worktrees")
            .join(node)
    }

    fn save(&self, worktrees: &BTreeMap<String, Worktree>) -> Result<(), String> {
        let entries: serde_json::Map<String, Value> = worktrees
            .values()
            .map(|w| (w.node.clone(), json!({"branch": w.branch, "base": w.base})))
            .collect();
        let record = json!({"version": 1, "worktrees": entries});
        let mut bytes = serde_json::to_vec_pretty(&record).unwrap_or_default();
        bytes.push(b'\n');
        regenerated_write(&self.record_file(), &bytes, 0o644)
            .map_err(|e| format!("cannot write {}: {e}", self.record_file().display()))
    }

    /// Makes node `node` a worktree on a new branch (`branch`, else `agent/<node>`) from
    /// the project's current branch. Refused, with what to do, where that cannot be done
    /// whole.
    pub fn create(&self, node: &str, branch: Option<&str>) -> Result<Worktree, String> {
        let project = &self.project;
        let top = git(project, &["rev-parse", "--show-toplevel"]).map_err(|_| {
            format!(
                "The project folder {} is not a git repository: run git init (and make a first commit) there, or launch without worktree",
                project.display()
            )
        })?;
        if Path::new(top.trim()) != project.canonicalize().unwrap_or(project.clone()) {
            return Err(format!(
                "The project folder {} is inside the git repository {} but not its top: serve the repository's top folder to use worktrees",
                project.display(),
                top.trim()
            ));
        }
        let base = git(project, &["symbolic-ref", "--quiet", "--short", "HEAD"])
            .map(|b| b.trim().to_string())
            .map_err(|_| {
                "The project's HEAD is detached: check out a branch (git switch NAME) to launch an agent in a worktree".to_string()
            })?;
        git(project, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).map_err(|_| {
            format!("The project's branch {base} has no commit yet: make a first commit, then launch again")
        })?;
        let branch = branch.map_or_else(|| format!("agent/{node}"), str::to_string);
        if git(project, &["check-ref-format", "--branch", &branch]).is_err()
            || branch.starts_with('-')
        {
            return Err(format!(
                "Invalid branch name {branch:?}: use letters, digits, '-', '_', '/' (git check-ref-format)"
            ));
        }
        let exists = git(
            project,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ],
        );
        if exists.is_ok() {
            return Err(format!(
                "The branch {branch} exists already: name another with branch, or delete it (git branch -d {branch})"
            ));
        }
        let mut worktrees = self.list();
        if worktrees.contains_key(node) {
            return Err(format!("Node {node} has a worktree already"));
        }
        let path = self.folder_of(node);
        if path.exists() {
            return Err(format!(
                "{} exists already: remove it (termsprawl-tools worktrees discard {node}) first",
                path.display()
            ));
        }
        self.exclude_state_folder()?;
        // Its agent may write the reflogs (the folder is shown to it as it is): make sure
        // the folder exists.
        if let Ok(common) = git(
            project,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        ) {
            let _ = std::fs::create_dir_all(Path::new(common.trim()).join("logs"));
        }
        std::fs::create_dir_all(path.parent().unwrap_or(project))
            .map_err(|e| format!("cannot make {}: {e}", path.display()))?;
        let folder = path.to_string_lossy().into_owned();
        git(
            project,
            &["worktree", "add", "--quiet", "-b", &branch, &folder, &base],
        )?;
        let made = Worktree {
            node: node.to_string(),
            path,
            branch,
            base,
        };
        worktrees.insert(node.to_string(), made.clone());
        if let Err(error) = self.save(&worktrees) {
            // Not recorded: undo, so nothing is left half made.
            let _ = git(project, &["worktree", "remove", "--force", &folder]);
            let _ = git(project, &["branch", "-D", &made.branch]);
            return Err(error);
        }
        Ok(made)
    }

    /// `.termsprawl/` in `.git/info/exclude`, unless git ignores it already.
    fn exclude_state_folder(&self) -> Result<(), String> {
        if git(&self.project, &["check-ignore", "--quiet", ".termsprawl/"]).is_ok() {
            return Ok(());
        }
        let exclude = git(&self.project, &["rev-parse", "--git-path", "info/exclude"])?;
        let exclude = self.project.join(exclude.trim());
        let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(
            "# termsprawl-tools: the canvas's state and agents' worktrees\n/.termsprawl/\n",
        );
        if let Some(folder) = exclude.parent() {
            let _ = std::fs::create_dir_all(folder);
        }
        std::fs::write(&exclude, text)
            .map_err(|e| format!("cannot write {}: {e}", exclude.display()))
    }

    /// `canvas_list`'s `worktree` of node `node`: `{path, branch, base, ahead, behind,
    /// dirty, changedFiles}` (`missing: true` when its folder was removed by hand), found
    /// again at most every 2 s (`STATE_FOR`).
    pub fn state(&self, node: &str) -> Option<Value> {
        let worktree = self.get(node)?;
        Some(self.state_of(&worktree))
    }

    /// [`Self::state`] of every recorded worktree (the record read once).
    pub fn states(&self) -> BTreeMap<String, Value> {
        let worktrees = self.list();
        worktrees
            .values()
            .map(|worktree| (worktree.node.clone(), self.state_of(worktree)))
            .collect()
    }

    fn state_of(&self, worktree: &Worktree) -> Value {
        if let Some((at, state)) = lock(&self.states).get(&worktree.node) {
            if at.elapsed() < STATE_FOR {
                return state.clone();
            }
        }
        let state = self.state_now(worktree);
        lock(&self.states).insert(worktree.node.clone(), (Instant::now(), state.clone()));
        state
    }

    fn state_now(&self, worktree: &Worktree) -> Value {
        let mut state = json!({
            "path": worktree.path.to_string_lossy(),
            "branch": worktree.branch,
            "base": worktree.base,
        });
        if !worktree.path.is_dir() {
            state["missing"] = json!(true);
            return state;
        }
        let range = format!("{}...{}", worktree.base, worktree.branch);
        let counts = git(
            &self.project,
            &["rev-list", "--left-right", "--count", &range],
        );
        let mut counts = counts.as_deref().unwrap_or("").split_whitespace();
        let mut next = || {
            counts
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let (behind, ahead) = (next(), next());
        let changed = self.uncommitted(worktree);
        state["ahead"] = json!(ahead);
        state["behind"] = json!(behind);
        state["dirty"] = json!(!changed.is_empty());
        state["changedFiles"] = json!(changed.len());
        state
    }

    /// The diff of node `node`'s work against its base: its commits and what is not
    /// committed yet (new files included), cut at [`DIFF_BYTES_MAX`]. Text from the agent:
    /// show it escaped.
    pub fn diff(&self, node: &str) -> Result<(Worktree, String, bool), String> {
        let worktree = self.existing(node)?;
        let fork = git(
            &self.project,
            &["merge-base", &worktree.base, &worktree.branch],
        )?;
        // New files count: `add --intent-to-add` would change the agent's index, so they
        // are listed after the diff of what git tracks.
        let diff = [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            fork.trim(),
        ];
        let mut text = self.git_in(&worktree, &diff)?;
        let untracked = self.git_in(
            &worktree,
            &["ls-files", "--others", "--exclude-standard", "-z"],
        )?;
        for file in untracked.split('\0').filter(|f| !f.is_empty()) {
            text.push_str(&format!("new file, not committed: {file}\n"));
        }
        let cut = text.len() > DIFF_BYTES_MAX;
        if cut {
            let mut end = DIFF_BYTES_MAX;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        Ok((worktree, text, cut))
    }

    /// The files of `worktree` that differ from its branch's last commit, and the new ones
    /// git does not ignore.
    fn uncommitted(&self, worktree: &Worktree) -> Vec<String> {
        let tracked = self.git_in(
            worktree,
            &[
                "diff",
                "--name-only",
                "-z",
                "--no-ext-diff",
                &worktree.branch,
            ],
        );
        let new = self.git_in(
            worktree,
            &["ls-files", "--others", "--exclude-standard", "-z"],
        );
        let mut files: Vec<String> = [tracked, new]
            .iter()
            .flat_map(|out| out.as_deref().unwrap_or("").split('\0'))
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        files.dedup();
        files
    }

    /// `git ARGS` on the files of `worktree`, read through the project's own repository:
    /// its `.git` (config, hooks, attributes: out of agents' reach, see
    /// [`crate::host::isolation::Plan::in_worktree`]) with the worktree's index, never
    /// through the `.git` file and administrative folder in the worktree, which its agent
    /// may rewrite (a `commondir` pointing at a repository of its own would have this run
    /// its `core.fsmonitor` program as the person).
    fn git_in(&self, worktree: &Worktree, args: &[&str]) -> Result<String, String> {
        let common = match self.common.get() {
            Some(common) => common.clone(),
            None => {
                let asked = ["rev-parse", "--path-format=absolute", "--git-common-dir"];
                let found = git(&self.project, &asked)?;
                self.common
                    .get_or_init(|| PathBuf::from(found.trim()))
                    .clone()
            }
        };
        let index = common.join("worktrees").join(&worktree.node).join("index");
        let mut words = vec![
            format!("--git-dir={}", common.display()),
            format!("--work-tree={}", worktree.path.display()),
        ];
        words.extend(args.iter().map(|a| a.to_string()));
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        git_with_index(&self.project, &words, &index)
    }

    fn existing(&self, node: &str) -> Result<Worktree, String> {
        let worktree = self.get(node).ok_or_else(|| {
            format!(
                "Node {node} has no worktree: termsprawl-tools worktrees list shows those that do"
            )
        })?;
        if !worktree.path.is_dir() {
            return Err(format!(
                "{}'s worktree folder {} was removed: termsprawl-tools worktrees discard {node} forgets it (its branch {} stays)",
                node,
                worktree.path.display(),
                worktree.branch
            ));
        }
        Ok(worktree)
    }

    /// Merges node `node`'s branch into its base in the project's checkout: a fast-forward
    /// when it can, else a merge commit. Refused, with nothing changed, while `running`
    /// (the agent still works), when the worktree has uncommitted work, when the project's
    /// checkout is not on the base branch or not clean, or on a conflict (the files named).
    pub fn merge(&self, node: &str, running: bool) -> Result<String, String> {
        let worktree = self.existing(node)?;
        if running {
            return Err(format!(
                "Agent {node} is still running: close its terminal (or wait for it to end), then merge"
            ));
        }
        let uncommitted = self.uncommitted(&worktree);
        if !uncommitted.is_empty() {
            return Err(format!(
                "{node}'s worktree has changes not committed ({}): commit or discard them in {}, then merge",
                uncommitted.join(", "),
                worktree.path.display()
            ));
        }
        let project = &self.project;
        let current =
            git(project, &["symbolic-ref", "--quiet", "--short", "HEAD"]).unwrap_or_default();
        if current.trim() != worktree.base {
            return Err(format!(
                "The project's checkout is on {}, not {}: switch to {} (git switch {}), then merge",
                if current.trim().is_empty() {
                    "a detached HEAD"
                } else {
                    current.trim()
                },
                worktree.base,
                worktree.base,
                worktree.base
            ));
        }
        let dirty = changed_files(project);
        if !dirty.is_empty() {
            return Err(format!(
                "The project's checkout has changes not committed ({}): commit or stash them, then merge",
                dirty.join(", ")
            ));
        }
        let message = format!("Merge {} (agent {node})", worktree.branch);
        if git(
            project,
            &["merge", "--ff-only", "--quiet", &worktree.branch],
        )
        .is_ok()
        {
            lock(&self.states).remove(node);
            return Ok(format!(
                "fast-forwarded {} to {}",
                worktree.base, worktree.branch
            ));
        }
        match git(
            project,
            &[
                "merge",
                "--no-ff",
                "--no-edit",
                "--quiet",
                "-m",
                &message,
                &worktree.branch,
            ],
        ) {
            Ok(_) => {
                lock(&self.states).remove(node);
                Ok(format!(
                    "merged {} into {} with a merge commit",
                    worktree.branch, worktree.base
                ))
            }
            Err(error) => {
                let conflicted =
                    git(project, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
                let _ = git(project, &["merge", "--abort"]);
                let files: Vec<&str> = conflicted.lines().collect();
                Err(match files.is_empty() {
                    true => format!("The merge of {} failed and was undone: {error}", worktree.branch),
                    false => format!(
                        "The merge of {} into {} conflicts in {}: nothing was changed; resolve it in {}'s worktree (merge {} there), commit, then merge again",
                        worktree.branch,
                        worktree.base,
                        files.join(", "),
                        node,
                        worktree.base
                    ),
                })
            }
        }
    }

    /// Removes node `node`'s worktree (its folder, and git's record of it); its branch
    /// stays unless `delete_branch`, which deletes it only when merged into the base or
    /// with `force`. Refused while the worktree holds uncommitted work, unless `force`.
    pub fn discard(&self, node: &str, delete_branch: bool, force: bool) -> Result<String, String> {
        let mut worktrees = self.list();
        let worktree = worktrees.remove(node).ok_or_else(|| {
            format!(
                "Node {node} has no worktree: termsprawl-tools worktrees list shows those that do"
            )
        })?;
        let project = &self.project;
        if delete_branch && !force {
            let merged = git(
                project,
                &[
                    "merge-base",
                    "--is-ancestor",
                    &worktree.branch,
                    &worktree.base,
                ],
            );
            if merged.is_err() {
                let unmerged = git(
                    project,
                    &[
                        "rev-list",
                        "--count",
                        &format!("{}..{}", worktree.base, worktree.branch),
                    ],
                )
                .unwrap_or_default();
                return Err(format!(
                    "The branch {} has {} commit(s) not merged into {}: merge it first, or discard with --force to lose them",
                    worktree.branch,
                    unmerged.trim(),
                    worktree.base
                ));
            }
        }
        let folder = worktree.path.to_string_lossy().into_owned();
        if worktree.path.is_dir() {
            let uncommitted = self.uncommitted(&worktree);
            if !uncommitted.is_empty() && !force {
                return Err(format!(
                    "{node}'s worktree has changes not committed ({}): commit them, or discard with --force to lose them",
                    uncommitted.join(", ")
                ));
            }
            git(project, &["worktree", "remove", "--force", &folder])?;
        }
        let _ = git(project, &["worktree", "prune"]);
        let mut said = format!("removed {node}'s worktree; ");
        if delete_branch {
            git(project, &["branch", "-D", &worktree.branch])?;
            said.push_str(&format!("deleted its branch {}", worktree.branch));
        } else {
            said.push_str(&format!("its branch {} stays", worktree.branch));
        }
        self.save(&worktrees)?;
        lock(&self.states).remove(node);
        Ok(said)
    }
}

/// The files `git status` names in `folder` (changed, staged, new; the state folder is
/// excluded), or none when it cannot tell.
fn changed_files(folder: &Path) -> Vec<String> {
    let status = git(
        folder,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )
    .unwrap_or_default();
    let mut files = Vec::new();
    let mut entries = status.split('\0');
    while let Some(entry) = entries.next() {
        if entry.len() < 4 {
            continue;
        }
        // A rename names its source next.
        if entry.starts_with('R') || entry.starts_with('C') {
            entries.next();
        }
        files.push(entry[3..].to_string());
    }
    files
}

/// `git -C folder ARGS`: its output, or its error output (or why it could not run).
fn git(folder: &Path, args: &[&str]) -> Result<String, String> {
    run_git(Command::new("git").arg("-C").arg(folder).args(args), args)
}

/// [`git`] with `index` as the index file.
fn git_with_index(folder: &Path, args: &[&str], index: &Path) -> Result<String, String> {
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(folder)
        .args(args)
        .env("GIT_INDEX_FILE", index);
    run_git(&mut command, args)
}

fn run_git(command: &mut Command, args: &[&str]) -> Result<String, String> {
    let output = command
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git ({e}): install git"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
        Err(match said.is_empty() {
            true => format!("git {} failed", args.first().unwrap_or(&"")),
            false => said,
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ts-worktrees-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        for args in [
            vec!["init", "-q", "-b", "main"],
            vec!["config", "user.email", "t@t"],
            vec!["config", "user.name", "t"],
        ] {
            git(&dir, &args).unwrap();
        }
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        git(&dir, &["add", "a.txt"]).unwrap();
        git(&dir, &["commit", "-q", "-m", "first"]).unwrap();
        dir
    }

    fn commit_in(folder: &Path, file: &str, text: &str) {
        std::fs::write(folder.join(file), text).unwrap();
        git(folder, &["add", file]).unwrap();
        git(
            folder,
            &[
                "-c",
                "user.email=a@a",
                "-c",
                "user.name=a",
                "commit",
                "-q",
                "-m",
                file,
            ],
        )
        .unwrap();
    }

    #[test]
    fn a_worktree_is_made_listed_merged_and_discarded_whole() {
        let project = repo("whole");
        let worktrees = Worktrees::new(&project);
        let made = worktrees.create("agent-1", None).unwrap();
        assert_eq!(
            (made.branch.as_str(), made.base.as_str()),
            ("agent/agent-1", "main")
        );
        assert!(made.path.join("a.txt").exists());
        // The project's checkout shows nothing new.
        assert!(
            changed_files(&project).is_empty(),
            "{:?}",
            changed_files(&project)
        );
        commit_in(&made.path, "a.txt", "two\n");
        std::fs::write(made.path.join("new.txt"), "x").unwrap();
        let state = worktrees.state_now(&made);
        assert_eq!(
            (state["ahead"].clone(), state["dirty"].clone()),
            (json!(1), json!(true))
        );
        let (_, diff, cut) = worktrees.diff("agent-1").unwrap();
        assert!(
            diff.contains("+two") && diff.contains("new file, not committed: new.txt") && !cut,
            "{diff}"
        );
        let refused = worktrees.merge("agent-1", false).unwrap_err();
        assert!(refused.contains("new.txt"), "{refused}");
        std::fs::remove_file(made.path.join("new.txt")).unwrap();
        assert!(worktrees
            .merge("agent-1", true)
            .unwrap_err()
            .contains("still running"));
        let merged = worktrees.merge("agent-1", false).unwrap();
        assert!(merged.contains("fast-forwarded"), "{merged}");
        assert_eq!(
            std::fs::read_to_string(project.join("a.txt")).unwrap(),
            "two\n"
        );
        let said = worktrees.discard("agent-1", true, false).unwrap();
        assert!(said.contains("deleted its branch"), "{said}");
        assert!(!made.path.exists() && worktrees.list().is_empty());
        let _ = std::fs::remove_dir_all(&project);
    }

    #[test]
    fn a_conflict_changes_nothing_and_names_the_file() {
        let project = repo("conflict");
        let worktrees = Worktrees::new(&project);
        let one = worktrees.create("one", None).unwrap();
        let two = worktrees.create("two", Some("feature/two")).unwrap();
        commit_in(&one.path, "a.txt", "from one\n");
        commit_in(&two.path, "a.txt", "from two\n");
        worktrees.merge("one", false).unwrap();
        let head = git(&project, &["rev-parse", "HEAD"]).unwrap();
        let refused = worktrees.merge("two", false).unwrap_err();
        assert!(refused.contains("conflicts in a.txt"), "{refused}");
        assert_eq!(git(&project, &["rev-parse", "HEAD"]).unwrap(), head);
        assert!(changed_files(&project).is_empty());
        // Its branch has unmerged work: deleting it asks for --force.
        let kept = worktrees.discard("two", true, false).unwrap_err();
        assert!(kept.contains("not merged"), "{kept}");
        assert!(worktrees
            .discard("two", false, false)
            .unwrap()
            .contains("stays"));
        assert!(git(&project, &["rev-parse", "--verify", "feature/two"]).is_ok());
        let _ = std::fs::remove_dir_all(&project);
    }

    #[test]
    fn a_worktree_removed_by_hand_says_so_and_is_forgotten_on_discard() {
        let project = repo("removed");
        let worktrees = Worktrees::new(&project);
        let made = worktrees.create("gone", None).unwrap();
        std::fs::remove_dir_all(&made.path).unwrap();
        assert_eq!(worktrees.state_now(&made)["missing"], json!(true));
        let refused = worktrees.merge("gone", false).unwrap_err();
        assert!(
            refused.contains("was removed") && refused.contains("discard gone"),
            "{refused}"
        );
        assert!(worktrees
            .discard("gone", false, false)
            .unwrap()
            .contains("stays"));
        assert!(worktrees.list().is_empty());
        // git's own record of it is pruned: the branch can have a worktree again.
        assert!(!git(&project, &["worktree", "list"])
            .unwrap()
            .contains("gone"));
        let _ = std::fs::remove_dir_all(&project);
    }

    #[test]
    fn what_cannot_be_done_is_refused_with_what_to_do() {
        let plain = std::env::temp_dir().join(format!("ts-worktrees-{}-plain", std::process::id()));
        std::fs::create_dir_all(&plain).unwrap();
        let refused = Worktrees::new(&plain).create("a", None).unwrap_err();
        assert!(refused.contains("not a git repository"), "{refused}");
        let project = repo("refusals");
        let worktrees = Worktrees::new(&project);
        assert!(worktrees
            .create("a", Some("bad..name"))
            .unwrap_err()
            .contains("Invalid branch"));
        assert!(worktrees
            .create("a", Some("main"))
            .unwrap_err()
            .contains("exists already"));
        let head = git(&project, &["rev-parse", "HEAD"]).unwrap();
        git(&project, &["checkout", "-q", head.trim()]).unwrap();
        assert!(worktrees
            .create("a", None)
            .unwrap_err()
            .contains("detached"));
        let _ = std::fs::remove_dir_all(&project);
        let _ = std::fs::remove_dir_all(&plain);
    }
}
