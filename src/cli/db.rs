//! `agentstate db copy --to URL`: the durable tier moved from a SQLite file (`--db`) into
//! PostgreSQL (`durable::copy`), with a progress bar per table and a row-count comparison.

use crate::durable::copy;
use crate::durable::Location;
use crate::{Error, Result};

use super::{print_json, Global};

/// `agentstate db …`: the durable tier as a whole.
#[derive(Debug, clap::Subcommand)]
pub enum DbCmd {
    /// Copy the SQLite durable tier (`--db`) into a PostgreSQL database, cursors included,
    /// so `agentstate spill --db URL` resumes where SQLite stopped. Safe to run again after
    /// an interruption; refuses a database that holds another namespace.
    #[command(after_help = super::help::DB_COPY)]
    Copy {
        /// The target: postgres://user:password@host:port/database.
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

/// Runs `agentstate db …`; prints one line per table (`TABLE SOURCE TARGET`, JSON lines
/// with `--json`), and fails when a table's counts differ.
pub async fn run(global: &Global, cmd: DbCmd) -> Result<()> {
    let DbCmd::Copy { to } = cmd;
    if !crate::durable::postgres::is_url(&to) {
        return Err(Error::InvalidInput(format!(
            "--to {to:?} is not a postgres:// or postgresql:// URL"
        )));
    }
    let source = global.db();
    if let Location::Postgres(_) = Location::of(&source) {
        return Err(Error::InvalidInput(
            "--db names PostgreSQL already: db copy reads a SQLite file (--db PATH)".into(),
        ));
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:12} {bar:30} {pos}/{len} rows")
            .expect("a valid template"),
    );
    let progress = |table: &str, total: u64, done: u64| {
        if done == 0 {
            bar.set_message(table.to_string());
            bar.set_length(total);
        }
        bar.set_position(done);
    };
    let counts = copy::sqlite_to_postgres(&source, &to, &progress).await?;
    bar.finish_and_clear();
    for c in &counts {
        if global.json() {
            print_json(c)?;
        } else {
            println!("{:<12} {:>10} {:>10}", c.table, c.source, c.target);
        }
    }
    let differ: Vec<String> = counts
        .iter()
        .filter(|c| c.source != c.target)
        .map(|c| format!("{} {} -> {}", c.table, c.source, c.target))
        .collect();
    if !differ.is_empty() {
        return Err(Error::postgres(format!(
            "row counts differ after the copy ({}): the target held rows the file does not (another copy or a daemon already writing it?)",
            differ.join(", ")
        )));
    }
    let rows: u64 = counts.iter().map(|c| c.source).sum();
    eprintln!(
        "copied {rows} rows in {} tables into {}; every table's count matches — start the daemon on it: agentstate spill --db URL",
        counts.len(),
        crate::address::redacted_db(&to)
    );
    Ok(())
}
