//! Starting a user's shell so that it prints our marks, without touching the user's
//! files: generated start-up files (0600, in a 0700 folder of the private data
//! directory) that run the user's own start-up files first and then install the marks.
//!
//! The nonce reaches the shell in a file of its own (`nonce`, 0600) that the shell reads
//! and deletes first thing; it is never in the environment or the arguments, which any
//! process of the user can read in `/proc`. It then lives in an unexported shell variable.
//!
//! | shell | how | its own files |
//! | --- | --- | --- |
//! | bash | `bash --rcfile <dir>/bashrc` | `/etc/bash.bashrc`, `~/.bashrc` (as an interactive non-login bash); for a login start `/etc/profile`, then the first of `~/.bash_profile`, `~/.bash_login`, `~/.profile` (as a login bash) |
//! | zsh | `ZDOTDIR=<dir>`, whose `.zshenv` and `.zshrc` restore `ZDOTDIR` (and a `HISTFILE` set from it) | `$ZDOTDIR` (else `~`)`/.zshenv`, `.zprofile` (login), `.zshrc`, `.zlogin` (login), with `/etc/zsh/*` as zsh reads them |
//! | sh, dash | `ENV=<dir>/env.sh`, which unsets `ENV` | the user's `$ENV` file, if set; `/etc/profile` and `~/.profile` as a login shell reads them |
//!
//! bash marks a command's start in `PS0` (its line from `history 1` if history took it,
//! else none; the host labels what it typed itself) and its end in a
//! function put first in `PROMPT_COMMAND` that returns the status it found, so the
//! user's `PROMPT_COMMAND` still sees `$?`; a `DEBUG` trap of the user's is not touched.
//! zsh uses `preexec` and `precmd` hooks (ours first). POSIX `sh` has neither: its `PS1`
//! carries the end, folder and prompt marks, and the host marks a start when it types a
//! command and Enter at a prompt. Everything we define is named `__termsprawl_*` and
//! written for `set -u`.

use std::io;
use std::path::{Path, PathBuf};

use super::marks::{MARK_CAP, OSC_NUMBER};
use crate::base::files::{private_dir, regenerated_write};
use crate::base::random_hex;
use crate::runtime::ShellIntegration;

/// A command line's first this many bytes are reported (bash, zsh), and a folder only
/// if it is no longer: escaped, at most three bytes each, they fit in a mark of
/// [`MARK_CAP`] bytes with room to spare, so a long line or folder never makes a mark
/// too long to count (which would show the nonce). Bytes, not characters: the shells
/// count them in the C locale, where a four-byte character is four.
pub const LINE_BYTES: usize = 4096;
const _: () = assert!(3 * LINE_BYTES + 64 < MARK_CAP);

/// The shells we can inject into, by the file name of the program (`bash`, `zsh`, `sh`,
/// `dash`); any other gets no integration.
pub fn shell_kind(program: &str) -> Option<ShellIntegration> {
    let name = Path::new(program).file_name()?.to_str()?;
    match name {
        "bash" => Some(ShellIntegration::Bash),
        "zsh" => Some(ShellIntegration::Zsh),
        "sh" | "dash" => Some(ShellIntegration::Sh),
        _ => None,
    }
}

/// A shell ready to start with integration: its arguments and environment, the nonce its
/// marks carry, and the folder of its files (removed when this is dropped).
#[derive(Debug)]
pub struct Injection {
    /// Which shell.
    pub kind: ShellIntegration,
    /// The full argument list, the program first.
    pub argv: Vec<String>,
    /// Variables to add to the shell's environment.
    pub env: Vec<(String, String)>,
    /// The nonce (hex) the shell's marks carry.
    pub nonce: String,
    dir: PathBuf,
}

impl Injection {
    /// The folder of its start-up files and nonce file (the shell deletes the nonce file
    /// there, so a confined shell gets it writable).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Injection {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How the shell starts: as a login shell (what tmux starts in a pane) or not (a PTY
/// terminal's shell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// An interactive shell.
    Interactive,
    /// An interactive login shell: bash, which reads no `--rcfile` as one, starts as an
    /// interactive shell whose file reads the login files instead; zsh and `sh` get
    /// `-NAME` as `argv[0]` and read their login files themselves.
    Login,
}

/// Writes the start-up files of `program` (a `kind` from [`shell_kind`]) into a new
/// folder under `files` (made 0700). `user_var` gives the user's value of a variable
/// the injection replaces (`ZDOTDIR`, `ENV`).
pub fn prepare(
    program: &str,
    kind: ShellIntegration,
    start: Start,
    files: &Path,
    user_var: &dyn Fn(&str) -> Option<String>,
) -> io::Result<Injection> {
    private_dir(files)?;
    let dir = files.join(random_hex(8)?);
    std::fs::create_dir(&dir)?;
    let mut injection = Injection {
        kind,
        argv: vec![program.to_string()],
        env: Vec::new(),
        nonce: random_hex(16)?,
        dir,
    };
    private_dir(&injection.dir)?;
    let nonce_file = injection.dir.join("nonce");
    regenerated_write(&nonce_file, injection.nonce.as_bytes(), 0o600)?;
    let read_nonce = read_nonce_script(&nonce_file);
    match kind {
        ShellIntegration::Bash => {
            let rc = injection.dir.join("bashrc");
            regenerated_write(&rc, bash_rc(&read_nonce, start).as_bytes(), 0o600)?;
            injection.argv.push("--rcfile".into());
            injection.argv.push(path_text(&rc)?);
        }
        ShellIntegration::Zsh => {
            let user_dir = user_var("ZDOTDIR");
            let zshenv = zsh_env(&read_nonce, user_dir.as_deref());
            regenerated_write(&injection.dir.join(".zshenv"), zshenv.as_bytes(), 0o600)?;
            let zprofile = injection.dir.join(".zprofile");
            regenerated_write(&zprofile, ZSH_PROFILE.as_bytes(), 0o600)?;
            regenerated_write(&injection.dir.join(".zshrc"), zsh_rc().as_bytes(), 0o600)?;
            injection
                .env
                .push(("ZDOTDIR".into(), path_text(&injection.dir)?));
        }
        ShellIntegration::Sh => {
            let env_file = injection.dir.join("env.sh");
            let script = sh_env(&read_nonce, user_var("ENV").as_deref());
            regenerated_write(&env_file, script.as_bytes(), 0o600)?;
            injection.env.push(("ENV".into(), path_text(&env_file)?));
        }
        ShellIntegration::None | ShellIntegration::Fish => {
            return Err(io::Error::other("this shell gets no integration"));
        }
    }
    if start == Start::Login && kind != ShellIntegration::Bash {
        let name = Path::new(program)
            .file_name()
            .map_or(program.into(), |name| name.to_string_lossy());
        injection.argv[0] = format!("-{name}");
    }
    Ok(injection)
}

fn path_text(path: &Path) -> io::Result<String> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| io::Error::other("the data directory's path is not UTF-8"))
}

/// `text` as one single-quoted shell word.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Reads the nonce into `__termsprawl_nonce` and deletes its file (POSIX shell).
fn read_nonce_script(nonce_file: &Path) -> String {
    let file = quoted(&nonce_file.to_string_lossy());
    format!(
        "__termsprawl_nonce=\n\
         if [ -r {file} ]; then IFS= read -r __termsprawl_nonce < {file}; fi\n\
         command rm -f -- {file}\n"
    )
}

/// Functions shared by bash and zsh: `%`-escaping and printing marks. The escape runs in
/// the C locale, so lengths and cuts are in bytes; it sets `__termsprawl_cut` when it
/// cut its text to [`LINE_BYTES`].
fn mark_functions() -> String {
    format!(
        r#"__termsprawl_escape() {{
  builtin local LC_ALL=C
  __termsprawl_cut=
  if (( ${{#1}} > {LINE_BYTES} )); then __termsprawl_cut=1; fi
  __termsprawl_escaped=${{1:0:{LINE_BYTES}}}
  __termsprawl_escaped=${{__termsprawl_escaped//\%/%25}}
  __termsprawl_escaped=${{__termsprawl_escaped//$'\n'/%0A}}
  __termsprawl_escaped=${{__termsprawl_escaped//$'\r'/%0D}}
  __termsprawl_escaped=${{__termsprawl_escaped//$'\t'/%09}}
  __termsprawl_escaped=${{__termsprawl_escaped//[[:cntrl:]]/%3F}}
}}
__termsprawl_mark() {{ builtin printf '\033]{OSC_NUMBER};%s;%s\007' "$__termsprawl_nonce" "$1"; }}
__termsprawl_ended() {{
  builtin local __termsprawl_status=$?
  # bash: the history number at the prompt, to tell whether history took the next line.
  __termsprawl_histcmd=${{HISTCMD-}}
  __termsprawl_mark "D;$__termsprawl_status"
  __termsprawl_escape "$PWD"
  # A cut folder would be a wrong one: too long, none is reported.
  if [[ -n $__termsprawl_cut ]]; then __termsprawl_escaped=; fi
  __termsprawl_mark "P;$__termsprawl_escaped"
  __termsprawl_mark A
  return $__termsprawl_status
}}
"#
    )
}

/// What bash reads at start-up besides our marks.
fn bash_user_files(start: Start) -> &'static str {
    match start {
        Start::Interactive => {
            "# What an interactive non-login bash reads.
if [ -r /etc/bash.bashrc ]; then . /etc/bash.bashrc; fi
if [ -r ~/.bashrc ]; then . ~/.bashrc; fi"
        }
        Start::Login => {
            "# What an interactive login bash reads, with the $0 it has (bash 5 sets $0 so).
BASH_ARGV0=-${0##*/}
if [ -r /etc/profile ]; then . /etc/profile; fi
if [ -r ~/.bash_profile ]; then . ~/.bash_profile
elif [ -r ~/.bash_login ]; then . ~/.bash_login
elif [ -r ~/.profile ]; then . ~/.profile; fi"
        }
    }
}

fn bash_rc(read_nonce: &str, start: Start) -> String {
    format!(
        r#"# Generated by termsprawl-tools for one terminal; deleted when it closes.
{read_nonce}
{user_files}
if [ -n "${{__termsprawl_nonce-}}" ]; then
{functions}
__termsprawl_started() {{
  builtin local __termsprawl_line=
  # History's last entry is this line only if history took it (not with ignorespace,
  # ignoredups or history off): else no label rather than the line before's.
  if [[ ${{HISTCMD-}} != "${{__termsprawl_histcmd-}}" ]]; then
    __termsprawl_line=$(HISTTIMEFORMAT= builtin history 1)
    # "  123  line" or "  123* line": drop the number and the two characters after it.
    __termsprawl_line=${{__termsprawl_line#"${{__termsprawl_line%%[![:space:]]*}}"}}
    __termsprawl_line=${{__termsprawl_line#"${{__termsprawl_line%%[![:digit:]]*}}"}}
    __termsprawl_line=${{__termsprawl_line:2}}
  fi
  __termsprawl_escape "$__termsprawl_line"
  __termsprawl_mark "B;$__termsprawl_escaped"
  __termsprawl_mark C
}}
PS0='$(__termsprawl_started)'"${{PS0-}}"
PROMPT_COMMAND="__termsprawl_ended${{PROMPT_COMMAND:+;$PROMPT_COMMAND}}"
fi
"#,
        functions = mark_functions(),
        user_files = bash_user_files(start),
    )
}

fn zsh_env(read_nonce: &str, user_dir: Option<&str>) -> String {
    let restore = match user_dir {
        Some(dir) => format!("ZDOTDIR={}", quoted(dir)),
        None => "builtin unset ZDOTDIR".to_string(),
    };
    format!(
        r#"# Generated by termsprawl-tools for one terminal; deleted when it closes.
{read_nonce}
__termsprawl_shim=$ZDOTDIR
{restore}
if [[ -r ${{ZDOTDIR:-$HOME}}/.zshenv ]]; then builtin source ${{ZDOTDIR:-$HOME}}/.zshenv; fi
# The user's ZDOTDIR as their .zshenv left it, restored by our .zshrc.
if [[ -n ${{ZDOTDIR+set}} ]]; then __termsprawl_zdotdir=$ZDOTDIR; else builtin unset __termsprawl_zdotdir; fi
ZDOTDIR=$__termsprawl_shim
"#
    )
}

/// Read by a login zsh between `.zshenv` and `.zshrc`: the user's `.zprofile`, with
/// their `ZDOTDIR` while it runs (a non-login zsh never reads it).
const ZSH_PROFILE: &str = r#"# Generated by termsprawl-tools for one terminal; deleted when it closes.
if [[ -n ${__termsprawl_zdotdir+set} ]]; then ZDOTDIR=$__termsprawl_zdotdir; else builtin unset ZDOTDIR; fi
if [[ -r ${ZDOTDIR:-$HOME}/.zprofile ]]; then builtin source ${ZDOTDIR:-$HOME}/.zprofile; fi
if [[ -n ${ZDOTDIR+set} ]]; then __termsprawl_zdotdir=$ZDOTDIR; else builtin unset __termsprawl_zdotdir; fi
ZDOTDIR=$__termsprawl_shim
"#;

const ZSH_RC_START: &str = r#"# Generated by termsprawl-tools for one terminal; deleted when it closes.
if [[ -n ${__termsprawl_zdotdir+set} ]]; then ZDOTDIR=$__termsprawl_zdotdir; else builtin unset ZDOTDIR; fi
# A system zshrc that set HISTFILE from ZDOTDIR pointed it into our folder.
if [[ ${HISTFILE-} == $__termsprawl_shim/* ]]; then HISTFILE=${ZDOTDIR:-$HOME}/${HISTFILE:t}; fi
builtin unset __termsprawl_shim __termsprawl_zdotdir
if [[ -r ${ZDOTDIR:-$HOME}/.zshrc ]]; then builtin source ${ZDOTDIR:-$HOME}/.zshrc; fi
if [[ -n ${__termsprawl_nonce-} ]]; then
"#;

fn zsh_rc() -> String {
    format!(
        r#"{ZSH_RC_START}{functions}
__termsprawl_started() {{
  __termsprawl_escape "$1"
  __termsprawl_mark "B;$__termsprawl_escaped"
  __termsprawl_mark C
}}
if (( ${{+precmd_functions}} )); then precmd_functions=(__termsprawl_ended $precmd_functions); else precmd_functions=(__termsprawl_ended); fi
if (( ${{+preexec_functions}} )); then preexec_functions+=(__termsprawl_started); else preexec_functions=(__termsprawl_started); fi
fi
"#,
        functions = mark_functions()
    )
}

fn sh_env(read_nonce: &str, user_env: Option<&str>) -> String {
    let user_file = match user_env {
        Some(file) => format!("if [ -r {0} ]; then . {0}; fi\n", quoted(file)),
        None => String::new(),
    };
    format!(
        r#"# Generated by termsprawl-tools for one terminal; deleted when it closes.
{read_nonce}unset ENV
{user_file}if [ -n "${{__termsprawl_nonce-}}" ]; then
  # The folder goes as it is, or empty if it holds a control character (ESC, BEL would
  # end the mark early).
  __termsprawl_open=$(printf '\033]{OSC_NUMBER};')
  __termsprawl_close=$(printf '\007')
  PS1="${{__termsprawl_open}}\${{__termsprawl_nonce}};D;\$?${{__termsprawl_close}}${{__termsprawl_open}}\${{__termsprawl_nonce}};p;\${{PWD%%*[[:cntrl:]]*}}${{__termsprawl_close}}${{__termsprawl_open}}\${{__termsprawl_nonce}};A${{__termsprawl_close}}${{PS1-\$ }}"
fi
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_are_known_by_their_file_name() {
        assert_eq!(shell_kind("/bin/bash"), Some(ShellIntegration::Bash));
        assert_eq!(shell_kind("zsh"), Some(ShellIntegration::Zsh));
        assert_eq!(shell_kind("/usr/bin/dash"), Some(ShellIntegration::Sh));
        assert_eq!(shell_kind("/bin/sh"), Some(ShellIntegration::Sh));
        assert_eq!(shell_kind("/usr/bin/fish"), None);
        assert_eq!(shell_kind("/bin/bash5"), None);
        assert_eq!(shell_kind(""), None);
    }

    #[test]
    fn files_are_private_and_the_nonce_is_in_no_argument_or_variable() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("ts-inject-{}", random_hex(6).unwrap()));
        for (program, kind) in [
            ("/bin/bash", ShellIntegration::Bash),
            ("/usr/bin/zsh", ShellIntegration::Zsh),
            ("/bin/sh", ShellIntegration::Sh),
        ] {
            let injection = prepare(program, kind, Start::Interactive, &root, &|_| None).unwrap();
            let dir = injection.dir.clone();
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&root), 0o700);
            assert_eq!(mode(&dir), 0o700);
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                assert_eq!(mode(&path), 0o600, "{}", path.display());
                let text = std::fs::read_to_string(&path).unwrap();
                if !path.ends_with("nonce") {
                    assert!(!text.contains(&injection.nonce), "{}", path.display());
                }
            }
            assert_eq!(
                std::fs::read_to_string(dir.join("nonce")).unwrap(),
                injection.nonce
            );
            assert!(injection.argv.iter().all(|a| !a.contains(&injection.nonce)));
            assert!(injection
                .env
                .iter()
                .all(|(_, v)| !v.contains(&injection.nonce)));
            drop(injection);
            assert!(!dir.exists());
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_login_start_reads_the_login_files() {
        let root = std::env::temp_dir().join(format!("ts-login-{}", random_hex(6).unwrap()));
        let bash = prepare(
            "/bin/bash",
            ShellIntegration::Bash,
            Start::Login,
            &root,
            &|_| None,
        );
        let bash = bash.unwrap();
        assert_eq!(
            bash.argv[..2],
            ["/bin/bash", "--rcfile"],
            "no login bash reads an rcfile"
        );
        let rc = std::fs::read_to_string(&bash.argv[2]).unwrap();
        let profile = rc.find(". /etc/profile").unwrap();
        assert!(profile < rc.find(". ~/.bash_profile").unwrap(), "{rc}");
        assert!(!rc.contains("bash.bashrc"), "{rc}");
        assert!(rc.contains("BASH_ARGV0=-${0##*/}"), "{rc}");
        let zsh = prepare(
            "/usr/bin/zsh",
            ShellIntegration::Zsh,
            Start::Login,
            &root,
            &|_| None,
        );
        let zsh = zsh.unwrap();
        assert_eq!(zsh.argv, ["-zsh"]);
        assert!(zsh.dir.join(".zprofile").exists());
        let sh = prepare(
            "/bin/dash",
            ShellIntegration::Sh,
            Start::Login,
            &root,
            &|_| None,
        );
        assert_eq!(sh.unwrap().argv, ["-dash"]);
        drop((bash, zsh));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quoted("it's"), r"'it'\''s'");
    }
}
