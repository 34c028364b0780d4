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

pub(crate) use super::frame::Signal;
use super::frame::{OtlpEncoding, begin_frame, end_frame};

const SIGNALS: [Signal; 3] = [Signal::Logs, Signal::Traces, Signal::Metrics];

/// Records sharing a resource and a scope: their JSON, comma-separated.
#[derive(Debug, Default)]
struct Group {
    /// The resource's attributes (JSON `KeyValue`s, comma-separated).
    resource: Vec<u8>,
    /// The scope name as a JSON string.
    scope: Vec<u8>,
    json: Vec<u8>,
    /// Its records waiting.
    records: usize,
}

/// Event records per tracepoint (`system:event`, or `uevrec` for uevrec's own) and pod
/// (`namespace/pod`, `/UID`, or empty: [`super::frame`]), for export frames: the names
/// in one buffer, reused from frame to frame.
#[derive(Debug, Default)]
struct Counts {
    names: Vec<u8>,
    /// A name's range in `names`, where its pod starts, and its count.
    entries: Vec<(usize, usize, usize, u32)>,
    /// Each entry's [`key_hash`]: a frame of records from many pods has as many entries,
    /// searched by hash first.
    hashes: Vec<u64>,
    /// The entry counted last (records of one tracepoint tend to follow each other).
    last: usize,
}

/// The hash of an entry's name and pod (to search the entries by).
fn key_hash(name: &[u8], pod: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    h.write(name);
    h.write_u8(0xff);
    h.write(pod);
    h.finish()
}

impl Counts {
    /// Count a record of `name` (cut to 65,535 bytes, what a frame holds: the kernel's
    /// names are far shorter).
    #[inline]
    fn add(&mut self, name: &[u8], pod: &[u8]) {
        let name = &name[..name.len().min(usize::from(u16::MAX))];
        let pod = &pod[..pod.len().min(usize::from(u16::MAX))];
        let names = &self.names;
        // Lengths first: most records have no pod, and no memcmp call is made for it.
        let is = |&(start, mid, end, _): &(usize, usize, usize, u32)| {
            mid - start == name.len()
                && end - mid == pod.len()
                && &names[start..mid] == name
                && (pod.is_empty() || &names[mid..end] == pod)
        };
        if let Some(e) = self.entries.get_mut(self.last).filter(|e| is(e)) {
            e.3 = e.3.saturating_add(1);
            return;
        }
        let hash = key_hash(name, pod);
        let found = (self.hashes.iter().enumerate())
            .find(|&(i, &h)| h == hash && is(&self.entries[i]))
            .map(|(i, _)| i);
        if let Some(i) = found {
            self.last = i;
            self.entries[i].3 = self.entries[i].3.saturating_add(1);
            return;
        }
        self.hashes.push(hash);
        let start = self.names.len();
        self.names.extend_from_slice(name);
        let mid = self.names.len();
        self.names.extend_from_slice(pod);
        self.last = self.entries.len();
        self.entries.push((start, mid, self.names.len(), 1));
    }

    fn clear(&mut self) {
        self.names.clear();
        self.entries.clear();
        self.hashes.clear();
        self.last = 0;
    }

    /// The `(name, pod, count)` entries (at most 65,535: a frame's table holds no
    /// more, and a frame has at most [`MAX_RECORDS`] records).
    fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8], u32)> + Clone {
        let n = self.entries.len().min(usize::from(u16::MAX));
        self.entries[..n].iter().map(|&(start, mid, end, count)| {
            (&self.names[start..mid], &self.names[mid..end], count)
        })
    }
}

/// Records of one signal waiting for their line.
#[derive(Debug, Default)]
struct Pending {
    groups: Vec<Group>,
    /// The groups with records waiting, in the order of their first record.
    order: Vec<usize>,
    records: usize,
    /// OTLP items (log records, spans, metric data points) waiting.
    items: usize,
    /// Event records per tracepoint (export frames only).
    counts: Counts,
    bytes: usize,
    /// Record time of the first record waiting.
    since: Option<u64>,
}

/// The records waiting, per signal.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    /// Export frames of this encoding instead of lines (JSON bodies only for now).
    frames: Option<OtlpEncoding>,
    /// The pod event records are counted under in export frames (see
    /// [`Batches::set_pod`]).
    pod: Vec<u8>,
    logs: Pending,
    spans: Pending,
    metrics: Pending,
}

impl Batches {
    /// Batches ending in export frames ([`super::frame`]) with bodies of `encoding`
    /// rather than in lines.
    pub(crate) fn frames(encoding: OtlpEncoding) -> Self {
        Batches {
            frames: Some(encoding),
            ..Default::default()
        }
    }

    /// Count the event records added from now on under `pod` (`namespace/pod`, `/UID`,
    /// or empty outside pods) in the frames' tables; uevrec's own records are counted
    /// without a pod.
    pub(crate) fn set_pod(&mut self, pod: &[u8]) {
        self.pod.clear();
        self.pod.extend_from_slice(pod);
    }

    /// The encoding of the frames, if framed.
    pub(crate) fn framed(&self) -> Option<OtlpEncoding> {
        self.frames
    }

    fn pending(&mut self, signal: Signal) -> &mut Pending {
        match signal {
            Signal::Logs => &mut self.logs,
            Signal::Traces => &mut self.spans,
            Signal::Metrics => &mut self.metrics,
        }
    }

    /// Add one record of `signal` (`write` appends its JSON, `items` OTLP items; the
    /// buffer it gets may hold other records before it) of the tracepoint `tracepoint`
    /// (`system:event`, or `uevrec`) to the group of `resource` and `scope` (see
    /// [`Group`]), ending the lines that are due on `out`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn add(
        &mut self,
        out: &mut Vec<u8>,
        signal: Signal,
        resource: &[u8],
        scope: &[u8],
        time: Option<u64>,
        (tracepoint, items): (&[u8], usize),
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
        let framed = self.frames.is_some();
        let proto = self.frames == Some(OtlpEncoding::Protobuf);
        let pod = std::mem::take(&mut self.pod);
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
                records: 0,
            });
            p.groups.len() - 1
        });
        let group = &mut p.groups[i];
        let before = group.json.len();
        // JSON records are comma-separated; protobuf ones are fields, one after another.
        let comma = group.records > 0 && before > 0 && !proto;
        if group.records == 0 {
            p.order.push(i);
        } else if comma {
            group.json.push(b',');
        }
        write(&mut group.json);
        if comma && group.json.len() == before + 1 {
            // Nothing written (a metrics request without resources): no separator.
            group.json.truncate(before);
        }
        group.records += 1;
        p.bytes += group.json.len() - before;
        p.records += 1;
        p.items += items;
        if framed {
            let own = tracepoint == super::UEVREC_TRACEPOINT;
            p.counts.add(tracepoint, if own { b"" } else { &pod });
        }
        if p.since.is_none() {
            p.since = time;
        }
        let full = p.records >= MAX_RECORDS || p.bytes >= MAX_BYTES;
        self.pod = pod;
        if full {
            self.emit(out, signal);
        }
    }

    /// Append every waiting record to `out` as complete lines (one per signal waiting).
    pub(crate) fn end_lines(&mut self, out: &mut Vec<u8>) {
        for signal in SIGNALS {
            self.emit(out, signal);
        }
    }

    /// Append the line (or frame) of `signal`'s waiting records (if any) to `out`.
    fn emit(&mut self, out: &mut Vec<u8>, signal: Signal) {
        let frames = self.frames;
        let p = self.pending(signal);
        if p.order.is_empty() {
            return;
        }
        out.reserve(p.bytes + 256 * p.order.len());
        // (Counts fit: a frame has at most MAX_RECORDS + 1 records, MAX_BYTES + one
        // record of body.)
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let frame = frames.map(|encoding| {
            let (records, items) = (count(p.records), count(p.items));
            begin_frame(out, signal, encoding, records, items, p.counts.iter())
        });
        if frames == Some(OtlpEncoding::Protobuf) {
            for &i in &p.order {
                p.groups[i].protobuf(out, signal);
            }
        } else {
            p.json(out, signal);
        }
        match frame {
            Some(start) => end_frame(out, start),
            None => out.push(b'\n'),
        }
        // Keep the groups of this line (their buffers) for the next; drop idle ones.
        p.groups.retain_mut(|g| {
            let used = g.records > 0;
            g.json.clear();
            g.records = 0;
            used
        });
        p.order.clear();
        p.records = 0;
        p.items = 0;
        p.counts.clear();
        p.bytes = 0;
        p.since = None;
    }
}

impl Group {
    /// The group as a `resource_*` field (1) of the request: a `Resource*` holding its
    /// resource and one `Scope*` holding its scope and records (metrics: the records are
    /// whole `resource_metrics` fields already). Sizes are known: written in one pass.
    fn protobuf(&self, out: &mut Vec<u8>, signal: Signal) {
        use super::wire::{field, field_len, head};
        if signal == Signal::Metrics {
            return out.extend_from_slice(&self.json);
        }
        let scoped = field_len(self.scope.len()) + self.json.len();
        let resourced = field_len(self.resource.len()) + field_len(scoped);
        head(out, field::FIRST, resourced);
        head(out, field::FIRST, self.resource.len());
        out.extend_from_slice(&self.resource);
        head(out, field::SECOND, scoped);
        head(out, field::FIRST, self.scope.len());
        out.extend_from_slice(&self.scope);
        out.extend_from_slice(&self.json);
    }
}

impl Pending {
    /// The OTLP/JSON request of the records waiting (without a newline).
    fn json(&self, out: &mut Vec<u8>, signal: Signal) {
        let p = self;
        let (resources, scopes, records): (&[u8], &[u8], &[u8]) = match signal {
            Signal::Logs => (b"{\"resourceLogs\":[", b"scopeLogs", b"logRecords"),
            Signal::Traces => (b"{\"resourceSpans\":[", b"scopeSpans", b"spans"),
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
        out.extend_from_slice(b"]}");
    }
}
