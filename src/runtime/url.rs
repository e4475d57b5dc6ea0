//! The browser URL policy of `browser_open` and `browser_navigate`.

/// The refusal every disallowed URL gets.
pub const URL_NOT_ALLOWED: &str = "Browser URL is not allowed";

/// Normalizes what an agent typed into a URL a browser node may load: trims it; lets
/// `about:blank` and `about:srcdoc` pass; gives `localhost[:port]` `http://` and any other
/// scheme-less text `https://`; then accepts only http(s) URLs with a host and without
/// `user:password@`. Everything else (`file:`, `javascript:`, `data:`, `chrome:` …) is
/// refused with [`URL_NOT_ALLOWED`].
pub fn normalize_browser_url(raw: &str) -> Result<String, String> {
    let text = raw.trim();
    if text == "about:blank" || text == "about:srcdoc" {
        return Ok(text.to_string());
    }
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(URL_NOT_ALLOWED.to_string());
    }
    let url = match scheme_of(text) {
        Some(_) => text.to_string(),
        None if is_localhost(text) => format!("http://{text}"),
        None => format!("https://{text}"),
    };
    let (scheme, rest) = url.split_once(':').ok_or(URL_NOT_ALLOWED)?;
    let authority = rest
        .strip_prefix("//")
        .and_then(|after| after.split(['/', '?', '#']).next());
    let host_ok =
        authority.is_some_and(|a| !a.is_empty() && !a.starts_with(':') && !a.contains('@'));
    if host_ok && matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        Ok(url)
    } else {
        Err(URL_NOT_ALLOWED.to_string())
    }
}

/// The scheme of `text`, unless what looks like one is really `host:port`.
fn scheme_of(text: &str) -> Option<&str> {
    let (scheme, rest) = text.split_once(':')?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after_port = &rest[port.len()..];
    let is_host_port =
        !port.is_empty() && (after_port.is_empty() || after_port.starts_with(['/', '?', '#']));
    (valid && !is_host_port).then_some(scheme)
}

fn is_localhost(text: &str) -> bool {
    let name = text.split(['/', '?', '#', ':']).next().unwrap_or("");
    name.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_what_agents_type() {
        for (input, expected) in [
            ("  example.com ", "https://example.com"),
            ("example.com:8443/a?b", "https://example.com:8443/a?b"),
            ("localhost", "http://localhost"),
            ("localhost:3000/app", "http://localhost:3000/app"),
            ("LOCALHOST:5173", "http://LOCALHOST:5173"),
            ("127.0.0.1:8080", "https://127.0.0.1:8080"),
            ("http://localhost:3000", "http://localhost:3000"),
            ("HTTPS://Example.com/x", "HTTPS://Example.com/x"),
            ("about:blank", "about:blank"),
            (" about:srcdoc", "about:srcdoc"),
        ] {
            assert_eq!(
                normalize_browser_url(input).as_deref(),
                Ok(expected),
                "{input}"
            );
        }
    }

    #[test]
    fn refuses_everything_but_plain_http() {
        for input in [
            "",
            "   ",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,<b>x</b>",
            "chrome://settings",
            "devtools://devtools/bundled/inspector.html",
            "about:config",
            "view-source:https://example.com",
            "ftp://example.com",
            "https://user:pass@example.com",
            "user:pass@example.com",
            "https://",
            "http:///path",
            "https://:80",
            "http:example.com",
            "https://exa mple.com",
            "https://example.com/a\tb",
        ] {
            assert_eq!(
                normalize_browser_url(input),
                Err(URL_NOT_ALLOWED.to_string()),
                "{input:?}"
            );
        }
    }
}
