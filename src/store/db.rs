//! [`Store`]: moat's SQLite database (`state.db`): opening it, its schema steps, and the
//! clock every row is stamped with.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

use super::error::SqlContext;
use super::StoreError;

/// Schema steps, applied in order above the stored `PRAGMA user_version`.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE sessions (
        key TEXT PRIMARY KEY,
        container TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        last_used_ms INTEGER NOT NULL
     );
     CREATE TABLE processes (
        id TEXT PRIMARY KEY,
        session TEXT NOT NULL,
        container TEXT NOT NULL,
        run_dir TEXT NOT NULL,
        command TEXT NOT NULL,
        cwd TEXT NOT NULL,
        pty INTEGER NOT NULL,
        background INTEGER NOT NULL,
        started_at_ms INTEGER NOT NULL,
        timeout_secs INTEGER,
        status TEXT NOT NULL,
        exit_code INTEGER,
        signal TEXT,
        timed_out INTEGER NOT NULL DEFAULT 0,
        finished_at_ms INTEGER,
        read_offset INTEGER NOT NULL DEFAULT 0
     );
     CREATE INDEX processes_session ON processes(session, started_at_ms);",
    "CREATE TABLE session_policy (
        key TEXT PRIMARY KEY,
        security TEXT,
        ask TEXT,
        loosen INTEGER NOT NULL DEFAULT 0
     );",
    "CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        session TEXT NOT NULL,
        requester TEXT NOT NULL,
        agent TEXT,
        target TEXT NOT NULL,
        command TEXT NOT NULL,
        plan TEXT NOT NULL,
        binding TEXT NOT NULL,
        request TEXT NOT NULL,
        reason TEXT NOT NULL,
        allowed TEXT NOT NULL,
        persist TEXT NOT NULL,
        covered INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        decision TEXT,
        decided_by TEXT,
        decided_at_ms INTEGER,
        used_at_ms INTEGER,
        process_id TEXT
     );
     CREATE INDEX approvals_status ON approvals(status, created_at_ms);
     CREATE TABLE allowlist (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        target TEXT NOT NULL,
        entry TEXT NOT NULL,
        command TEXT,
        source TEXT NOT NULL,
        approval_id TEXT,
        added_by TEXT NOT NULL,
        added_at_ms INTEGER NOT NULL,
        UNIQUE(target, entry)
     );
     CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        approval_id TEXT,
        session TEXT,
        actor TEXT NOT NULL,
        detail TEXT NOT NULL
     );
     CREATE TABLE skill_state (
        name TEXT PRIMARY KEY,
        enabled INTEGER NOT NULL,
        changed_by TEXT NOT NULL,
        changed_at_ms INTEGER NOT NULL
     );",
    // Exact-command allowlist entries are scoped to a session and a working directory. Rows
    // from before keep NULL here and match nothing (their hash covers the command alone).
    "ALTER TABLE allowlist ADD COLUMN session TEXT;
     ALTER TABLE allowlist ADD COLUMN cwd TEXT;",
    // Where a process's output record starts once spill freed older bytes, and how many lines
    // came before, so a moat that re-attaches numbers lines of the whole output too.
    "CREATE TABLE process_record (
        id TEXT PRIMARY KEY,
        start_offset INTEGER NOT NULL,
        lines_before INTEGER NOT NULL,
        at_line_start INTEGER NOT NULL
     );",
    // What a session was created with (a host workspace and the user its container runs as),
    // fixed for its life;
    // and the working directory and variables a sticky session carries between commands.
    "CREATE TABLE session_setup (
        key TEXT PRIMARY KEY,
        workspace TEXT,
        read_only INTEGER NOT NULL DEFAULT 0,
        user TEXT,
        image TEXT,
        network TEXT
     );
     CREATE TABLE session_sticky (
        key TEXT PRIMARY KEY,
        enabled INTEGER,
        cwd TEXT,
        env TEXT NOT NULL DEFAULT '{}'
     );",
    // An operator's per-session egress override (`moat sessions egress`): extra allow and
    // deny entries (JSON arrays) and the ask mode (docs/security.md, "Network egress").
    "CREATE TABLE session_egress (
        key TEXT PRIMARY KEY,
        allow TEXT NOT NULL,
        deny TEXT NOT NULL,
        ask TEXT
     );",
    // A host workspace whose git metadata the sandbox may write (`moat sessions create
    // --git-writable`); rows from before were made when .git was always writable, but they
    // keep 0: the next container of such a session gets .git read-only (docs/security.md,
    // "Host workspaces").
    "ALTER TABLE session_setup ADD COLUMN git_writable INTEGER NOT NULL DEFAULT 0;",
    "ALTER TABLE session_setup ADD COLUMN runtime TEXT;",
    // E2B's sandboxes: root allowed, and the workspace at the user's home too (docs/e2b.md).
    "ALTER TABLE session_setup ADD COLUMN root INTEGER NOT NULL DEFAULT 0;",
    "ALTER TABLE session_setup ADD COLUMN home TEXT;",
    // A session whose container was claimed from the warm pool (docs/pool.md, "Claims"): the
    // pool slot's key, which the container's labels still carry and its disk is named by.
    "CREATE TABLE pool_claims (
        key TEXT PRIMARY KEY,
        slot TEXT NOT NULL UNIQUE,
        claimed_at_ms INTEGER NOT NULL
     );",
    // Pairings (docs/nodes.md, "Pairing"): on a node, the tokens issued to gateways (by
    // hash); on a gateway, the nodes it pinned and the token it presents to each.
    "CREATE TABLE node_tokens (
        gateway TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        created_at_ms INTEGER NOT NULL,
        revoked_at_ms INTEGER
     );
     CREATE TABLE nodes (
        name TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        token TEXT NOT NULL,
        added_at_ms INTEGER NOT NULL
     );",
    // A session's default node, set by the operator (`moat sessions set KEY --node NAME`;
    // docs/nodes.md, "Calls"): where its `host: "node"` calls that name no node go.
    "CREATE TABLE session_node (
        key TEXT PRIMARY KEY,
        node TEXT NOT NULL
     );",
];

/// See the module docs.
pub struct Store {
    /// Why a std mutex: no statement awaits while holding it, and each is microseconds.
    conn: Mutex<Connection>,
}

impl Store {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Self::init(conn)
    }

    /// A private in-memory database, for tests.
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().ctx("open in-memory database")?;
        Self::init(conn)
    }

    fn init(mut conn: Connection) -> Result<Self, StoreError> {
        // Switching a fresh database to WAL takes an exclusive lock, and SQLite answers BUSY
        // at once there instead of calling the busy handler: two openers of a new home (the
        // daemon and an operator command) retry for up to the busy timeout.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match conn.execute_batch(
                "PRAGMA busy_timeout=5000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
            ) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => {
                    other.ctx("configure state database")?;
                    break;
                }
            }
        }
        let read_version = |c: &Connection| -> Result<usize, StoreError> {
            let v: i64 = c
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .ctx("read schema version")?;
            Ok(v.max(0) as usize)
        };
        if read_version(&conn)? < MIGRATIONS.len() {
            // Two openers of a fresh database (the daemon and an operator command) must not
            // both migrate: the write lock is taken first, then the version read again.
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .ctx("begin migration")?;
            let version = read_version(&tx)?;
            for step in MIGRATIONS.iter().skip(version) {
                tx.execute_batch(step).ctx("migrate state database")?;
            }
            tx.execute_batch(&format!("PRAGMA user_version = {}", MIGRATIONS.len()))
                .ctx("record schema version")?;
            tx.commit().ctx("commit migration")?;
        }
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (statements are atomic).
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one statement prepared once per connection: the statements every command runs
    /// (its process row, its session's settings) are parsed again otherwise each time.
    pub(super) fn execute_cached<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> rusqlite::Result<usize> {
        self.conn().prepare_cached(sql)?.execute(params)
    }

    /// The one row of a query prepared once per connection (see [`Self::execute_cached`]).
    pub(super) fn query_row_cached<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.conn().prepare_cached(sql)?.query_row(params, row)
    }
}

/// Statements kept prepared per connection: room for every one a command runs, and more.
const STATEMENT_CACHE: usize = 64;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Openers racing on a fresh database used to fail with "table sessions already exists".
    #[test]
    fn racing_openers_of_a_fresh_database_migrate_once() {
        for _ in 0..30 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.db");
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let path = path.clone();
                    std::thread::spawn(move || Store::open(&path).map(|_| ()))
                })
                .collect();
            for t in threads {
                t.join().unwrap().unwrap();
            }
        }
    }
}
