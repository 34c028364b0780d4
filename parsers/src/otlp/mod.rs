//! `--format otlp`: records → OTLP/JSON export requests, one request per line (the
//! OTLP file exporter's format, which the OpenTelemetry Collector's `otlpjsonfile`
//! receiver reads). `docs/otlp.md` has the mapping with real lines.
//!
//! - OpenTelemetry Common Schema 4.0 `Log` events (the `opentelemetry-user-events-logs`
//!   exporter) → `ExportLogsServiceRequest` lines, `Span` events
//!   (`opentelemetry-user-events-trace`) → `ExportTraceServiceRequest` lines
//!   (`common_schema.rs`);
//! - `otlp_metrics` events (`opentelemetry-user-events-metrics`: a plain user_event whose
//!   `buffer` holds an `ExportMetricsServiceRequest` protobuf) → the same request as
//!   OTLP/JSON (`metrics.rs`);
//! - every other event, plain or EventHeader, → a log record whose attributes are its
//!   fields (`fields.rs`); lost counts and notices → log records of scope `uevrec`.
//!
//! Logs and spans are written straight into the output as JSON (`json.rs`), as JSON
//! lines are: the event's fields are decoded once into reusable buffers
//! (`fields::Fields`), then the record is written from them; nothing is allocated per
//! record once the buffers have grown. The OTLP/JSON rules (lowerCamelCase keys, trace
//! and span ids as hex, 64-bit integers as strings, enums as integers) are written as
//! `opentelemetry-proto`'s serde mapping writes them, and a test compares the two on the
//! EventHeader corpus and on generated events. Metrics stay on `opentelemetry-proto`'s
//! messages (`metrics.rs` says why).
//!
//! Batching (`batch.rs`): records wait, grouped by resource and scope, until their signal
//! has 512 records or 1 MiB of JSON, a record arrives more than a second (record time)
//! after the first one waiting, or the caller calls [`RecordWriter::end_lines`] (the
//! recorder does whenever it has caught up, the decoders at the end). Only complete
//! lines are ever appended to the caller's buffer.
//!
//! Layers, lowest first: `wire`, `fields`, `cs_text`, `enc`, `json`, `proto`,
//! `common_schema`, `metrics`, `frame`, `batch`, `fast`, `reference`.
//! The pieces of both encodings first (protobuf wire format, the field tree, the Common
//! Schema texts, the seam `enc::Enc` and its record vocabulary), then the two encodings, the
//! mappings, framing and batching, the fast path and the test oracle; this file is above
//! them all. A module imports only from modules before it (`parsers/tests/layers.rs`).

// Writers: their sums are lengths of the crate's own buffers (the JSON and protobuf it
// writes, the field tree read back from the JSON text it wrote) and small counts, far
// below usize::MAX; what comes from input is read in `frame` and `fast`.
#[allow(clippy::arithmetic_side_effects)]
mod batch;
#[allow(clippy::arithmetic_side_effects)]
mod common_schema;
// Hex digits and ids of a fixed size.
#[allow(clippy::arithmetic_side_effects)]
mod cs_text;
#[allow(clippy::arithmetic_side_effects)]
mod enc;
mod fast;
#[allow(clippy::arithmetic_side_effects)]
mod fields;
pub mod frame;
#[allow(clippy::arithmetic_side_effects)]
mod json;
mod metrics;
mod proto;
#[allow(clippy::arithmetic_side_effects)]
mod wire;

use std::fmt;

use batch::{Batches, Signal};
pub use batch::{MAX_AGE_NS, MAX_BYTES, MAX_RECORDS};
use common_schema::{Cs, CsKind};
use enc::{Attrs, Body, Enc, LogHead, Str};
use fields::{Fields, Text};
pub use frame::{
    Frame, FrameError, FrameMeta, OtlpEncoding, Signal as ExportSignal, read_frames, write_frame,
};
use json::Json;
use proto::Proto;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;

use crate::context::{ContextTracker, PodIdentity};
use crate::decode::Endian;
use crate::eventheader::metadata::split_event_name;
use crate::eventheader::{Enumerator, HeaderError, MetaError, TracepointName, parse_event};
use crate::json::{Escaped, write_str};
use crate::json_line::eventheader::plan::PlanCache;
use crate::json_line::{LineOptions, PreparedFormat, RecordStamp, RecordWriter};

/// The tracepoint name export frames count uevrec's own records under.
const UEVREC_TRACEPOINT: &[u8] = b"uevrec";

/// OTLP severity numbers.
pub(crate) const SEVERITY_DEBUG: i32 = 5;
pub(crate) const SEVERITY_INFO: i32 = 9;
pub(crate) const SEVERITY_WARN: i32 = 13;
pub(crate) const SEVERITY_ERROR: i32 = 17;
pub(crate) const SEVERITY_FATAL: i32 = 21;

/// Writes OTLP/JSON request lines into a caller-owned buffer (the OTLP counterpart of
/// [`crate::LineWriter`]; its entry points are [`RecordWriter`]'s).
#[derive(Debug, Default)]
pub struct OtlpWriter {
    opts: LineOptions,
    /// `host.name` as a resource attribute (as [`Enc::resource_attr`] writes it), when
    /// known.
    host: Vec<u8>,
    /// The Kubernetes resource attributes of the record being written (as
    /// [`Enc::resource_attr`] writes them; empty outside pods and without context),
    /// set by [`OtlpWriter::set_context`].
    context: Vec<u8>,
    /// What [`Self::context`] was rendered for: the record's cgroup id and the
    /// tracker's [`ContextTracker::pod_version`] (None: nothing rendered yet).
    context_key: Option<(Option<u64>, u64)>,
    /// The rendered Kubernetes attributes and pod of the cgroups seen lately.
    pods: PodCache,
    batches: Batches,
    /// The fields of the record being written.
    fields: Fields,
    /// The `linux.tracepoint` value of the record being written.
    tracepoint: TracepointValue,
    /// Compiled EventHeader metadata (the JSON-lines plans, see [`Fields`]).
    plans: PlanCache,
    /// Its attribute keys.
    keys: Vec<Text>,
    /// Its resource attributes and scope (as [`Enc::resource_attr`] and [`Enc::scope`]
    /// write them).
    resource: Vec<u8>,
    scope: Vec<u8>,
    /// Compiled protobuf plans of Common Schema logs (the fast path, `fast.rs`).
    fast: fast::FastCache,
    /// The `code.stacktrace` of the next record ([`OtlpWriter::set_stacktrace`]).
    stacktrace: Option<String>,
    /// Whether the fast path is off (tests: to compare it with the general path).
    #[cfg(test)]
    general_only: bool,
}

/// What every record of an event carries besides its own data.
struct Origin<'a> {
    stamp: &'a RecordStamp,
    /// An EventHeader event's keyword and level.
    eventheader: Option<(u64, u8)>,
    /// The record's call stack as `code.stacktrace` text (`-g`).
    stacktrace: Option<&'a str>,
}

/// The `linux.tracepoint` attribute's value (`system:event`), kept while records of the
/// same event follow each other.
#[derive(Debug, Default)]
struct TracepointValue {
    /// `system`, NUL, `event`.
    names: Vec<u8>,
    /// `{"stringValue":"system:event"}`.
    json: Vec<u8>,
    /// `system:event` (what export frames count records under).
    colon: Vec<u8>,
}

impl TracepointValue {
    fn set(&mut self, system: &str, event: &str) {
        // Lengths of two strs and a colon: the sum fits.
        let same = self.names.len() == system.len().saturating_add(1).saturating_add(event.len())
            && self.names.starts_with(system.as_bytes())
            && self.names.ends_with(event.as_bytes());
        if same {
            return;
        }
        self.names.clear();
        self.names.extend_from_slice(system.as_bytes());
        self.names.push(0);
        self.names.extend_from_slice(event.as_bytes());
        self.json.clear();
        self.json.extend_from_slice(b"{\"stringValue\":\"");
        let mut text = Escaped(&mut self.json);
        // `Escaped` never fails.
        let _ = fmt::Write::write_str(&mut text, system);
        let _ = fmt::Write::write_str(&mut text, ":");
        let _ = fmt::Write::write_str(&mut text, event);
        self.json.extend_from_slice(b"\"}");
        self.colon.clear();
        self.colon.extend_from_slice(system.as_bytes());
        self.colon.push(b':');
        self.colon.extend_from_slice(event.as_bytes());
    }
}

impl Origin<'_> {
    /// The sample's and the tracepoint's attributes, under semantic-convention names
    /// where there are some: `process.pid`, `thread.id`, `cpu.logical_number`,
    /// `linux.tracepoint` (`system:event`), for EventHeader events
    /// `eventheader.level` and `eventheader.keyword`, and with a call stack
    /// `code.stacktrace`.
    /// `tracepoint` is the `linux.tracepoint` value ([`TracepointValue`]).
    fn add_to<E: Enc>(&self, attrs: &mut Attrs<'_, E>, tracepoint: &TracepointValue) {
        let s = self.stamp;
        attrs.add(b"\"process.pid\"", |out| E::int_any(out, i64::from(s.pid)));
        attrs.add(b"\"thread.id\"", |out| E::int_any(out, i64::from(s.tid)));
        attrs.add(b"\"cpu.logical_number\"", |out| {
            E::int_any(out, i64::from(s.cpu))
        });
        attrs.add(b"\"linux.tracepoint\"", |out| {
            E::cached_str_any(out, &tracepoint.json, &tracepoint.colon)
        });
        if let Some((keyword, level)) = self.eventheader {
            attrs.add(b"\"eventheader.level\"", |out| {
                E::int_any(out, i64::from(level))
            });
            attrs.add(b"\"eventheader.keyword\"", |out| {
                E::unsigned_any(out, keyword)
            });
        }
        if let Some(text) = self.stacktrace {
            attrs.add(b"\"code.stacktrace\"", |out| E::message_any(out, &text));
        }
    }

    /// Severity number and text of an EventHeader level (none for plain events).
    fn severity(&self) -> (i32, &'static [u8]) {
        match self.eventheader {
            Some((_, level)) => severity_of_level(level),
            None => (0, b"\"\""),
        }
    }
}

/// Why an EventHeader event cannot be walked.
enum Unreadable {
    Header(HeaderError),
    NoMetadata,
    Metadata(MetaError),
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::Header(e) => write!(f, "bad EventHeader: {e}"),
            Unreadable::NoMetadata => {
                f.write_str("no metadata block: the payload cannot be decoded")
            }
            Unreadable::Metadata(e) => write!(f, "bad metadata: {e}"),
        }
    }
}

impl OtlpWriter {
    /// A writer with these options (`endian` applies; `include_common` adds the
    /// common fields as the attribute `linux.tracepoint.common`, see `docs/otlp.md`).
    pub fn new(opts: LineOptions) -> Self {
        OtlpWriter {
            opts,
            ..Default::default()
        }
    }

    /// A writer of export frames ([`frame`]) instead of lines: the same requests, each a
    /// frame saying its signal, record and item counts and records per tracepoint, its
    /// body in `encoding`.
    pub fn export(opts: LineOptions, encoding: OtlpEncoding) -> Self {
        OtlpWriter {
            opts,
            batches: Batches::frames(encoding),
            ..Default::default()
        }
    }

    /// Whether compiled protobuf plans may be used (always, but in the tests that compare
    /// them with the general path).
    fn fast_allowed(&self) -> bool {
        #[cfg(test)]
        if self.general_only {
            return false;
        }
        true
    }

    /// Whether the requests are protobuf.
    fn proto(&self) -> bool {
        self.batches.framed() == Some(OtlpEncoding::Protobuf)
    }

    fn endian(&self) -> Endian {
        self.opts.endian
    }

    /// With `--common` ([`LineOptions::include_common`]): the common fields of `raw` as
    /// a last top-level struct `linux.tracepoint.common` of [`Self::fields`] (an
    /// attribute, whatever the record).
    fn add_common(&mut self, prepared: &PreparedFormat, raw: &[u8]) {
        if self.opts.include_common {
            let endian = self.endian();
            self.fields
                .common(&prepared.format().common_fields, raw, endian);
        }
    }

    /// Set the resource to `host.name` (when known) and the record's Kubernetes
    /// attributes ([`Self::context`]) and the scope to `scope`.
    fn plain_resource<E: Enc>(&mut self, scope: &str) {
        self.resource.clear();
        self.resource.extend_from_slice(&self.host);
        E::append_attrs(&mut self.resource, &self.context);
        self.scope.clear();
        E::scope(&mut self.scope, scope);
    }

    /// Add a log record for an event that is not a Common Schema one (its fields in
    /// [`Self::fields`] become the attributes, then `error` when there is one): time =
    /// observed time = the sample's, the EventHeader level as severity, `eventName` =
    /// `name`.
    fn event_record<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        origin: &Origin<'_>,
        error: Option<&dyn fmt::Display>,
        name: Str<'_>,
    ) {
        let time = origin.stamp.time_unix_ns.unwrap_or(0);
        let (severity, severity_text) = origin.severity();
        let head = LogHead {
            time,
            observed: time,
            severity,
            ..Default::default()
        };
        let (fields, keys) = (&self.fields, &mut self.keys);
        let (resource, scope) = (&self.resource, &self.scope);
        let tracepoint = &self.tracepoint;
        let time = (time != 0).then_some(time);
        let counted = (&tracepoint.colon[..], 1);
        self.batches
            .add(out, Signal::Logs, resource, scope, time, counted, |json| {
                E::log_record(
                    json,
                    keys,
                    &head,
                    Str::Json(severity_text),
                    Body::Absent,
                    |attrs| {
                        for i in fields.top() {
                            attrs.add(fields.key(i), |out| E::node_any(out, fields, i));
                        }
                        if let Some(e) = error {
                            attrs.add_named("uevrec.error", |out| E::message_any(out, e));
                        }
                        origin.add_to(attrs, tracepoint);
                    },
                    name,
                )
            });
    }

    /// An EventHeader event: a Common Schema log or span, else a log record of its
    /// fields.
    fn eventheader<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        tp: TracepointName<'_>,
        raw: &[u8],
        stacktrace: Option<&str>,
    ) {
        let data = raw.get(8..).unwrap_or_default();
        let parts = parse_event(data);
        let level = parts.as_ref().map_or(tp.level, |p| p.header.level);
        let origin = Origin {
            stamp,
            eventheader: Some((tp.keyword, level)),
            stacktrace,
        };
        let walk = match parts {
            Ok(p) => match p.metadata {
                Some(meta) => {
                    let endian = p.header.endian();
                    Enumerator::new(meta, p.payload, endian)
                        .map(|e| (e, meta, p.payload, endian))
                        .map_err(Unreadable::Metadata)
                }
                None => Err(Unreadable::NoMetadata),
            },
            Err(e) => Err(Unreadable::Header(e)),
        };
        self.fields.clear();
        self.plain_resource::<E>(tp.provider);
        let (mut e, meta, payload, endian) = match walk {
            Ok(walk) => walk,
            Err(problem) => {
                self.add_common(prepared, raw);
                return self.event_record::<E>(
                    out,
                    &origin,
                    Some(&problem),
                    Str::Name(tp.provider),
                );
            }
        };
        // A Common Schema log in protobuf through its compiled plan, when it has one.
        if E::PROTO && !self.opts.include_common && self.fast_allowed() {
            let origin = &origin;
            if self.fast_log(out, origin, meta, payload, endian) {
                return;
            }
        }
        // The JSON-lines plan of the metadata when it has one (the fast path), else the
        // walk.
        let plans = &mut self.plans;
        let planned = self.fields.eventheader_planned(|out| {
            plans
                .get(meta, endian, None)?
                .write_fields(out, payload, endian)
        });
        if !planned {
            self.fields.eventheader(&mut e);
        }
        self.add_common(prepared, raw);
        let error = e.error();
        let cs = error.is_none().then(|| common_schema::detect(&self.fields));
        if let Some(Some(cs)) = cs {
            return self.common_schema::<E>(out, &origin, &cs);
        }
        let (name, _) = split_event_name(e.event_name());
        let error = error.map(|e| e as &dyn fmt::Display);
        self.event_record::<E>(out, &origin, error, Str::Text(name));
    }

    /// A Common Schema record (the event in [`Self::fields`]); scope = the provider,
    /// set already.
    fn common_schema<E: Enc>(&mut self, out: &mut Vec<u8>, origin: &Origin<'_>, cs: &Cs) {
        let time = origin.stamp.time_unix_ns;
        self.resource.clear();
        common_schema::write_resource::<E>(&mut self.resource, &self.fields, cs);
        E::append_attrs(&mut self.resource, &self.host);
        E::append_attrs(&mut self.resource, &self.context);
        let (fields, keys) = (&self.fields, &mut self.keys);
        let (resource, scope) = (&self.resource, &self.scope);
        let tracepoint = &self.tracepoint;
        let add_origin = |attrs: &mut Attrs<'_, E>| origin.add_to(attrs, tracepoint);
        let counted = (&tracepoint.colon[..], 1);
        match cs.kind {
            CsKind::Log => {
                let observed = time.unwrap_or(0);
                let time = time.filter(|&t| t != 0);
                self.batches
                    .add(out, Signal::Logs, resource, scope, time, counted, |json| {
                        common_schema::write_log(json, keys, fields, cs, observed, add_origin)
                    });
            }
            CsKind::Span => {
                self.batches.add(
                    out,
                    Signal::Traces,
                    resource,
                    scope,
                    time,
                    counted,
                    |json| common_schema::write_span(json, keys, fields, cs, add_origin),
                );
            }
        }
    }

    /// A log record of uevrec's own (scope `uevrec`): `severity`, `event_name`, `body`
    /// (a string) and the attributes `attributes` adds.
    #[allow(clippy::too_many_arguments)]
    fn own_record<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        (severity, severity_text): (i32, &[u8]),
        event_name: &[u8],
        body: &dyn fmt::Display,
        attributes: impl FnOnce(&mut Attrs<'_, E>),
    ) {
        let time = time_unix_ns.unwrap_or(0);
        let head = LogHead {
            time,
            observed: time,
            severity,
            ..Default::default()
        };
        self.resource.clear();
        self.resource.extend_from_slice(&self.host);
        let keys = &mut self.keys;
        let time = (time != 0).then_some(time);
        self.batches.add(
            out,
            Signal::Logs,
            &self.resource,
            E::UEVREC_SCOPE,
            time,
            (UEVREC_TRACEPOINT, 1),
            |json| {
                E::log_record(
                    json,
                    keys,
                    &head,
                    Str::Json(severity_text),
                    Body::Message(body),
                    attributes,
                    Str::Json(event_name),
                )
            },
        );
    }
}

/// Context: the Kubernetes identity of the records as resource attributes.
impl OtlpWriter {
    /// Take the context of the next record (of `stamp`'s thread, whose sample named
    /// `cgroup`): its pod's identity goes into the resource of that record and of every
    /// later one until the next call — `container.id`, `k8s.pod.uid`, and once the
    /// kubelet's directories named them `k8s.namespace.name`, `k8s.pod.name` and
    /// `k8s.container.name` (semantic-convention names, `docs/otlp.md`). Records outside
    /// pods get none. Re-rendered only when the cgroup or the tracker changed.
    #[inline]
    pub fn set_context(
        &mut self,
        tracker: &ContextTracker,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
    ) {
        let id = cgroup.or_else(|| tracker.cgroup_of(stamp.pid, stamp.tid));
        let version = tracker.pod_version();
        let key = Some((id, version));
        if self.context_key == key {
            return;
        }
        self.context_key = key;
        self.context.clear();
        let Some(id) = id else {
            self.batches.set_pod(b"");
            return;
        };
        if self.pods.version != version {
            // A pod named, a cgroup (re)named: what was rendered may be wrong now.
            self.pods.map.clear();
            self.pods.version = version;
        }
        if let Some((attrs, pod)) = self.pods.map.get(&id) {
            self.context.extend_from_slice(attrs);
            self.batches.set_pod(pod);
            return;
        }
        let mut label = String::new();
        if let Some(pod) = tracker.pod_identity(id) {
            if self.proto() {
                pod_attrs::<Proto>(&mut self.context, &pod);
            } else {
                pod_attrs::<Json>(&mut self.context, &pod);
            }
            label = match pod.names {
                Some((namespace, name)) => format!("{namespace}/{name}"),
                None => format!("/{}", pod.uid),
            };
        }
        self.batches.set_pod(label.as_bytes());
        if self.pods.map.len() >= PodCache::MAX {
            self.pods.map.clear();
        }
        let entry = (self.context.as_slice().into(), label.into_bytes().into());
        self.pods.map.insert(id, entry);
    }
}

/// The rendered Kubernetes resource attributes (as [`Enc::resource_attr`] writes them)
/// and pod (`namespace/pod`, `/UID`, empty) of each cgroup id seen, while the tracker's
/// [`ContextTracker::pod_version`] stays: a record from another cgroup than the last
/// one copies its attributes instead of rendering them. Bounded: emptied when full.
#[derive(Debug, Default)]
struct PodCache {
    version: u64,
    map: std::collections::HashMap<u64, RenderedPod>,
}

/// A cgroup's rendered attributes and its pod (see [`PodCache`]).
type RenderedPod = (Box<[u8]>, Box<[u8]>);

impl PodCache {
    /// Cgroups held at most (a node runs at most a few hundred pods' containers).
    const MAX: usize = 4096;
}

/// The resource attributes of `pod` (what is known of it; never a name for another UID).
fn pod_attrs<E: Enc>(out: &mut Vec<u8>, pod: &PodIdentity<'_>) {
    let mut add =
        |key: &str, value: &str| E::resource_attr(out, key, |o| E::message_any(o, &value));
    if let Some(id) = pod.container_id {
        add("container.id", id);
    }
    add("k8s.pod.uid", &pod.uid);
    if let Some((namespace, name)) = pod.names {
        add("k8s.namespace.name", namespace);
        add("k8s.pod.name", name);
    }
    if let Some(name) = pod.container_name {
        add("k8s.container.name", name);
    }
}

impl OtlpWriter {
    /// Give the next record written ([`RecordWriter::write_prepared`]) the attribute
    /// `code.stacktrace` = `text` (its call stack, one frame a line), or none.
    pub fn set_stacktrace(&mut self, text: Option<&str>) {
        match (text, &mut self.stacktrace) {
            (Some(text), Some(held)) => {
                held.clear();
                held.push_str(text);
            }
            (Some(text), held) => *held = Some(text.to_owned()),
            (None, held) => *held = None,
        }
    }

    /// [`RecordWriter::write_prepared`] in the encoding `E`, with the stack set by
    /// [`OtlpWriter::set_stacktrace`] (taken for the call: the record borrows it while
    /// the writer changes).
    fn prepared<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        let stacktrace = self.stacktrace.take();
        self.prepared_with::<E>(out, stamp, prepared, raw, stacktrace.as_deref());
        self.stacktrace = stacktrace;
    }

    fn prepared_with<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
        stacktrace: Option<&str>,
    ) {
        self.tracepoint.set(prepared.system(), prepared.event());
        if let Some(tp) = prepared.eventheader() {
            return self.eventheader::<E>(out, stamp, prepared, tp, raw, stacktrace);
        }
        let origin = Origin {
            stamp,
            eventheader: None,
            stacktrace,
        };
        let endian = self.endian();
        let mut error = None;
        if metrics::is_metrics_event(prepared) {
            match metrics::decode(prepared.format(), raw, endian) {
                Ok((request, bytes)) => return self.metrics::<E>(out, stamp, &request, bytes),
                Err(e) => error = Some(e),
            }
        }
        // Protobuf straight from the decoded fields, when nothing needs the field tree.
        let fast = E::PROTO && error.is_none() && !self.opts.include_common;
        if fast && self.fast_allowed() && self.fast_plain(out, &origin, prepared, raw) {
            return;
        }
        self.fields.clear();
        self.fields.plain(&prepared.format().fields, raw, endian);
        self.add_common(prepared, raw);
        self.plain_resource::<E>(prepared.system());
        let error = error.as_ref().map(|e| e as &dyn fmt::Display);
        self.event_record::<E>(out, &origin, error, Str::Name(prepared.event()));
    }

    /// An `otlp_metrics` event's request (`bytes` decoded): its resource metrics as they
    /// are (protobuf: the bytes themselves, a request being its `resource_metrics`
    /// fields, which concatenate).
    fn metrics<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        request: &ExportMetricsServiceRequest,
        bytes: &[u8],
    ) {
        let time = stamp.time_unix_ns;
        let tracepoint = &self.tracepoint.colon[..];
        if self.batches.framed().is_some() {
            // One record, whole in one frame, even without resources.
            let items = metrics::data_points(&request.resource_metrics);
            self.batches.add(
                out,
                Signal::Metrics,
                b"",
                b"",
                time,
                (tracepoint, items),
                |body| {
                    if E::PROTO {
                        return body.extend_from_slice(bytes);
                    }
                    for (n, rm) in request.resource_metrics.iter().enumerate() {
                        if n > 0 {
                            body.push(b',');
                        }
                        metrics::to_json(body, rm);
                    }
                },
            );
            return;
        }
        for rm in &request.resource_metrics {
            let items = metrics::data_points(std::slice::from_ref(rm));
            self.batches.add(
                out,
                Signal::Metrics,
                b"",
                b"",
                time,
                (tracepoint, items),
                |json| metrics::to_json(json, rm),
            );
        }
    }

    /// [`RecordWriter::write_lost`] in the encoding `E`.
    fn lost<E: Enc>(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>, cpu: u32, lost: u64) {
        let body = format_args!(
            "{lost} records lost on CPU {cpu}: the ring buffer was full \
             (a larger --buffer-size or a faster output helps)"
        );
        self.own_record::<E>(
            out,
            time_unix_ns,
            (SEVERITY_WARN, b"\"WARN\""),
            b"\"uevrec.lost\"",
            &body,
            |attrs| {
                attrs.add_named("uevrec.lost.count", |out| E::unsigned_any(out, lost));
                attrs.add_named("cpu.logical_number", |out| E::int_any(out, i64::from(cpu)));
            },
        );
    }

    /// [`RecordWriter::write_notice`] in the encoding `E`.
    fn notice<E: Enc>(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        self.own_record::<E>(
            out,
            time_unix_ns,
            (SEVERITY_INFO, b"\"INFO\""),
            b"\"uevrec.notice\"",
            &message,
            |attrs| {
                attrs.add_named("uevrec.notice.what", |out| E::message_any(out, &what));
                if let Some(event) = event {
                    attrs.add_named("uevrec.notice.event", |out| E::message_any(out, &event));
                }
            },
        );
    }
}

impl RecordWriter for OtlpWriter {
    /// Take one record of the event `prepared` (its trace entry `raw`); a line is
    /// appended to `out` when one is due.
    fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        if self.proto() {
            self.prepared::<Proto>(out, stamp, prepared, raw)
        } else {
            self.prepared::<Json>(out, stamp, prepared, raw)
        }
    }

    /// Append a log record saying the kernel dropped `lost` records on `cpu`
    /// (event name `uevrec.lost`, severity WARN, attribute `uevrec.lost.count`).
    fn write_lost(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>, cpu: u32, lost: u64) {
        if self.proto() {
            self.lost::<Proto>(out, time_unix_ns, cpu, lost)
        } else {
            self.lost::<Json>(out, time_unix_ns, cpu, lost)
        }
    }

    /// Append a log record for a notice (event name `uevrec.notice`, severity INFO;
    /// attributes `uevrec.notice.what` and `uevrec.notice.event`).
    fn write_notice(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        if self.proto() {
            self.notice::<Proto>(out, time_unix_ns, what, event, message)
        } else {
            self.notice::<Json>(out, time_unix_ns, what, event, message)
        }
    }

    /// Append every waiting record to `out` as complete lines (one per signal waiting).
    fn end_lines(&mut self, out: &mut Vec<u8>) {
        self.batches.end_lines(out);
    }

    /// Put `host.name` = `name` in every record's resource from now on.
    fn set_host_name(&mut self, name: &str) {
        self.host.clear();
        if self.proto() {
            Proto::resource_attr(&mut self.host, "host.name", |out| {
                Proto::message_any(out, &name)
            });
        } else {
            self.host
                .extend_from_slice(b"{\"key\":\"host.name\",\"value\":{\"stringValue\":");
            write_str(&mut self.host, name);
            self.host.extend_from_slice(b"}}");
        }
    }
}

/// OTLP severity of an EventHeader level (1 critical … 5 verbose; others unspecified)
/// and its text as a JSON string.
fn severity_of_level(level: u8) -> (i32, &'static [u8]) {
    match level {
        1 => (SEVERITY_FATAL, b"\"FATAL\""),
        2 => (SEVERITY_ERROR, b"\"ERROR\""),
        3 => (SEVERITY_WARN, b"\"WARN\""),
        4 => (SEVERITY_INFO, b"\"INFO\""),
        5 => (SEVERITY_DEBUG, b"\"DEBUG\""),
        _ => (0, b"\"\""),
    }
}

// The test oracle and the tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod reference;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests;
