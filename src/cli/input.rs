//! Payload arguments (message content, notes, prompts, rationales, outcomes and every JSON
//! value): given as text, as `-` (read stdin), or as `@PATH` (read a file); `@@...` is text
//! that starts with `@`. Stdin and files are taken byte for byte, so a payload is not bound
//! by Linux's 128 KiB limit on one argument. Read before anything is sent to Redis.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Error, Result};
use serde_json::Value;

/// Set once an argument has read stdin: a second `-` in the same command is refused.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// The text of payload argument `what` (e.g. `--content`): `raw` itself, stdin for `-`, the
/// file's content for `@PATH`, `raw` without its first `@` for `@@...`.
pub fn text(what: &str, raw: &str) -> Result<String> {
    if raw == "-" {
        if STDIN_TAKEN.swap(true, Ordering::SeqCst) {
            return Err(Error::InvalidInput(format!(
                "{what} -: stdin was already read by another argument; give this one as @FILE"
            )));
        }
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(format!("cannot read {what} from stdin: {e}")))?;
        return String::from_utf8(bytes)
            .map_err(|_| Error::InvalidInput(format!("{what} -: stdin is not UTF-8 text")));
    }
    if let Some(rest) = raw.strip_prefix("@@") {
        return Ok(format!("@{rest}"));
    }
    if let Some(path) = raw.strip_prefix('@') {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::io(format!(
                "cannot read {what} @{path}: {e} — name an existing file, or write @@ for text that starts with @"
            ))
        })?;
        return String::from_utf8(bytes).map_err(|_| {
            Error::InvalidInput(format!("{what} @{path}: the file is not UTF-8 text"))
        });
    }
    Ok(raw.to_string())
}

/// [`text`] for an optional argument.
pub fn opt_text(what: &str, raw: Option<String>) -> Result<Option<String>> {
    raw.map(|r| text(what, &r)).transpose()
}

/// The JSON value of payload argument `what` (text, `-` or `@PATH`, see [`text`]).
pub fn json(what: &'static str, raw: &str) -> Result<Value> {
    let text = text(what, raw)?;
    serde_json::from_str(&text).map_err(|e| Error::MalformedJson {
        what,
        detail: e.to_string(),
    })
}

/// [`json`] for an optional argument.
pub fn opt_json(what: &'static str, raw: Option<String>) -> Result<Option<Value>> {
    raw.map(|r| json(what, &r)).transpose()
}
