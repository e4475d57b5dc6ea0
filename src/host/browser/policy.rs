//! Which URLs a page may load as a document: http, https and about:blank only.
//!
//! The runtime already refuses other URLs given to the tools; the engine applies the same
//! rule to what a page does by itself (links, redirects, `window.location`), and refuses
//! the ports handed to [`refuse_port`] (the canvas view's).

use std::sync::Mutex;

use crate::base::lock_or_recover;

/// True for `http:`/`https:` URLs and `about:blank` (with or without a fragment).
pub fn document_url_allowed(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    if lower == "about:blank" || lower.starts_with("about:blank#") {
        return true;
    }
    match lower.split_once("://") {
        // Never the canvas view, whose page acts for the person.
        _ if is_refused_address(&lower) => false,
        Some((scheme, rest)) => (scheme == "http" || scheme == "https") && !rest.is_empty(),
        None => false,
    }
}

/// Refuses every document from `port` on any host name, for the rest of the process: the
/// canvas view hands in its own port, since its page acts for the person.
pub fn refuse_port(port: u16) {
    lock_or_recover(&REFUSED_PORTS).push(port);
}

/// Ports no page may load a document from: the canvas views of this process, handed in
/// by the view when it binds ([`refuse_port`]).
static REFUSED_PORTS: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// Whether `url` (any case) names a refused port, on any host name (a name that resolves
/// to 127.0.0.1 reaches it too): so an agent's browser never opens the page that acts.
pub fn is_refused_address(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    // `[::1]:PORT` or `name:PORT`: the port follows the last ':' after any ']'.
    let after_bracket = host_port.rsplit(']').next().unwrap_or_default();
    let Some(port) = after_bracket
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok())
    else {
        return false;
    };
    lock_or_recover(&REFUSED_PORTS).contains(&port)
}

/// Chromium's own error page, shown after a failed navigation; it is not page content.
pub fn is_error_page(url: &str) -> bool {
    url.starts_with("chrome-error://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_documents_and_blank() {
        for ok in [
            "http://127.0.0.1:8080/",
            "https://example.com/a?b#c",
            "HTTPS://EXAMPLE.COM",
            "about:blank",
            "about:blank#top",
        ] {
            assert!(document_url_allowed(ok), "{ok}");
        }
        for refused in [
            "file:///etc/passwd",
            "data:text/html,<h1>x</h1>",
            "javascript:alert(1)",
            "chrome://settings",
            "devtools://devtools/bundled/inspector.html",
            "about:srcdoc",
            "about:version",
            "blob:https://example.com/1234",
            "filesystem:https://example.com/temporary/x",
            "view-source:https://example.com",
            "ftp://example.com/",
            "http:",
            "",
        ] {
            assert!(!document_url_allowed(refused), "{refused}");
        }
    }

    #[test]
    fn a_view_port_is_refused_on_any_host_name() {
        // Port 2: no other test names it (the registry is shared by the process).
        refuse_port(2);
        for refused in [
            "http://127.0.0.1:2/#key=ab",
            "http://localhost:2",
            "http://attacker.test:2/api/act",
            "http://user:pw@127.0.0.1:2/?x",
            "http://[::1]:2/",
            "ws://127.0.0.1:2/",
        ] {
            assert!(is_refused_address(refused), "{refused}");
        }
        for allowed in [
            "http://127.0.0.1:20/",
            "http://127.0.0.1/",
            "http://example.com/a:2",
            "http://example.com/?port=:2",
            "http://[::1]/",
            "about:blank",
            "http://127.0.0.1:99999/",
        ] {
            assert!(!is_refused_address(allowed), "{allowed}");
        }
    }
}
