//! The live terminal view of `uevrec top` (ratatui on crossterm): a header with the
//! totals, one row per event, a line for the keys (or the filter being typed); with `-g`
//! below the rows the busiest call paths of the selected row (Up/Down) or of all (a).
//!
//! Plain ASCII only (no box drawing, no wide glyphs) and one style (reverse video for
//! the column titles), so it reads the same over ssh, in a serial console and in an
//! 80×24 terminal; a cut text ends in `~`. The terminal is restored on every way out:
//! q, Ctrl-C, the session ending, an error, and a panic (ratatui's panic hook).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table};

use super::comm::CommCache;
use super::counter::lock;
use super::model::{Row, RowFilter, Snapshot, SortKey, sort_rows};
use super::sites::{Site, TOP_SITES, busiest_first};
use super::{Clock, Shared, TopOptions, human};
use crate::pipeline::stacks::call_path::frames;

/// The longest the view waits for a key before it looks at the clock and the session.
const POLL: Duration = Duration::from_millis(100);

/// Column widths: records/s, total, bytes/s.
const RATE_W: u16 = 8;
const TOTAL_W: u16 = 9;
const BYTES_W: u16 = 8;

/// What a key asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing changed.
    None,
    /// Draw again (sort, filter, typing).
    Redraw,
    /// Leave.
    Quit,
}

/// What the view shows: the last snapshot and the viewer's choices.
#[derive(Debug, Default)]
pub struct ViewState {
    /// The model's last interval.
    pub snapshot: Snapshot,
    /// The sort key.
    pub sort: SortKey,
    /// The filter in force.
    pub filter: Option<RowFilter>,
    /// The filter being typed (after `/`), if any.
    pub input: Option<String>,
    /// Why the last typed filter was refused.
    pub error: Option<String>,
    /// The backend's name, for the header.
    pub backend: &'static str,
    /// Rows per pod (`--by pod`) rather than per event.
    pub by_pod: bool,
    /// Whether an interval has closed yet.
    pub ticked: bool,
    /// `-g`: the call paths table is shown below the rows.
    pub stacks: bool,
    /// `-g`: the row whose call paths are shown (an index into [`ViewState::rows`]).
    pub selected: usize,
    /// `-g`: the call paths of every row shown, not of the selected one (key a).
    pub all_sites: bool,
}

impl ViewState {
    /// Handle a key press.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('c' | 'd'))
        {
            return Action::Quit;
        }
        if let Some(input) = &mut self.input {
            match key.code {
                KeyCode::Enter => {
                    match RowFilter::parse(input) {
                        Ok(f) => {
                            self.filter = f;
                            self.error = None;
                        }
                        Err(e) => self.error = Some(e),
                    }
                    self.input = None;
                }
                KeyCode::Esc => self.input = None,
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) if !c.is_control() && input.len() < 200 => input.push(c),
                _ => return Action::None,
            }
            return Action::Redraw;
        }
        match key.code {
            KeyCode::Char('q' | 'Q') => return Action::Quit,
            KeyCode::Char('r') => self.sort = SortKey::Rate,
            KeyCode::Char('t') => self.sort = SortKey::Total,
            KeyCode::Char('b') => self.sort = SortKey::Bytes,
            KeyCode::Char('n') => self.sort = SortKey::Name,
            KeyCode::Tab => self.sort = self.sort.next(),
            KeyCode::Char('/') => {
                self.input = Some(
                    self.filter
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                );
            }
            KeyCode::Esc => {
                self.filter = None;
                self.error = None;
            }
            KeyCode::Up | KeyCode::Char('k') if self.stacks => {
                self.selected = self.selected.saturating_sub(1);
            }
            KeyCode::Down | KeyCode::Char('j') if self.stacks => {
                let last = self.rows().len().saturating_sub(1);
                self.selected = (self.selected + 1).min(last);
            }
            KeyCode::Char('a') if self.stacks => self.all_sites = !self.all_sites,
            _ => return Action::None,
        }
        Action::Redraw
    }

    /// The rows to show: filtered, sorted.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .snapshot
            .rows
            .iter()
            .filter(|r| self.filter.as_ref().is_none_or(|f| f.matches(&r.event)))
            .cloned()
            .collect();
        sort_rows(&mut rows, self.sort);
        rows
    }
}

/// The call paths the table shows, busiest first, and the records of the interval they
/// share: the selected row's, or with `all_sites` every row's of `rows`, merged by path.
/// The index of the selected row is clamped to `rows`.
pub fn shown_sites(state: &ViewState, rows: &[Row]) -> (Vec<Site>, u64, u64) {
    if rows.is_empty() {
        return (Vec::new(), 0, 0);
    }
    if !state.all_sites {
        let r = &rows[state.selected.min(rows.len() - 1)];
        return (
            r.sites.top.clone(),
            r.interval_records,
            r.sites.other_records,
        );
    }
    let mut merged: foldhash::HashMap<&str, Site> = foldhash::HashMap::default();
    for site in rows.iter().flat_map(|r| &r.sites.top) {
        let m = merged.entry(&site.path).or_insert_with(|| Site {
            records_per_s: 0.0,
            interval_records: 0,
            records: 0,
            ..site.clone()
        });
        m.records_per_s += site.records_per_s;
        m.interval_records += site.interval_records;
        m.records += site.records;
    }
    let mut sites: Vec<Site> = merged.into_values().collect();
    sites.sort_by(busiest_first);
    sites.truncate(TOP_SITES);
    let all = rows.iter().map(|r| r.interval_records).sum();
    let other = rows.iter().map(|r| r.sites.other_records).sum();
    (sites, all, other)
}

/// A call path (functions innermost first, [`frames`]) as `outer > middle > inner` in at
/// most `width` columns: when it does not fit, its outer end goes (`~ > middle > inner`),
/// cut between functions while the innermost fits.
pub fn fit_path(path: &str, width: usize) -> String {
    let labels: Vec<&str> = frames(path).collect();
    let whole = labels.iter().rev().copied().collect::<Vec<_>>().join(" > ");
    if whole.chars().count() <= width {
        return fit(&whole, width);
    }
    let mut tail: Vec<&str> = Vec::new();
    let mut len = 1; // the `~`
    for label in &labels {
        let more = label.chars().count() + 3;
        if len + more > width {
            break;
        }
        len += more;
        tail.push(label);
    }
    if tail.is_empty() {
        // Not even the innermost fits: its start, cut.
        return fit(labels.first().copied().unwrap_or(""), width);
    }
    tail.push("~");
    let text = tail.iter().rev().copied().collect::<Vec<_>>().join(" > ");
    fit(&text, width)
}

/// `text` in at most `width` columns: non-ASCII and control characters become `?` (no
/// wide glyphs), a cut text ends in `~`.
pub fn fit(text: &str, width: usize) -> String {
    let clean = text.chars().map(|c| {
        if c.is_ascii() && !c.is_ascii_control() {
            c
        } else {
            '?'
        }
    });
    if text.chars().count() <= width {
        return clean.collect();
    }
    let mut s: String = clean.take(width.saturating_sub(1)).collect();
    if width > 0 {
        s.push('~');
    }
    s
}

/// The top processes of `row` as `comm[pid] NN%`, busiest first.
fn processes(row: &Row, comms: &mut CommCache) -> String {
    if !row.attached {
        return "(detached)".into();
    }
    let all = row.interval_records;
    let mut out = String::new();
    for &(pid, n) in &row.top {
        if !out.is_empty() {
            out.push_str(", ");
        }
        let pct = n as f64 * 100.0 / all.max(1) as f64;
        out.push_str(&format!("{}[{pid}] {pct:.0}%", comms.name(pid)));
    }
    if row.other_pids > 0 {
        out.push_str(&format!(", +{} more", row.other_pids));
    }
    out
}

/// Draw the whole screen.
pub fn draw(frame: &mut Frame<'_>, state: &ViewState, comms: &mut CommCache) {
    let area = frame.area();
    let w = area.width as usize;
    let s = &state.snapshot;
    let rows = state.rows();
    let attached = s.rows.iter().filter(|r| r.attached).count();
    let mut head = format!(
        "uevrec top ({}) {} events  {} rec/s  {} total  lost {} ({}/s)",
        state.backend,
        attached,
        human(s.records_per_s),
        human(s.records as f64),
        human(s.lost as f64),
        human(s.lost_per_s),
    );
    if let Some(n) = s.not_kept {
        head.push_str(&format!("  not kept {}", human(n as f64)));
    }
    // With -g the lower part of the table area shows the call paths.
    let table_h = area.height.saturating_sub(4);
    let rows_h = if state.stacks {
        (rows.len() as u16 + 1).clamp(2, (table_h / 2).max(2))
    } else {
        table_h
    };
    let shown_max = rows_h.saturating_sub(1) as usize;
    let mut second = format!("sort: {}", state.sort.label());
    if let Some(f) = &state.filter {
        second.push_str(&format!("  filter: {f}"));
    }
    if rows.len() > shown_max {
        second.push_str(&format!("  rows 1-{shown_max} of {}", rows.len()));
    }
    if s.unattributed > 0 {
        second.push_str(&format!("  {} unattributed", s.unattributed));
    }
    if !state.ticked {
        second.push_str("  (first interval...)");
    }
    let line = |y: u16, text: &str| {
        (
            Paragraph::new(Line::raw(fit(text, w))),
            Rect::new(area.x, area.y + y, area.width, 1),
        )
    };
    if area.height < 5 || area.width < 40 {
        let (p, r) = line(0, "uevrec top needs at least 40x5");
        frame.render_widget(p, r);
        return;
    }
    for (y, text) in [(0, head.as_str()), (1, second.as_str())] {
        let (p, r) = line(y, text);
        frame.render_widget(p, r);
    }

    // Columns: event and processes share what the numbers leave.
    let rest = area.width.saturating_sub(RATE_W + TOTAL_W + BYTES_W + 4);
    let event_w = rest / 2;
    let proc_w = rest - event_w;
    let right =
        |v: String, width: u16| Cell::from(Line::raw(fit(&v, width as usize)).right_aligned());
    let header = TableRow::new([
        Cell::from(fit(
            if state.by_pod { "POD" } else { "EVENT" },
            event_w as usize,
        )),
        right("REC/S".into(), RATE_W),
        right("TOTAL".into(), TOTAL_W),
        right("BYTES/S".into(), BYTES_W),
        Cell::from(fit("TOP PROCESSES", proc_w as usize)),
    ])
    .style(Style::default().add_modifier(Modifier::REVERSED));
    let selected = state.selected.min(rows.len().saturating_sub(1));
    // A selected row past those shown: the rows scroll to keep it in sight.
    let skip = (selected + 1).saturating_sub(shown_max.max(1));
    let body: Vec<TableRow<'_>> = rows
        .iter()
        .enumerate()
        .skip(if state.stacks { skip } else { 0 })
        .take(shown_max)
        .map(|(i, r)| {
            let name = match state.stacks {
                true if !state.all_sites && i == selected => format!(">{}", r.event),
                true => format!(" {}", r.event),
                false => r.event.clone(),
            };
            TableRow::new([
                Cell::from(fit(&name, event_w as usize)),
                right(human(r.records_per_s), RATE_W),
                right(total(r.records), TOTAL_W),
                right(human(r.bytes_per_s), BYTES_W),
                Cell::from(fit(&processes(r, comms), proc_w as usize)),
            ])
        })
        .collect();
    let table = Table::new(
        body,
        [
            Constraint::Length(event_w),
            Constraint::Length(RATE_W),
            Constraint::Length(TOTAL_W),
            Constraint::Length(BYTES_W),
            Constraint::Length(proc_w),
        ],
    )
    .header(header)
    .column_spacing(1);
    frame.render_widget(table, Rect::new(area.x, area.y + 2, area.width, rows_h));
    if state.stacks && table_h > rows_h {
        let at = Rect::new(area.x, area.y + 2 + rows_h, area.width, table_h - rows_h);
        draw_sites(frame, state, &rows, at);
    }

    // The last two lines: the session's notice or the filter's error, then the keys.
    let status = match (&state.error, &s.notice) {
        (Some(e), _) => format!("filter refused: {e}"),
        (None, Some(n)) => n.clone(),
        (None, None) => String::new(),
    };
    let (p, r) = line(area.height - 2, &status);
    frame.render_widget(p, r);
    let bottom = area.height - 1;
    match &state.input {
        Some(input) => {
            let prompt = format!("filter (SYSTEM:EVENT glob or text, Enter/Esc): /{input}");
            let shown = fit(&prompt, w.saturating_sub(1));
            let cursor = shown.len() as u16;
            let (p, r) = line(bottom, &shown);
            frame.render_widget(p, r);
            frame.set_cursor_position((area.x + cursor, area.y + bottom));
        }
        None => {
            let keys = if state.stacks {
                "q quit  r/t/b/n/Tab sort  / filter  Esc clear  Up/Down row  a all rows' paths"
            } else {
                "q quit  r/t/b/n sort by rate/total/bytes/name  Tab next  / filter  Esc clear"
            };
            let (p, r) = line(bottom, keys);
            frame.render_widget(p, r);
        }
    }
}

/// Columns of the call paths table: records/s, share, total.
const SHARE_W: u16 = 5;

/// The call paths table (`-g`) in `at`: a title row, then the busiest paths.
fn draw_sites(frame: &mut Frame<'_>, state: &ViewState, rows: &[Row], at: Rect) {
    let (sites, all, other) = shown_sites(state, rows);
    let path_w = at.width.saturating_sub(RATE_W + SHARE_W + TOTAL_W + 3);
    let of = if state.all_sites || rows.is_empty() {
        "all rows".to_owned()
    } else {
        rows[state.selected.min(rows.len() - 1)].event.clone()
    };
    let mut title = format!("CALL PATHS OF {of} (outer > inner)");
    if other > 0 {
        title.push_str(&format!(", {} other", total(other)));
    }
    let right =
        |v: String, width: u16| Cell::from(Line::raw(fit(&v, width as usize)).right_aligned());
    let header = TableRow::new([
        right("REC/S".into(), RATE_W),
        right("SHARE".into(), SHARE_W),
        right("TOTAL".into(), TOTAL_W),
        Cell::from(fit(&title, path_w as usize)),
    ])
    .style(Style::default().add_modifier(Modifier::REVERSED));
    let body: Vec<TableRow<'_>> = sites
        .iter()
        .take(at.height.saturating_sub(1) as usize)
        .map(|site| {
            let pct = super::plain::share(site.interval_records, all) * 100.0;
            TableRow::new([
                right(human(site.records_per_s), RATE_W),
                right(format!("{pct:.0}%"), SHARE_W),
                right(total(site.records), TOTAL_W),
                Cell::from(fit_path(&site.path, path_w as usize)),
            ])
        })
        .collect();
    let table = Table::new(
        body,
        [
            Constraint::Length(RATE_W),
            Constraint::Length(SHARE_W),
            Constraint::Length(TOTAL_W),
            Constraint::Length(path_w),
        ],
    )
    .header(header)
    .column_spacing(1);
    frame.render_widget(table, at);
}

/// A total: exact while it fits the column, else shortened.
fn total(n: u64) -> String {
    let exact = n.to_string();
    if exact.len() <= TOTAL_W as usize {
        exact
    } else {
        human(n as f64)
    }
}

/// Run the view until q, Ctrl-C, `stop` (a signal, `--duration`) or `done` (the session
/// ended); sets `stop` when the viewer leaves. The terminal is restored on every way out.
pub fn run(
    shared: &Shared,
    opts: &TopOptions,
    stop: &AtomicBool,
    done: &AtomicBool,
) -> io::Result<()> {
    // Raw mode, alternate screen, and a panic hook that restores both.
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            return Err(e);
        }
    };
    let result = event_loop(&mut terminal, shared, opts, stop, done);
    ratatui::restore();
    let _ = terminal.show_cursor();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    shared: &Shared,
    opts: &TopOptions,
    stop: &AtomicBool,
    done: &AtomicBool,
) -> io::Result<()> {
    let mut state = ViewState {
        sort: opts.sort,
        backend: opts.backend,
        by_pod: opts.by == super::pods::GroupBy::Pod,
        stacks: opts.stacks.is_some(),
        ..ViewState::default()
    };
    let mut clock = Clock::new(opts.interval, opts.duration);
    terminal.draw(|f| draw(f, &state, &mut lock(&shared.comms)))?;
    loop {
        if done.load(Ordering::Acquire) || stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if clock.expired() {
            stop.store(true, Ordering::Release);
            return Ok(());
        }
        if let Some(elapsed) = clock.tick_due() {
            let mut m = lock(&shared.model);
            m.tick(elapsed);
            state.snapshot = m.snapshot();
            drop(m);
            state.ticked = true;
            terminal.draw(|f| draw(f, &state, &mut lock(&shared.comms)))?;
        }
        if !event::poll(clock.until_tick().min(POLL))? {
            continue;
        }
        let redraw = match event::read()? {
            Event::Key(k) if k.kind == KeyEventKind::Press => match state.key(k) {
                Action::Quit => {
                    stop.store(true, Ordering::Release);
                    return Ok(());
                }
                Action::Redraw => true,
                Action::None => false,
            },
            Event::Resize(..) => true,
            _ => false,
        };
        if redraw {
            terminal.draw(|f| draw(f, &state, &mut lock(&shared.comms)))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::top::model::Model;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use std::sync::Arc;

    fn press(state: &mut ViewState, code: KeyCode) -> Action {
        state.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn typed(state: &mut ViewState, text: &str) {
        for c in text.chars() {
            press(state, KeyCode::Char(c));
        }
    }

    fn state() -> ViewState {
        let mut m = Model::new();
        m.attach(0, "sched:sched_switch");
        m.attach(1, "raw_syscalls:sys_enter_with_a_long_name_that_is_cut");
        for _ in 0..30 {
            m.record(0, std::process::id(), 48);
        }
        for _ in 0..90 {
            m.record(1, 1, 16);
        }
        m.tick(Duration::from_secs(1));
        ViewState {
            snapshot: m.snapshot(),
            backend: "perf",
            ticked: true,
            ..ViewState::default()
        }
    }

    fn screen(state: &ViewState) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw(f, state, &mut CommCache::default()))
            .unwrap();
        let buf = t.backend().buffer().clone();
        (0..24)
            .map(|y| (0..80).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect()
    }

    #[test]
    fn keys_sort_filter_and_quit() {
        let mut s = state();
        assert_eq!(press(&mut s, KeyCode::Char('t')), Action::Redraw);
        assert_eq!(s.sort, SortKey::Total);
        press(&mut s, KeyCode::Tab);
        assert_eq!(s.sort, SortKey::Bytes);
        press(&mut s, KeyCode::Char('n'));
        assert_eq!(
            s.rows()[0].event,
            "raw_syscalls:sys_enter_with_a_long_name_that_is_cut"
        );
        // Typing a filter: q is text, not quit, until Enter.
        press(&mut s, KeyCode::Char('/'));
        typed(&mut s, "sched:q");
        press(&mut s, KeyCode::Backspace);
        typed(&mut s, "*");
        assert_eq!(s.input.as_deref(), Some("sched:*"));
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.rows().len(), 1);
        assert_eq!(s.rows()[0].event, "sched:sched_switch");
        // A bad selector is refused with the reason; the filter stays.
        press(&mut s, KeyCode::Char('/'));
        typed(&mut s, "[");
        press(&mut s, KeyCode::Enter);
        assert!(
            s.error.as_deref().unwrap().contains("bad glob"),
            "{:?}",
            s.error
        );
        assert_eq!(s.rows().len(), 1);
        // Esc clears it.
        press(&mut s, KeyCode::Esc);
        assert_eq!(s.rows().len(), 2);
        assert_eq!(press(&mut s, KeyCode::Char('x')), Action::None);
        assert_eq!(press(&mut s, KeyCode::Char('q')), Action::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(s.key(ctrl_c), Action::Quit);
    }

    #[test]
    fn draws_in_80_by_24_ascii() {
        let s = state();
        let lines = screen(&s);
        assert!(
            lines[0].starts_with("uevrec top (perf) 2 events  120 rec/s  120 total  lost 0 (0/s)"),
            "{lines:#?}"
        );
        assert!(lines[2].starts_with("EVENT"), "{lines:#?}");
        // Sorted by rate: sys_enter (90/s) first, its name cut with `~`.
        assert!(
            lines[3].starts_with("raw_syscalls:sys_enter_w~       90        90     1440 "),
            "{lines:#?}"
        );
        assert!(lines[3].contains("[1] 100%"), "{lines:#?}");
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert!(
            lines[4].contains(&format!("{}[{}] 1", me.trim_end(), std::process::id())),
            "{lines:#?}"
        );
        assert!(lines[23].starts_with("q quit"), "{lines:#?}");
        assert!(lines.iter().all(|l| l.is_ascii()));
    }

    /// A model of two events with call paths (`-g`).
    fn with_sites() -> ViewState {
        let mut m = Model::new();
        m.attach(0, "raw_syscalls:sys_enter");
        m.attach(1, "sched:sched_switch");
        let chain: Arc<str> = Arc::from("syscall\nmiddle\nouter\nmain\n__libc_start_call_main");
        let other: Arc<str> = Arc::from("write\nlog_line\nmain");
        let idle: Arc<str> = Arc::from("__schedule\nschedule\nworker_thread");
        for (slot, path, n) in [
            (0, &chain, 90),
            (0, &other, 10),
            (1, &idle, 30),
            (1, &chain, 5),
        ] {
            for _ in 0..n {
                m.record(slot, 1, 16);
                m.call_site(slot, path);
            }
        }
        m.tick(Duration::from_secs(1));
        ViewState {
            snapshot: m.snapshot(),
            backend: "perf",
            ticked: true,
            stacks: true,
            ..ViewState::default()
        }
    }

    #[test]
    fn call_paths_of_the_selected_row_or_of_all() {
        let mut s = with_sites();
        let lines = screen(&s);
        let at = lines
            .iter()
            .position(|l| l.contains("CALL PATHS OF raw_syscalls:sys_enter"))
            .unwrap_or_else(|| panic!("{lines:#?}"));
        assert!(
            lines[3].starts_with(">raw_syscalls:sys_enter"),
            "{lines:#?}"
        );
        assert!(
            lines[at + 1]
                .starts_with("      90   90%        90 ~ > main > outer > middle > syscall "),
            "{lines:#?}"
        );
        assert!(
            lines[at + 2].starts_with("      10   10%        10 main > log_line > write"),
            "{lines:#?}"
        );
        // Down: the next row's paths.
        press(&mut s, KeyCode::Down);
        press(&mut s, KeyCode::Down);
        assert_eq!(s.selected, 1, "not past the last row");
        let lines = screen(&s);
        assert!(lines[4].starts_with(">sched:sched_switch"), "{lines:#?}");
        let at = lines
            .iter()
            .position(|l| l.contains("CALL PATHS OF sched:sched_switch"))
            .unwrap_or_else(|| panic!("{lines:#?}"));
        assert!(lines[at + 1].contains("86% "), "{lines:#?}");
        // a: every row's, merged by path (the chain: 90 + 5 of 135).
        press(&mut s, KeyCode::Char('a'));
        let (sites, all, _) = shown_sites(&s, &s.rows());
        assert_eq!(all, 135);
        assert_eq!(sites[0].interval_records, 95);
        assert_eq!(sites.len(), 3);
        let lines = screen(&s);
        assert!(
            lines.iter().any(|l| l.contains("CALL PATHS OF all rows")),
            "{lines:#?}"
        );
        assert!(lines.iter().all(|l| l.is_ascii()));
        assert!(lines[23].contains("a all rows"), "{lines:#?}");
    }

    #[test]
    fn paths_lose_their_outer_end_first() {
        let p = "syscall\nmiddle\nouter\nmain";
        assert_eq!(fit_path(p, 80), "main > outer > middle > syscall");
        assert_eq!(fit_path(p, 28), "~ > outer > middle > syscall");
        assert_eq!(fit_path(p, 27), "~ > middle > syscall");
        assert_eq!(fit_path(p, 19), "~ > syscall");
        assert_eq!(fit_path(p, 5), "sysc~");
    }

    #[test]
    fn fit_cuts_and_cleans() {
        assert_eq!(fit("abc", 3), "abc");
        assert_eq!(fit("abcd", 3), "ab~");
        assert_eq!(fit("a\u{e9}\tb", 10), "a??b");
        assert_eq!(fit("abc", 0), "");
    }
}
