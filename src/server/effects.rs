//! What the server does to its process: `docs/api/process-effects.md`, shown on
//! [`ProcessEffects`]'s page.

#[doc = include_str!("../../docs/api/process-effects.md")]
///
/// [`Default`]: everything on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessEffects {
    /// Search `/proc/self/fd` for the sockets of tiny_http's connections and act on them.
    pub search_descriptors: bool,
    /// `malloc_trim(0)` once no call has been made for a while.
    pub trim_heap: bool,
}

impl Default for ProcessEffects {
    fn default() -> Self {
        ProcessEffects {
            search_descriptors: true,
            trim_heap: true,
        }
    }
}
