//! Export frames: what the OTLP writer appends in export mode
//! ([`crate::OutputFormat::OtlpExport`]), one frame per export request, so that an
//! exporter knows each request's signal, encoding and what it carries without parsing
//! the body:
//!
//! ```text
//! frame := u32 LE frame_len (bytes after this field)
//!        | u8 signal (0 logs, 1 traces, 2 metrics) | u8 encoding (0 protobuf, 1 json)
//!        | u32 LE records (uevrec records: event records + uevrec's own lost/notice records)
//!        | u32 LE items (OTLP items: log records / spans / metric data points)
//!        | u16 LE n | n × (u16 LE name_len, name "system:event", u32 LE count)
//!        | [pods: n × (u16 LE pod_len, pod "namespace/pod" or "")]
//!        | body (the Export{Logs,Trace,Metrics}ServiceRequest: OTLP/JSON without a
//!          newline, or protobuf)
//! ```
//!
//! The pod column is there only when the encoding byte has its high bit
//! ([`POD_COLUMN`]) set, which the writer does only when a record of the frame came from
//! a Kubernetes pod: frames without pods are byte for byte what they were before the
//! column existed (spools written by older uevrec read the same; an older uevrec reading
//! a spool with pod columns finds a bad encoding byte and counts those batches as
//! corrupt). Entry `i` of the column is the pod of entry `i` of the tracepoint table
//! (a tracepoint appears once per pod its records came from): `namespace/pod`, or
//! `/UID` while the pod's names are unknown, or empty outside pods.
//!
//! The per-tracepoint counts are of event records; uevrec's own records are counted
//! under `uevrec`. [`FrameMeta`] is everything but the body (and `frame_len`), owned, for
//! an exporter to store beside the body. Reading ([`read_frames`], [`FrameMeta::decode`])
//! never panics: any bytes give frames or a [`FrameError`] saying what is wrong.

use std::fmt;

/// The three OTLP signals, as the frame's `signal` byte numbers them (the one signal
/// type of uevrec: the exporter, the metrics' `signal` label and the frames use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// `ExportLogsServiceRequest` (0).
    Logs,
    /// `ExportTraceServiceRequest` (1).
    Traces,
    /// `ExportMetricsServiceRequest` (2).
    Metrics,
}

impl Signal {
    /// The three signals, in the order of [`Signal::index`].
    pub const ALL: [Signal; 3] = [Signal::Logs, Signal::Traces, Signal::Metrics];

    /// `logs`, `traces` or `metrics` (the OTLP/HTTP path's last part).
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Logs => "logs",
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
        }
    }

    /// Its position in [`Signal::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The gRPC method path of its `Export` call.
    pub fn grpc_path(self) -> &'static str {
        match self {
            Signal::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            Signal::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            Signal::Metrics => "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
        }
    }

    /// The frame's byte for it.
    pub fn byte(self) -> u8 {
        match self {
            Signal::Logs => 0,
            Signal::Traces => 1,
            Signal::Metrics => 2,
        }
    }

    /// The signal of a frame's byte.
    pub fn from_byte(b: u8) -> Option<Signal> {
        match b {
            0 => Some(Signal::Logs),
            1 => Some(Signal::Traces),
            2 => Some(Signal::Metrics),
            _ => None,
        }
    }

    /// The OTLP/HTTP path of its requests (`/v1/logs`, `/v1/traces`, `/v1/metrics`).
    pub fn http_path(self) -> &'static str {
        match self {
            Signal::Logs => "/v1/logs",
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an export request's body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OtlpEncoding {
    /// Binary protobuf (`application/x-protobuf`, gRPC) (0).
    Protobuf,
    /// OTLP/JSON (`application/json`) (1).
    Json,
}

impl OtlpEncoding {
    /// The frame's byte for it.
    pub fn byte(self) -> u8 {
        match self {
            OtlpEncoding::Protobuf => 0,
            OtlpEncoding::Json => 1,
        }
    }

    /// The encoding of a frame's byte.
    pub fn from_byte(b: u8) -> Option<OtlpEncoding> {
        match b {
            0 => Some(OtlpEncoding::Protobuf),
            1 => Some(OtlpEncoding::Json),
            _ => None,
        }
    }
}

/// What is wrong with frame bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes end inside a frame (a batch or spool record cut short).
    Truncated {
        /// Where the frame starts in the buffer read.
        at: usize,
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes there are.
        have: usize,
    },
    /// The signal byte is not 0, 1 or 2.
    BadSignal(u8),
    /// The encoding byte is not 0 or 1.
    BadEncoding(u8),
    /// The tracepoint table runs past the frame's (or the metadata's) end.
    BadTable,
    /// A tracepoint name is not UTF-8.
    BadName,
    /// Bytes after a [`FrameMeta`].
    Trailing(usize),
    /// A frame too large for its 32-bit length, or a table too large for its 16-bit
    /// fields (writing).
    TooLarge(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const TORN: &str = "the frames were cut or overwritten (a torn spool file or a \
                            partial batch): keep the frames before it, drop the rest";
        match self {
            FrameError::Truncated { at, needed, have } => write!(
                f,
                "OTLP export frame at byte {at} needs {needed} bytes, {have} left: {TORN}"
            ),
            FrameError::BadSignal(b) => {
                write!(
                    f,
                    "OTLP export frame: signal byte {b} is not 0, 1 or 2: {TORN}"
                )
            }
            FrameError::BadEncoding(b) => {
                write!(
                    f,
                    "OTLP export frame: encoding byte {b} is not 0 or 1: {TORN}"
                )
            }
            FrameError::BadTable => write!(
                f,
                "OTLP export frame: the tracepoint table runs past its end: {TORN}"
            ),
            FrameError::BadName => {
                write!(
                    f,
                    "OTLP export frame: a tracepoint name is not UTF-8: {TORN}"
                )
            }
            FrameError::Trailing(n) => write!(
                f,
                "OTLP frame metadata followed by {n} unexpected bytes: it was stored with \
                 another layout or overwritten"
            ),
            FrameError::TooLarge(what) => write!(
                f,
                "OTLP export frame cannot hold {what}: split the request into smaller ones"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Bytes of the fixed part of the metadata: signal, encoding, records, items, n.
const META_FIXED: usize = 1 + 1 + 4 + 4 + 2;

/// The encoding byte's bit saying a pod column follows the tracepoint table.
pub const POD_COLUMN: u8 = 0x80;

/// Check the `u16 LE len, UTF-8 text` at `at` in `bytes`; where it ends.
fn check_text(bytes: &[u8], at: usize) -> Result<usize, FrameError> {
    // `at` is a place in `bytes` and `len` a u16: the sums fit (checked all the same).
    let start = at.checked_add(2).ok_or(FrameError::BadTable)?;
    let len = bytes
        .get(at..start)
        .ok_or(FrameError::BadTable)
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))?;
    let end = start.checked_add(len).ok_or(FrameError::BadTable)?;
    let text = bytes.get(start..end).ok_or(FrameError::BadTable)?;
    std::str::from_utf8(text).map_err(|_| FrameError::BadName)?;
    Ok(end)
}

/// Check a pod column of `n` entries at the start of `bytes`; the column and the rest.
fn parse_pods(n: u16, bytes: &[u8]) -> Result<(&[u8], &[u8]), FrameError> {
    let mut at = 0usize;
    for _ in 0..n {
        at = check_text(bytes, at)?;
    }
    Ok(bytes.split_at(at))
}

/// A frame's tracepoint table: `(name, count)` pairs, validated (names are UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tracepoints<'a> {
    n: u16,
    /// The entries (after `n`).
    bytes: &'a [u8],
    /// The pod column (empty: none).
    pods: &'a [u8],
}

impl<'a> Tracepoints<'a> {
    /// Check the `n` entries at the start of `bytes`; the table and the bytes after it.
    fn parse(n: u16, bytes: &'a [u8]) -> Result<(Tracepoints<'a>, &'a [u8]), FrameError> {
        let mut at = 0usize;
        for _ in 0..n {
            at = check_text(bytes, at)?;
            // at <= bytes.len(): the count's 4 bytes after the name.
            at = at.saturating_add(4);
            if bytes.len() < at {
                return Err(FrameError::BadTable);
            }
        }
        let (table, rest) = bytes.split_at(at);
        Ok((
            Tracepoints {
                n,
                bytes: table,
                pods: &[],
            },
            rest,
        ))
    }

    /// How many tracepoints.
    pub fn len(&self) -> usize {
        usize::from(self.n)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The `(system:event, event records)` pairs (`uevrec` for uevrec's own records).
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, u32)> + 'a {
        let mut rest = self.bytes;
        std::iter::from_fn(move || {
            // Validated by `parse`: every read below is in bounds and UTF-8; the `?`s
            // only end the iteration if that were ever not so.
            let len = usize::from(u16::from_le_bytes(rest.get(..2)?.try_into().ok()?));
            let name = std::str::from_utf8(rest.get(2..2 + len)?).ok()?;
            let count = u32::from_le_bytes(rest.get(2 + len..6 + len)?.try_into().ok()?);
            rest = rest.get(6 + len..)?;
            Some((name, count))
        })
    }

    /// Whether the table has a pod column.
    pub fn has_pods(&self) -> bool {
        !self.pods.is_empty()
    }

    /// The `(system:event, pod, event records)` of each entry: the pod as in the
    /// module docs (`namespace/pod`, `/UID`, or empty outside pods and in frames
    /// without a pod column).
    pub fn entries(&self) -> impl Iterator<Item = (&'a str, &'a str, u32)> + 'a {
        let mut pods = self.pods;
        self.iter().map(move |(name, count)| {
            // Validated by `parse_pods`, as in `iter`.
            let pod = (|| {
                let len = usize::from(u16::from_le_bytes(pods.get(..2)?.try_into().ok()?));
                let pod = std::str::from_utf8(pods.get(2..2 + len)?).ok()?;
                pods = pods.get(2 + len..)?;
                Some(pod)
            })();
            (name, pod.unwrap_or(""), count)
        })
    }
}

/// One frame read from a buffer ([`read_frames`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Which request the body is.
    pub signal: Signal,
    /// How the body is encoded.
    pub encoding: OtlpEncoding,
    /// uevrec records in it (event records and uevrec's own).
    pub records: u32,
    /// OTLP items in it (log records, spans, metric data points): what a
    /// `partial_success` rejects.
    pub items: u32,
    /// Event records per tracepoint.
    pub tracepoints: Tracepoints<'a>,
    /// The export request.
    pub body: &'a [u8],
}

impl Frame<'_> {
    /// Its metadata, owned.
    pub fn meta(&self) -> FrameMeta {
        FrameMeta {
            signal: self.signal,
            encoding: self.encoding,
            records: self.records,
            items: self.items,
            tracepoints: self
                .tracepoints
                .iter()
                .map(|(name, count)| (name.to_owned(), count))
                .collect(),
            pods: if self.tracepoints.has_pods() {
                self.tracepoints
                    .entries()
                    .map(|(_, pod, _)| pod.to_owned())
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}

/// Everything of a frame but its body, owned (what an exporter stores beside the body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameMeta {
    /// Which request the body is.
    pub signal: Signal,
    /// How the body is encoded.
    pub encoding: OtlpEncoding,
    /// uevrec records.
    pub records: u32,
    /// OTLP items.
    pub items: u32,
    /// Event records per tracepoint (`uevrec` for uevrec's own).
    pub tracepoints: Vec<(String, u32)>,
    /// The pod of each entry of `tracepoints` (see the module docs), or empty when none
    /// has one (no pod column is written).
    pub pods: Vec<String>,
}

impl FrameMeta {
    /// Whether it fits a frame: at most 65,535 tracepoints, names of at most 65,535
    /// bytes.
    pub fn check(&self) -> Result<(), FrameError> {
        if self.tracepoints.len() > usize::from(u16::MAX) {
            return Err(FrameError::TooLarge("over 65,535 tracepoints"));
        }
        if self
            .tracepoints
            .iter()
            .any(|(n, _)| n.len() > usize::from(u16::MAX))
        {
            return Err(FrameError::TooLarge("a tracepoint name over 65,535 bytes"));
        }
        if !self.pods.is_empty() && self.pods.len() != self.tracepoints.len() {
            return Err(FrameError::TooLarge("a pod column not one per tracepoint"));
        }
        if self.pods.iter().any(|p| p.len() > usize::from(u16::MAX)) {
            return Err(FrameError::TooLarge("a pod name over 65,535 bytes"));
        }
        Ok(())
    }

    /// Append the metadata (the frame's bytes between `frame_len` and the body).
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        self.check()?;
        put_meta(
            out,
            self.signal,
            self.encoding,
            self.records,
            self.items,
            self.entries(),
        );
        Ok(())
    }

    /// The metadata [`FrameMeta::encode`] wrote (exactly those bytes).
    pub fn decode(bytes: &[u8]) -> Result<FrameMeta, FrameError> {
        let (frame, rest) = parse_meta(bytes)?;
        if !rest.is_empty() {
            return Err(FrameError::Trailing(rest.len()));
        }
        Ok(frame.meta())
    }

    /// `(name, pod, count)` of each entry.
    fn entries(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8], u32)> + Clone {
        self.tracepoints.iter().enumerate().map(|(i, (n, c))| {
            let pod = self.pods.get(i).map_or(&b""[..], |p| p.as_bytes());
            (n.as_bytes(), pod, *c)
        })
    }
}

/// Append the frame of `meta` and `body` (nothing when it does not fit a frame).
pub fn write_frame(out: &mut Vec<u8>, meta: &FrameMeta, body: &[u8]) -> Result<(), FrameError> {
    meta.check()?;
    // The caller's names and body (checked by meta.check: at most 65,535 names of at
    // most 65,535 bytes each): saturating, a sum past usize is too large all the same.
    let names = (meta.tracepoints.iter()).fold(0usize, |n, (t, _)| {
        n.saturating_add(t.len().saturating_add(6))
    });
    let pods = (meta.pods.iter()).fold(0usize, |n, p| n.saturating_add(p.len().saturating_add(2)));
    let fixed = META_FIXED.saturating_add(names).saturating_add(pods);
    if u32::try_from(fixed.saturating_add(body.len())).is_err() {
        return Err(FrameError::TooLarge("a body of 4 GiB or more"));
    }
    let start = begin_frame(
        out,
        meta.signal,
        meta.encoding,
        meta.records,
        meta.items,
        meta.entries(),
    );
    out.extend_from_slice(body);
    end_frame(out, start);
    Ok(())
}

/// Start a frame at the end of `out` whose body follows: its length field (filled by
/// [`end_frame`]) and metadata. Returns where it starts. The caller keeps to the limits
/// ([`FrameMeta::check`]): at most 65,535 tracepoints (more are left out), names and
/// pods of at most 65,535 bytes (longer ones are cut). The pod column is written when
/// an entry has a pod.
pub(crate) fn begin_frame<'n>(
    out: &mut Vec<u8>,
    signal: Signal,
    encoding: OtlpEncoding,
    records: u32,
    items: u32,
    tracepoints: impl ExactSizeIterator<Item = (&'n [u8], &'n [u8], u32)> + Clone,
) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    put_meta(out, signal, encoding, records, items, tracepoints);
    start
}

/// Fill in the length of the frame started at `start` (the body written). The body must
/// stay under 4 GiB (the writer's frames end at about 1 MiB).
pub(crate) fn end_frame(out: &mut [u8], start: usize) {
    // begin_frame wrote the 4 length bytes at `start`: out.len() >= start + 4.
    let len = u32::try_from(out.len().saturating_sub(start).saturating_sub(4)).unwrap_or(u32::MAX);
    out[start..start.saturating_add(4)].copy_from_slice(&len.to_le_bytes());
}

/// The metadata's bytes (see [`begin_frame`] for the limits).
fn put_meta<'n>(
    out: &mut Vec<u8>,
    signal: Signal,
    encoding: OtlpEncoding,
    records: u32,
    items: u32,
    tracepoints: impl ExactSizeIterator<Item = (&'n [u8], &'n [u8], u32)> + Clone,
) {
    let n = tracepoints.len().min(usize::from(u16::MAX));
    let pods = tracepoints
        .clone()
        .take(n)
        .any(|(_, pod, _)| !pod.is_empty());
    out.push(signal.byte());
    out.push(encoding.byte() | if pods { POD_COLUMN } else { 0 });
    out.extend_from_slice(&records.to_le_bytes());
    out.extend_from_slice(&items.to_le_bytes());
    out.extend_from_slice(&(n as u16).to_le_bytes());
    let cut = |b: &'n [u8]| &b[..b.len().min(usize::from(u16::MAX))];
    for (name, _, count) in tracepoints.clone().take(n) {
        let name = cut(name);
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&count.to_le_bytes());
    }
    if pods {
        for (_, pod, _) in tracepoints.take(n) {
            let pod = cut(pod);
            out.extend_from_slice(&(pod.len() as u16).to_le_bytes());
            out.extend_from_slice(pod);
        }
    }
}

/// The metadata at the start of `bytes` as a frame with an empty body, and the bytes
/// after it.
fn parse_meta(bytes: &[u8]) -> Result<(Frame<'_>, &[u8]), FrameError> {
    let Some(fixed) = bytes.get(..META_FIXED) else {
        return Err(FrameError::BadTable);
    };
    let signal = Signal::from_byte(fixed[0]).ok_or(FrameError::BadSignal(fixed[0]))?;
    let has_pods = fixed[1] & POD_COLUMN != 0;
    let encoding =
        OtlpEncoding::from_byte(fixed[1] & !POD_COLUMN).ok_or(FrameError::BadEncoding(fixed[1]))?;
    // Called with the constants 2 and 6: inside the fixed part.
    #[allow(clippy::arithmetic_side_effects)]
    let u32_at =
        |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
    let records = u32_at(2);
    let items = u32_at(6);
    let n = u16::from_le_bytes([fixed[10], fixed[11]]);
    let (mut tracepoints, mut rest) = Tracepoints::parse(n, &bytes[META_FIXED..])?;
    if has_pods {
        (tracepoints.pods, rest) = parse_pods(n, rest)?;
        if n == 0 {
            // Written only with an entry that has a pod.
            return Err(FrameError::BadTable);
        }
    }
    Ok((
        Frame {
            signal,
            encoding,
            records,
            items,
            tracepoints,
            body: &[],
        },
        rest,
    ))
}

/// The frames in `buf`, in order; after an error, nothing more (what follows a bad frame
/// cannot be told apart from noise).
pub fn read_frames(buf: &[u8]) -> impl Iterator<Item = Result<Frame<'_>, FrameError>> {
    let mut at = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || at >= buf.len() {
            return None;
        }
        let result = read_one(buf, at);
        match &result {
            Ok((_, next)) => at = *next,
            Err(_) => failed = true,
        }
        Some(result.map(|(frame, _)| frame))
    })
}

/// The frame at `at` and where the next one starts.
fn read_one(buf: &[u8], at: usize) -> Result<(Frame<'_>, usize), FrameError> {
    let rest = &buf[at..];
    let truncated = |needed: usize| FrameError::Truncated {
        at,
        needed,
        have: rest.len(),
    };
    let len = rest
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| truncated(4))?;
    // A u32 length from the file: the sum is checked (a usize of 32 bits overflows).
    let end = len.checked_add(4).ok_or_else(|| truncated(usize::MAX))?;
    let frame = rest.get(4..end).ok_or_else(|| truncated(end))?;
    let (mut head, body) = parse_meta(frame)?;
    head.body = body;
    // The frame is inside `buf`: at + end <= buf.len().
    Ok((head, at.saturating_add(end)))
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn meta() -> FrameMeta {
        FrameMeta {
            signal: Signal::Traces,
            encoding: OtlpEncoding::Protobuf,
            records: 7,
            items: 6,
            tracepoints: vec![("user_events:a_L4K1".into(), 5), ("uevrec".into(), 1)],
            pods: Vec::new(),
        }
    }

    #[test]
    fn pod_column_round_trips_and_is_absent_without_pods() {
        let mut plain = Vec::new();
        meta().encode(&mut plain).unwrap();
        // Without pods: the layout before the column existed (encoding byte 0).
        assert_eq!(plain[1], 0);
        let with = FrameMeta {
            tracepoints: vec![
                ("user_events:a".into(), 5),
                ("user_events:a".into(), 2),
                ("uevrec".into(), 1),
            ],
            pods: vec!["shop/cart-0".into(), "/1234-uid".into(), String::new()],
            ..meta()
        };
        let mut stored = Vec::new();
        with.encode(&mut stored).unwrap();
        assert_eq!(stored[1], POD_COLUMN);
        assert_eq!(FrameMeta::decode(&stored), Ok(with.clone()));
        let mut buf = Vec::new();
        write_frame(&mut buf, &with, b"body").unwrap();
        let f = read_frames(&buf).next().unwrap().unwrap();
        assert_eq!(f.body, b"body");
        assert_eq!(
            f.tracepoints.entries().collect::<Vec<_>>(),
            [
                ("user_events:a", "shop/cart-0", 5),
                ("user_events:a", "/1234-uid", 2),
                ("uevrec", "", 1)
            ]
        );
        // A column cut short is a bad table, not a panic.
        assert_eq!(
            FrameMeta::decode(&stored[..stored.len() - 1]),
            Err(FrameError::BadTable)
        );
        let uneven = FrameMeta {
            pods: vec!["a/b".into()],
            ..with
        };
        assert!(uneven.encode(&mut Vec::new()).is_err());
    }

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &meta(), b"body one").unwrap();
        let mut other = meta();
        other.signal = Signal::Metrics;
        other.encoding = OtlpEncoding::Json;
        other.tracepoints.clear();
        write_frame(&mut buf, &other, b"").unwrap();
        // frame_len counts the bytes after it.
        let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
        assert_eq!(buf[4 + len..].len(), 4 + META_FIXED);
        let frames: Vec<Frame<'_>> = read_frames(&buf).map(Result::unwrap).collect();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].meta(), meta());
        assert_eq!(frames[0].body, b"body one");
        assert_eq!(
            frames[0].tracepoints.iter().collect::<Vec<_>>(),
            [("user_events:a_L4K1", 5), ("uevrec", 1)]
        );
        assert_eq!(frames[1].meta(), other);
        assert!(frames[1].body.is_empty());
        let mut stored = Vec::new();
        meta().encode(&mut stored).unwrap();
        assert_eq!(FrameMeta::decode(&stored), Ok(meta()));
        stored.push(0);
        assert_eq!(FrameMeta::decode(&stored), Err(FrameError::Trailing(1)));
    }

    #[test]
    fn bad_frames_say_what_is_wrong() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &meta(), b"xyz").unwrap();
        let whole = buf.len();
        // Cut short: the first frame fails, nothing after.
        let errors: Vec<_> = read_frames(&buf[..whole - 1]).collect();
        assert!(matches!(
            errors[..],
            [Err(FrameError::Truncated { at: 0, .. })]
        ));
        let mut bad = buf.clone();
        bad[4] = 9;
        assert_eq!(
            read_frames(&bad).next(),
            Some(Err(FrameError::BadSignal(9)))
        );
        let mut bad = buf.clone();
        bad[5] = 2;
        assert_eq!(
            read_frames(&bad).next(),
            Some(Err(FrameError::BadEncoding(2)))
        );
        // A name length past the frame.
        let mut bad = buf.clone();
        bad[4 + META_FIXED] = 0xff;
        assert_eq!(read_frames(&bad).next(), Some(Err(FrameError::BadTable)));
        let mut bad = buf.clone();
        bad[4 + META_FIXED + 2] = 0xff;
        assert_eq!(read_frames(&bad).next(), Some(Err(FrameError::BadName)));
        assert!(
            FrameError::Truncated {
                at: 0,
                needed: 9,
                have: 3
            }
            .to_string()
            .contains("torn spool")
        );
        let long = FrameMeta {
            tracepoints: vec![("x".repeat(70_000), 1)],
            ..meta()
        };
        let mut out = b"kept".to_vec();
        assert!(matches!(
            write_frame(&mut out, &long, b""),
            Err(FrameError::TooLarge(_))
        ));
        assert_eq!(out, b"kept", "nothing of a failed frame is left");
    }

    proptest! {
        #[test]
        fn any_bytes_read_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let mut end = 0;
            for frame in read_frames(&bytes) {
                match frame {
                    Ok(f) => {
                        // Every frame lies within the buffer and its table reads back.
                        prop_assert!(f.body.len() <= bytes.len());
                        prop_assert_eq!(f.tracepoints.iter().count(), f.tracepoints.len());
                        end += 1;
                    }
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
            }
            prop_assert!(end <= bytes.len() / (4 + META_FIXED) + 1);
            let _ = FrameMeta::decode(&bytes);
        }

        #[test]
        fn written_frames_read_back(
            frames in prop::collection::vec(
                (0u8..3, 0u8..2, any::<u32>(), any::<u32>(),
                 prop::collection::vec(("\\PC{0,12}", any::<u32>()), 0..4),
                 prop::collection::vec(any::<u8>(), 0..40)),
                0..5,
            )
        ) {
            let mut buf = Vec::new();
            let mut want = Vec::new();
            for (s, e, records, items, tracepoints, body) in frames {
                let meta = FrameMeta {
                    signal: Signal::from_byte(s).unwrap(),
                    encoding: OtlpEncoding::from_byte(e).unwrap(),
                    records,
                    items,
                    pods: if tracepoints.iter().any(|t: &(String, u32)| t.0.len() % 2 == 1) {
                        tracepoints.iter().map(|(n, _)| format!("ns/{n}")).collect()
                    } else {
                        Vec::new()
                    },
                    tracepoints,
                };
                write_frame(&mut buf, &meta, &body).unwrap();
                want.push((meta, body));
            }
            let got: Vec<_> = read_frames(&buf)
                .map(|f| f.map(|f| (f.meta(), f.body.to_vec())))
                .collect::<Result<_, _>>()
                .unwrap();
            prop_assert_eq!(got, want);
        }
    }
}
