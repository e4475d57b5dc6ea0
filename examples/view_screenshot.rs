//! `cargo run --release --example view_screenshot -- VIEW_URL OUT.png [CLICK...]`: opens a
//! canvas view in headless Chromium (the library's own engine), waits until the page is
//! live and has drawn every terminal's screen, clicks each CSS selector CLICK in turn (a
//! real click; 1.5 s after each), and writes a PNG of it (1280 x 720). Used by
//! `docs/view-screenshot.sh` for the README's picture (`docs/canvas-view.png`).
#![deny(unsafe_code)]

use std::time::{Duration, Instant};

use termsprawl_tools::host::browser::{BrowserEngine, EngineConfig};

/// True once the page is live, has nodes, and every terminal shows a screen.
const DRAWN: &str = r#"() => {
  const live = document.getElementById("status").textContent === "live";
  const nodes = document.querySelectorAll(".node").length;
  const blank = Array.from(document.querySelectorAll(".kind-terminal:not(.ended) .screen"))
    .filter((s) => !s.closest(".node").querySelector(".meta").textContent.includes("elsewhere"))
    .some((s) => s.textContent === "");
  const shots = Array.from(document.querySelectorAll(".shot")).every((i) => !i.hidden);
  return live && nodes > 0 && !blank && shots;
}"#;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, out, clicks @ ..] = args.as_slice() else {
        return Err("usage: view_screenshot VIEW_URL OUT.png [CLICK_SELECTOR...]".into());
    };
    let profile = std::env::temp_dir().join(format!("view-screenshot-{}", std::process::id()));
    let engine = BrowserEngine::new(EngineConfig {
        executable: None,
        profile_dir: profile.clone(),
    });
    let deadline = |s| Instant::now() + Duration::from_secs(s);
    let page = engine
        .open_page(url, deadline(30))
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    while engine
        .evaluate(&page, DRAWN, &serde_json::json!({}), deadline(5))
        .ok()
        != Some(serde_json::Value::Bool(true))
    {
        if started.elapsed() > Duration::from_secs(20) {
            return Err("the view did not finish drawing within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for selector in clicks {
        engine
            .click(&page, selector, deadline(10))
            .map_err(|e| format!("click {selector}: {e}"))?;
        std::thread::sleep(Duration::from_millis(1500));
    }
    let png = engine
        .screenshot(&page, deadline(10))
        .map_err(|e| e.to_string())?;
    std::fs::write(out, decode_base64(&png)?).map_err(|e| format!("write {out}: {e}"))?;
    engine.shutdown();
    let _ = std::fs::remove_dir_all(profile);
    Ok(())
}

fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|&c| c != b'=') {
        let value = ALPHABET.iter().position(|&a| a == c).ok_or("not base64")? as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
        }
    }
    Ok(bytes)
}
