//! `process log`: the whole recorded output paged by line numbers (docs/mcp.md, `process log`).
//! Blocking file I/O: callers run it off the async workers.

use super::shape::{failed, human_bytes, status_of};
use crate::contract::{CappedLog, Details, EmptyLog, Log, Status, ToolResult};
use crate::output::page;
use crate::process::Proc;

/// Pages the whole recorded output by line numbers of the whole output (docs/mcp.md,
/// `process log`), read again from the log; the capped view is the fallback only when the
/// process has no log descriptor (its run directory could not be opened).
pub(super) fn read_log(
    p: &Proc,
    offset: Option<usize>,
    limit: Option<usize>,
    char_offset: Option<usize>,
) -> ToolResult {
    let status = status_of(p);
    let exit = p.exit();
    let (log, start, redactor, budget, spill_max, total_chars) = {
        let st = p.lock();
        (
            st.log.clone(),
            st.output.record_start.unwrap_or(crate::process::LineMark {
                offset: 0,
                lines_before: Some(0),
                at_line_start: true,
            }),
            st.output.fresh_redactor(),
            st.output.max_chars(),
            st.output.spill_max,
            st.output.total_chars(),
        )
    };
    let Some(log) = log else {
        return capped_log(p, offset, limit);
    };
    let end = log.metadata().map(|m| m.len()).unwrap_or(0);
    let src = crate::process::LogSource {
        log: &log,
        start,
        end,
        redactor: &redactor,
        finished: exit.is_some(),
    };
    let pg = match crate::process::page_log(
        &src,
        offset.map(|o| o as u64),
        limit.map(|l| l as u64),
        char_offset.unwrap_or(0) as u64,
        budget,
    ) {
        Ok(pg) => pg,
        Err(e) => return failed(format!("Failed to read the log of {}: {e}", p.info.id)),
    };
    let mut notes = Vec::new();
    let record_cut = start.offset > 0;
    if record_cut {
        let keeps = human_bytes(spill_max);
        notes.push(match start.lines_before {
            Some(_) if pg.first > 1 => format!(
                "lines 1-{} were dropped: the record keeps the last {keeps} of output (exec.spill_max_bytes)",
                pg.first - 1
            ),
            Some(_) => format!("the record keeps the last {keeps} of output (exec.spill_max_bytes)"),
            None => format!(
                "the first {} bytes of output were dropped before this moat attached (the record keeps the last {keeps}, exec.spill_max_bytes); lines are numbered from the first one kept",
                start.offset
            ),
        });
    }
    let shown_all = pg.start <= pg.first && pg.end > pg.last;
    if pg.last >= pg.first && !shown_all {
        if pg.start < pg.end {
            notes.push(format!(
                "showing lines {}-{} of {}; pass offset/limit to page",
                pg.start,
                pg.end - 1,
                pg.last
            ));
        } else {
            notes.push(format!(
                "no lines at offset {}; the record holds lines {}-{}",
                offset.unwrap_or(0),
                pg.first,
                pg.last
            ));
        }
    }
    match pg.resume {
        // Inside a line: the next page starts where this one stopped, so every recorded
        // character is reachable however long its line (docs/mcp.md, `process log`).
        Some((line, at)) => notes.push(format!(
            "page cut at {budget} bytes inside line {line} at character {at}; read on with offset={line} charOffset={at}"
        )),
        None if pg.cut => notes.push(format!("page cut at {budget} bytes; pass a smaller limit")),
        None => {}
    }
    if let Some(c) = char_offset.filter(|c| *c > 0) {
        notes.push(format!("line {} from character {c}", pg.start));
    }
    let mut text = if pg.last < pg.first {
        if status == Status::Running {
            "(no output yet)".to_string()
        } else {
            "(no output recorded)".to_string()
        }
    } else {
        pg.text
    };
    if !notes.is_empty() {
        text = format!("{text}\n\n[{}]", notes.join("; "));
    }
    ToolResult::new(
        text,
        Details::Log(Log {
            exit_code: exit.as_ref().and_then(|e| e.code),
            exit_signal: exit.as_ref().and_then(|e| e.signal.clone()),
            first_line: pg.first,
            lines: (pg.end > pg.start).then(|| [pg.start, pg.end - 1]),
            record_cut,
            process_id: p.info.id.clone(),
            status,
            total: pg.last,
            total_chars,
            total_lines: pg.last,
            truncated: record_cut || pg.cut,
        }),
    )
}

/// The capped view by lines: only for a process without a log descriptor.
fn capped_log(p: &Proc, offset: Option<usize>, limit: Option<usize>) -> ToolResult {
    let (aggregated, total_chars, truncated) = p.with_output(|st| {
        (
            st.output.aggregated(),
            st.output.total_chars(),
            st.output.truncated(),
        )
    });
    let status = status_of(p);
    if aggregated.is_empty() {
        let text = if status == Status::Running {
            "(no output yet)"
        } else {
            "(no output recorded)"
        };
        return ToolResult::new(
            text.into(),
            Details::EmptyLog(EmptyLog {
                status,
                total_chars: 0,
                total_lines: 0,
            }),
        );
    }
    let pg = page(&aggregated, offset.map(|o| o.saturating_sub(1)), limit);
    let exit = p.exit();
    ToolResult::new(
        pg.render(),
        Details::CappedLog(CappedLog {
            exit_code: exit.as_ref().and_then(|e| e.code),
            exit_signal: exit.as_ref().and_then(|e| e.signal.clone()),
            process_id: p.info.id.clone(),
            status,
            total: pg.total_lines as u64,
            total_chars,
            total_lines: pg.total_lines as u64,
            truncated,
        }),
    )
}
