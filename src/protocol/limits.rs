//! The spec's boundary limits, in one place ("Boundary Conditions").

/// Request bodies are capped at 128 KiB.
pub const MAX_BODY_BYTES: usize = 128 * 1024;
/// Tool strings are capped at 64,000 characters (Unicode scalar values, as JSON Schema counts).
pub const MAX_STRING_CHARS: usize = 64_000;
/// Numbers must be finite and at most 1,000,000 in absolute value.
pub const MAX_NUMBER_ABS: i64 = 1_000_000;
/// Arrays hold 1 to 100 strings.
pub const MAX_ARRAY_ITEMS: usize = 100;
/// Each array item is under 256 characters.
pub const MAX_ITEM_CHARS: usize = 255;
/// Messages between agents (and their replies) hold 1 to 16,000 characters.
pub const MAX_MESSAGE_CHARS: usize = 16_000;
/// A call that waits (`terminal_submit` with `wait`, `terminal_wait`) waits 30 s unless
/// `timeoutMs` says otherwise, at most 10 min.
pub const WAIT_DEFAULT_MS: i64 = 30_000;
/// See [`WAIT_DEFAULT_MS`].
pub const WAIT_MAX_MS: i64 = 600_000;
/// `wait: "idle"` ends once the terminal has written nothing for this long.
pub const IDLE_MS: u64 = 2_000;
/// A command's output is cut to 16,000 characters (head and tail) unless `maxChars` asks
/// for 200 to 100,000.
pub const COMMAND_OUTPUT_DEFAULT_CHARS: i64 = 16_000;
/// See [`COMMAND_OUTPUT_DEFAULT_CHARS`].
pub const COMMAND_OUTPUT_MIN_CHARS: i64 = 200;
/// See [`COMMAND_OUTPUT_DEFAULT_CHARS`].
pub const COMMAND_OUTPUT_MAX_CHARS: i64 = 100_000;
/// A browser snapshot answer (`browser_inspect` with `mode: "snapshot"`) holds at most
/// this many characters unless `maxChars` says otherwise.
pub const SNAPSHOT_DEFAULT_CHARS: i64 = 12_000;
/// The smallest `maxChars` of a snapshot: room for its header line and its longest line
/// (hostile names escaped), so every page of an answer shows at least one line.
pub const SNAPSHOT_MIN_CHARS: i64 = 3_000;
/// The largest `maxChars` of a snapshot; the rest is read by `offset`.
pub const SNAPSHOT_MAX_CHARS: i64 = 40_000;
