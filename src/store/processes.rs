//! The durable index of processes: one row per process moat started (its output stays in
//! the run directory's log).

use rusqlite::{params, OptionalExtension};

use super::error::SqlContext;
use super::{Store, StoreError};

/// Lifecycle of a process as persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessStatus {
    Running,
    Completed,
    Failed,
}

impl ProcessStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessStatus::Running => "running",
            ProcessStatus::Completed => "completed",
            ProcessStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "completed" => ProcessStatus::Completed,
            "failed" => ProcessStatus::Failed,
            _ => ProcessStatus::Running,
        }
    }
}

/// One process in the durable index. Output itself lives in the run directory's log file.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRow {
    pub id: String,
    pub session: String,
    pub container: String,
    /// Host directory with the process's `.out`, `.in`, `.pid`, `.exit` files.
    pub run_dir: String,
    pub command: String,
    pub cwd: String,
    pub pty: bool,
    pub background: bool,
    pub started_at_ms: i64,
    pub timeout_secs: Option<u64>,
    pub status: ProcessStatus,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
    pub timed_out: bool,
    pub finished_at_ms: Option<i64>,
    /// Bytes of the log already handed out by `poll`, so a restart does not repeat them.
    pub read_offset: u64,
}

const COLUMNS: &str = "id, session, container, run_dir, command, cwd, pty, background, started_at_ms, timeout_secs, status, exit_code, signal, timed_out, finished_at_ms, read_offset";

impl Store {
    pub fn insert_process(&self, p: &ProcessRow) -> Result<(), StoreError> {
        self.execute_cached(
                &format!("INSERT INTO processes ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"),
                params![
                    p.id,
                    p.session,
                    p.container,
                    p.run_dir,
                    p.command,
                    p.cwd,
                    p.pty,
                    p.background,
                    p.started_at_ms,
                    p.timeout_secs.map(|t| t as i64),
                    p.status.as_str(),
                    p.exit_code,
                    p.signal,
                    p.timed_out,
                    p.finished_at_ms,
                    p.read_offset as i64,
                ],
            )
            .ctx("record process")?;
        Ok(())
    }

    pub fn finish_process(
        &self,
        id: &str,
        status: ProcessStatus,
        exit_code: Option<i64>,
        signal: Option<&str>,
        timed_out: bool,
        finished_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.execute_cached(
                "UPDATE processes SET status = ?2, exit_code = ?3, signal = ?4, timed_out = ?5, finished_at_ms = ?6 WHERE id = ?1",
                params![id, status.as_str(), exit_code, signal, timed_out, finished_at_ms],
            )
            .ctx("record process exit")?;
        Ok(())
    }

    pub fn set_background(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("UPDATE processes SET background = 1 WHERE id = ?1", [id])
            .ctx("mark process as background")?;
        Ok(())
    }

    pub fn set_read_offset(&self, id: &str, offset: u64) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE processes SET read_offset = ?2 WHERE id = ?1",
                params![id, offset as i64],
            )
            .ctx("record poll position")?;
        Ok(())
    }

    pub fn process(&self, id: &str) -> Result<Option<ProcessRow>, StoreError> {
        self.query_row_cached(
            &format!("SELECT {COLUMNS} FROM processes WHERE id = ?1"),
            [id],
            row,
        )
        .optional()
        .ctx("read process")
    }

    /// A session's processes, newest first.
    pub fn processes(&self, session: &str) -> Result<Vec<ProcessRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM processes WHERE session = ?1 ORDER BY started_at_ms DESC, id DESC"
            ))
            .ctx("list processes")?;
        let rows = stmt.query_map([session], row).ctx("list processes")?;
        rows.collect::<Result<_, _>>().ctx("list processes")
    }

    /// Every process of every session, newest first (sessions sharing a container list each
    /// other's).
    pub fn all_processes(&self) -> Result<Vec<ProcessRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM processes ORDER BY started_at_ms DESC, id DESC"
            ))
            .ctx("list processes")?;
        let rows = stmt.query_map([], row).ctx("list processes")?;
        rows.collect::<Result<_, _>>().ctx("list processes")
    }

    /// Every process still marked running (to re-attach after a restart).
    pub fn running_processes(&self) -> Result<Vec<ProcessRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM processes WHERE status = 'running'"
            ))
            .ctx("list running processes")?;
        let rows = stmt.query_map([], row).ctx("list running processes")?;
        rows.collect::<Result<_, _>>().ctx("list running processes")
    }

    pub fn process_id_taken(&self, id: &str) -> bool {
        self.process(id).ok().flatten().is_some()
    }

    pub fn delete_process(&self, id: &str) -> Result<(), StoreError> {
        self.execute_cached("DELETE FROM processes WHERE id = ?1", [id])
            .ctx("forget process")?;
        self.execute_cached("DELETE FROM process_record WHERE id = ?1", [id])
            .ctx("forget process record start")?;
        Ok(())
    }

    /// Records where the output record of `id` starts after spill freed older bytes: the log
    /// offset, the lines before it, and whether it starts a line.
    pub fn set_record_start(
        &self,
        id: &str,
        offset: u64,
        lines_before: u64,
        at_line_start: bool,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO process_record (id, start_offset, lines_before, at_line_start) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id) DO UPDATE SET start_offset = ?2, lines_before = ?3, at_line_start = ?4",
                params![id, offset as i64, lines_before as i64, at_line_start],
            )
            .ctx("record where the output record starts")?;
        Ok(())
    }

    /// What [`Store::set_record_start`] recorded for `id`, if anything.
    pub fn record_start(&self, id: &str) -> Result<Option<(u64, u64, bool)>, StoreError> {
        self.conn()
            .query_row(
                "SELECT start_offset, lines_before, at_line_start FROM process_record WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)? as u64,
                        r.get::<_, i64>(1)? as u64,
                        r.get::<_, bool>(2)?,
                    ))
                },
            )
            .optional()
            .ctx("read where the output record starts")
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ProcessRow> {
    Ok(ProcessRow {
        id: r.get(0)?,
        session: r.get(1)?,
        container: r.get(2)?,
        run_dir: r.get(3)?,
        command: r.get(4)?,
        cwd: r.get(5)?,
        pty: r.get(6)?,
        background: r.get(7)?,
        started_at_ms: r.get(8)?,
        timeout_secs: r.get::<_, Option<i64>>(9)?.map(|t| t as u64),
        status: ProcessStatus::parse(&r.get::<_, String>(10)?),
        exit_code: r.get(11)?,
        signal: r.get(12)?,
        timed_out: r.get(13)?,
        finished_at_ms: r.get(14)?,
        read_offset: r.get::<_, i64>(15)? as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: &str, session: &str, started: i64) -> ProcessRow {
        ProcessRow {
            id: id.into(),
            session: session.into(),
            container: "c".into(),
            run_dir: "/r".into(),
            command: "echo hi".into(),
            cwd: "/workspace".into(),
            pty: false,
            background: false,
            started_at_ms: started,
            timeout_secs: Some(5),
            status: ProcessStatus::Running,
            exit_code: None,
            signal: None,
            timed_out: false,
            finished_at_ms: None,
            read_offset: 0,
        }
    }

    #[test]
    fn lifecycle_round_trips() {
        let s = Store::in_memory().unwrap();
        s.insert_process(&sample("a", "s1", 1)).unwrap();
        s.insert_process(&sample("b", "s1", 2)).unwrap();
        s.insert_process(&sample("c", "s2", 3)).unwrap();
        assert_eq!(
            s.processes("s1")
                .unwrap()
                .iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>(),
            ["b", "a"]
        );
        s.finish_process("a", ProcessStatus::Failed, Some(3), None, false, 9)
            .unwrap();
        s.set_read_offset("a", 42).unwrap();
        let a = s.process("a").unwrap().unwrap();
        assert_eq!(
            (a.status, a.exit_code, a.read_offset),
            (ProcessStatus::Failed, Some(3), 42)
        );
        assert_eq!(s.running_processes().unwrap().len(), 2);
        assert!(s.process_id_taken("c"));
        s.delete_process("c").unwrap();
        assert!(!s.process_id_taken("c"));
    }

    #[test]
    fn record_start_is_kept_until_the_process_is_forgotten() {
        let s = Store::in_memory().unwrap();
        assert_eq!(s.record_start("a").unwrap(), None);
        s.set_record_start("a", 4096, 10, false).unwrap();
        s.set_record_start("a", 8192, 20, true).unwrap();
        assert_eq!(s.record_start("a").unwrap(), Some((8192, 20, true)));
        s.delete_process("a").unwrap();
        assert_eq!(s.record_start("a").unwrap(), None);
    }
}
