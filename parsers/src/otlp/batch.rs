//! Batching: records wait, grouped by resource and scope, until their signal has
//! [`MAX_RECORDS`] records or [`MAX_BYTES`] of JSON, a record arrives [`MAX_AGE_NS`] or
//! more (record time) after the first one waiting, or the caller ends the lines. Only
//! complete request lines are ever appended to the caller's buffer. The groups' buffers
//! are kept from line to line (a group idle for a whole line is dropped), so nothing is
//! allocated per record once they have grown.

/// A line holds at most this many records (log records, spans, or metric requests'
/// resource entries).
pub const MAX_RECORDS: usize = 512;
/// A line is ended once its records' JSON reaches this many bytes.
pub const MAX_BYTES: usize = 1 << 20;
/// A record arriving this long (nanoseconds, record time) after the first one waiting
/// ends the waiting line first.
pub const MAX_AGE_NS: u64 = 1_000_000_000;

/// The three request types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Logs,
    Spans,
    Metrics,
}

const SIGNALS: [Signal; 3] = [Signal::Logs, Signal::Spans, Signal::Metrics];

/// Records sharing a resource and a scope: their JSON, comma-separated.
#[derive(Debug, Default)]
struct Group {
    /// The resource's attributes (JSON `KeyValue`s, comma-separated).
    resource: Vec<u8>,
    /// The scope name as a JSON string.
    scope: Vec<u8>,
    json: Vec<u8>,
}

/// Records of one signal waiting for their line.
#[derive(Debug, Default)]
struct Pending {
    groups: Vec<Group>,
    /// The groups with records waiting, in the order of their first record.
    order: Vec<usize>,
    records: usize,
    bytes: usize,
    /// Record time of the first record waiting.
    since: Option<u64>,
}

/// The records waiting, per signal.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    logs: Pending,
    spans: Pending,
    metrics: Pending,
}

impl Batches {
    fn pending(&mut self, signal: Signal) -> &mut Pending {
        match signal {
            Signal::Logs => &mut self.logs,
            Signal::Spans => &mut self.spans,
            Signal::Metrics => &mut self.metrics,
        }
    }

    /// Add one record of `signal` (`write` appends its JSON; the buffer it gets may hold
    /// other records before it) to the group of `resource` and `scope` (see [`Group`]),
    /// ending the lines that are due on `out`.
    pub(crate) fn add(
        &mut self,
        out: &mut Vec<u8>,
        signal: Signal,
        resource: &[u8],
        scope: &[u8],
        time: Option<u64>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        if let Some(t) = time {
            for s in SIGNALS {
                if self
                    .pending(s)
                    .since
                    .is_some_and(|since| t.saturating_sub(since) >= MAX_AGE_NS)
                {
                    self.emit(out, s);
                }
            }
        }
        let p = self.pending(signal);
        let found = p
            .groups
            .iter()
            .position(|g| g.scope == scope && g.resource == resource);
        let i = found.unwrap_or_else(|| {
            p.groups.push(Group {
                resource: resource.to_vec(),
                scope: scope.to_vec(),
                json: Vec::new(),
            });
            p.groups.len() - 1
        });
        let group = &mut p.groups[i];
        let before = group.json.len();
        if before > 0 {
            group.json.push(b',');
        } else {
            p.order.push(i);
        }
        write(&mut group.json);
        p.bytes += group.json.len() - before;
        p.records += 1;
        if p.since.is_none() {
            p.since = time;
        }
        if p.records >= MAX_RECORDS || p.bytes >= MAX_BYTES {
            self.emit(out, signal);
        }
    }

    /// Append every waiting record to `out` as complete lines (one per signal waiting).
    pub(crate) fn end_lines(&mut self, out: &mut Vec<u8>) {
        for signal in SIGNALS {
            self.emit(out, signal);
        }
    }

    /// Append the line of `signal`'s waiting records (if any) to `out`.
    fn emit(&mut self, out: &mut Vec<u8>, signal: Signal) {
        let p = self.pending(signal);
        if p.order.is_empty() {
            return;
        }
        out.reserve(p.bytes + 256 * p.order.len());
        let (resources, scopes, records): (&[u8], &[u8], &[u8]) = match signal {
            Signal::Logs => (b"{\"resourceLogs\":[", b"scopeLogs", b"logRecords"),
            Signal::Spans => (b"{\"resourceSpans\":[", b"scopeSpans", b"spans"),
            Signal::Metrics => (b"{\"resourceMetrics\":[", b"", b""),
        };
        out.extend_from_slice(resources);
        for (n, &i) in p.order.iter().enumerate() {
            let g = &p.groups[i];
            if n > 0 {
                out.push(b',');
            }
            if signal == Signal::Metrics {
                // Whole `ResourceMetrics`.
                out.extend_from_slice(&g.json);
                continue;
            }
            out.extend_from_slice(b"{\"resource\":{\"attributes\":[");
            out.extend_from_slice(&g.resource);
            out.extend_from_slice(b"],\"droppedAttributesCount\":0,\"entityRefs\":[]},\"");
            out.extend_from_slice(scopes);
            out.extend_from_slice(b"\":[{\"scope\":{\"name\":");
            out.extend_from_slice(&g.scope);
            out.extend_from_slice(
                b",\"version\":\"\",\"attributes\":[],\"droppedAttributesCount\":0},\"",
            );
            out.extend_from_slice(records);
            out.extend_from_slice(b"\":[");
            out.extend_from_slice(&g.json);
            out.extend_from_slice(b"]}]}");
        }
        out.extend_from_slice(b"]}\n");
        // Keep the groups of this line (their buffers) for the next; drop idle ones.
        // (A group had records this line exactly when its JSON is not empty.)
        p.groups.retain_mut(|g| {
            let used = !g.json.is_empty();
            g.json.clear();
            used
        });
        p.order.clear();
        p.records = 0;
        p.bytes = 0;
        p.since = None;
    }
}
