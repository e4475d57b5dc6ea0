//! Which URLs a page may load as a document: http, https and about:blank only.
//!
//! The runtime already refuses other URLs given to the tools; the engine applies the same
//! rule to what a page does by itself (links, redirects, `window.location`).

/// True for `http:`/`https:` URLs and `about:blank` (with or without a fragment).
pub fn document_url_allowed(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    if lower == "about:blank" || lower.starts_with("about:blank#") {
        return true;
    }
    match lower.split_once("://") {
        // Never the canvas view, whose page acts for the person.
        _ if crate::host::view::is_view_address(&lower) => false,
        Some((scheme, rest)) => (scheme == "http" || scheme == "https") && !rest.is_empty(),
        None => false,
    }
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
}
