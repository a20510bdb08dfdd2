//! The one loader of `lua/`: builds a script as Redis runs it from its file and the prelude
//! helpers it includes, and keeps where each line of the built text came from, so a Redis
//! error's `user_script:NN` can name the file and line that failed. The library, the daemon
//! and the benchmarks (`agentstate bench --print-script`) all build their scripts here.
//!
//! Includes are said, not guessed: a script names the helpers of `lua/_prelude.lua` its code
//! uses on `-- @include a, b` lines after its header, and a helper names those it uses on such
//! a line in its comment. The script carries the named helpers and, transitively, theirs, in
//! the prelude's order (a `local` must be defined before the code that uses it), and no other:
//! every definition carried runs again on each call (a closure made per function), which cost
//! a lone append ~4 % of its Redis instructions with the whole prelude.

use std::sync::LazyLock;

/// `lua/_prelude.lua`, the scripts' shared library.
const PRELUDE: &str = include_str!("../../lua/_prelude.lua");

/// The prelude's path as errors name it.
const PRELUDE_FILE: &str = "lua/_prelude.lua";

/// One top-level definition of the prelude (`local function name` / `local name =`), with the
/// comment lines above it.
pub(super) struct Def {
    pub(super) name: &'static str,
    /// Its text, comment lines first, up to the next definition's comment.
    pub(super) text: &'static str,
    /// The line of the prelude its text starts at (1-based).
    line: usize,
}

/// The prelude's definitions, in order.
pub(super) static DEFS: LazyLock<Vec<Def>> = LazyLock::new(|| {
    let lines: Vec<&'static str> = PRELUDE.split_inclusive('\n').collect();
    let offset = |i: usize| -> usize { lines[..i].iter().map(|l| l.len()).sum() };
    // (name, first line index, end line index), comment lines included.
    let mut spans: Vec<(&'static str, usize, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = defined_at(line) {
            let mut start = i;
            while start > 0 && lines[start - 1].starts_with("--") {
                start -= 1;
            }
            if let Some(last) = spans.last_mut() {
                last.2 = start;
            }
            spans.push((name, start, lines.len()));
        }
    }
    spans
        .into_iter()
        .map(|(name, a, b)| Def {
            name,
            text: &PRELUDE[offset(a)..offset(b)],
            line: a + 1,
        })
        .collect()
});

/// The name a prelude line defines at the top level, if it is a definition.
fn defined_at(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("local function ").or_else(|| {
        line.strip_prefix("local ")
            .filter(|r| r.split_whitespace().nth(1) == Some("="))
    })?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The names on `text`'s `-- @include a, b` lines, in order.
pub(super) fn includes_of(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("-- @include "))
        .flat_map(|names| names.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect()
}

/// A script as Redis runs it, and the map from its lines back to the files.
#[derive(Debug)]
pub struct Built {
    /// The text sent to Redis.
    pub text: String,
    /// (first line in `text`, file, the line it is in that file) of each piece, in order,
    /// lines 1-based.
    pieces: Vec<(usize, String, usize)>,
}

impl Built {
    /// The file and line of line `line` (1-based) of the built text, as `lua/<file>.lua:MM`.
    pub fn locate(&self, line: usize) -> Option<String> {
        let (first, file, at) = self.pieces.iter().rev().find(|(f, ..)| *f <= line)?;
        Some(format!("{file}:{}", at + line - first))
    }
}

/// Builds `lua/<file>.lua` (its text `body`): the Redis 7 shebang for `flags` if any (it must
/// be the first line), the prelude definitions the body includes and theirs, the body. An
/// error names an included name the prelude does not define.
pub fn build(file: &str, body: &str, flags: Option<&str>) -> Result<Built, String> {
    let path = format!("lua/{file}.lua");
    let defs = &*DEFS;
    let mut needed = vec![false; defs.len()];
    let mut todo: Vec<(&str, &str)> = includes_of(body).into_iter().map(|n| (n, &*path)).collect();
    while let Some((name, by)) = todo.pop() {
        let i = defs.iter().position(|d| d.name == name).ok_or_else(|| {
            format!("{by} includes `{name}`, which {PRELUDE_FILE} does not define")
        })?;
        if !needed[i] {
            needed[i] = true;
            todo.extend(
                includes_of(defs[i].text)
                    .into_iter()
                    .map(|n| (n, defs[i].name)),
            );
        }
    }
    let mut text = String::new();
    let mut pieces = Vec::new();
    let mut line = 1;
    let mut add = |piece: &str, file: &str, at: usize| {
        text.push_str(piece);
        pieces.push((line, file.to_string(), at));
        line += piece.matches('\n').count();
    };
    if let Some(flags) = flags {
        add(&format!("#!lua flags={flags}\n"), "(shebang)", 1);
    }
    for (def, _) in defs.iter().zip(&needed).filter(|(_, n)| **n) {
        add(def.text, PRELUDE_FILE, def.line);
    }
    add(body, &path, 1);
    Ok(Built { text, pieces })
}

/// `message` with each `user_script:NN` (the line of the built script Redis names in a
/// script's error) replaced by the file and line it came from, using `built`.
pub(super) fn map_lines(message: &str, built: &Built) -> String {
    const TAG: &str = "user_script:";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(TAG) {
        let digits = &rest[at + TAG.len()..];
        let len = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let place = digits[..len].parse().ok().and_then(|n| built.locate(n));
        out.push_str(&rest[..at]);
        match place {
            Some(place) => out.push_str(&place),
            None => out.push_str(&rest[at..at + TAG.len() + len]),
        }
        rest = &digits[len..];
    }
    out.push_str(rest);
    out
}
