//! The daemon's one writing connection and the checks that keep it honest: every use first
//! checks the file at the configured path is still the one opened (removed or replaced under
//! a running daemon, its commits would land in a file nobody will ever read again, and the
//! trimmer would then drop the only other copy), and a corrupt file stops the daemon.
//!
//! The same holds for the file's write-ahead log (`-wal`), where a commit lands first: SQLite
//! keeps it while any connection is open, so while the daemon runs it is the one file it
//! opened. Another copy of SQLite in this process (Python's `sqlite3` module beside the
//! wheel's) shares the process' POSIX locks: its `BEGIN EXCLUSIVE` does not hold the daemon
//! off, and closing its connection takes itself for the last one and deletes the log the
//! daemon goes on committing into. So the log is checked after each use too, before a commit
//! is reported: a commit that did not reach the file is never published nor trimmed below.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, ErrorCode};

use crate::error::{Error, Result};

/// The writing connection with the identity of the file it opened.
pub(crate) struct Database {
    /// The connection (WAL journal, migrated, namespace checked).
    conn: Connection,
    /// The configured path, checked before each use.
    path: PathBuf,
    /// (device, inode) of the file at `path` when it was opened.
    identity: (u64, u64),
    /// (device, inode) of its `-wal` once seen (a read-only open may find none).
    wal: Option<(u64, u64)>,
}

/// Shared handle to the daemon's database; used on blocking threads only.
pub(crate) type Db = Arc<Mutex<Database>>;

impl Database {
    /// Wraps `conn`, opened on `path`.
    pub(crate) fn new(conn: Connection, path: &Path) -> Result<Database> {
        let identity = identity(path)?;
        let mut db = Database {
            conn,
            path: path.to_path_buf(),
            identity,
            wal: None,
        };
        db.check()?;
        Ok(db)
    }

    /// Err([`Error::DatabaseUnusable`]) when the file at the path is gone or another file, or
    /// its `-wal` once seen is (a commit there reaches no reader).
    fn check(&mut self) -> Result<()> {
        match identity(&self.path) {
            Ok(id) if id == self.identity => {}
            Ok(_) => return Err(self.unusable("was replaced by another file while the daemon ran")),
            Err(_) => return Err(self.unusable("was removed while the daemon ran")),
        }
        let wal = identity(&wal_path(&self.path)).ok();
        match (self.wal, wal) {
            (None, _) => self.wal = wal,
            (Some(seen), Some(now)) if seen == now => {}
            _ => return Err(self.unusable(WAL_LOST)),
        }
        Ok(())
    }

    fn unusable(&self, detail: &str) -> Error {
        Error::DatabaseUnusable {
            path: self.path.display().to_string(),
            detail: detail.to_string(),
        }
    }
}

/// Why the daemon stops when its write-ahead log went away under it.
const WAL_LOST: &str = "lost its write-ahead log (-wal) while the daemon ran: another program deleted it, or another copy of SQLite in the daemon's process (such as Python's sqlite3 module) opened the file and closed it: POSIX locks do not separate the connections of one process, so that copy neither waited for the daemon's commits nor saw them. Commits since are not in the file and were neither published nor trimmed";

/// The write-ahead log SQLite keeps beside `path`.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// (device, inode) of the file at `path`.
fn identity(path: &Path) -> Result<(u64, u64)> {
    let meta =
        std::fs::metadata(path).map_err(|e| Error::sqlite(format!("{}: {e}", path.display())))?;
    Ok((meta.dev(), meta.ino()))
}

/// True when SQLite found the file is not a (sound) database.
pub(crate) fn is_corrupt(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// `Error::DatabaseUnusable` for a corrupt file, else `err` unchanged.
pub(crate) fn classify(err: Error, path: &Path) -> Error {
    let corrupt = match &err {
        Error::Sqlite {
            source: Some(source),
            ..
        } => source
            .downcast_ref::<rusqlite::Error>()
            .is_some_and(is_corrupt),
        _ => false,
    };
    if corrupt {
        Error::DatabaseUnusable {
            path: path.display().to_string(),
            detail: format!("is corrupt ({err})"),
        }
    } else {
        err
    }
}

/// Runs `f` with the SQLite connection on a blocking thread, after checking the file is still
/// the one opened, and checks it again before reporting what `f` did (a commit into a log
/// that left the file reached nobody).
pub(crate) async fn with_db<T: Send + 'static>(
    db: &Db,
    f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
) -> Result<T> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let mut db = db.lock().unwrap_or_else(|p| p.into_inner());
        db.check()?;
        let path = db.path.clone();
        let done = f(&mut db.conn).map_err(|e| classify(e, &path));
        db.check()?;
        done
    })
    .await
    .map_err(|e| Error::sqlite(format!("sqlite thread failed: {e}")))?
}
