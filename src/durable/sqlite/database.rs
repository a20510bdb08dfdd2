//! The daemon's one writing connection and the checks that keep it honest: every use first
//! checks the file at the configured path is still the one opened (removed or replaced under
//! a running daemon, its commits would land in a file nobody will ever read again, and the
//! trimmer would then drop the only other copy), and a corrupt file stops the daemon.

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
}

/// Shared handle to the daemon's database; used on blocking threads only.
pub(crate) type Db = Arc<Mutex<Database>>;

impl Database {
    /// Wraps `conn`, opened on `path`.
    pub(crate) fn new(conn: Connection, path: &Path) -> Result<Database> {
        let identity = identity(path)?;
        Ok(Database {
            conn,
            path: path.to_path_buf(),
            identity,
        })
    }

    /// Err([`Error::DatabaseUnusable`]) when the file at the path is gone or another file.
    fn check(&self) -> Result<()> {
        match identity(&self.path) {
            Ok(id) if id == self.identity => Ok(()),
            Ok(_) => Err(self.unusable("was replaced by another file while the daemon ran")),
            Err(_) => Err(self.unusable("was removed while the daemon ran")),
        }
    }

    fn unusable(&self, detail: &str) -> Error {
        Error::DatabaseUnusable {
            path: self.path.display().to_string(),
            detail: detail.to_string(),
        }
    }
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
/// the one opened.
pub(crate) async fn with_db<T: Send + 'static>(
    db: &Db,
    f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
) -> Result<T> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let mut db = db.lock().unwrap_or_else(|p| p.into_inner());
        db.check()?;
        let path = db.path.clone();
        f(&mut db.conn).map_err(|e| classify(e, &path))
    })
    .await
    .map_err(|e| Error::sqlite(format!("sqlite thread failed: {e}")))?
}
