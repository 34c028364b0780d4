//! `otlp_metrics` events of `opentelemetry-user-events-metrics`: a plain user_event
//! `otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer;` whose `buffer`
//! holds one protobuf `ExportMetricsServiceRequest` (`protocol` 0 = protobuf), decoded
//! with prost into `opentelemetry-proto`'s message, whose `ResourceMetrics` are written
//! as OTLP/JSON by its serde mapping.
//!
//! Why the message types stay here (logs and spans are written directly): the input is
//! protobuf, which has to be decoded by a protobuf library anyway, and the metrics schema
//! is large (gauges, sums, histograms, exponential histograms, summaries, exemplars,
//! each with its data points): a hand-written protobuf → JSON walk would restate all of
//! it for a signal that arrives once per export interval per meter (seconds apart), not
//! per application event. Decoding allocates the request; that is measured nowhere near
//! the recorder's limits at those rates.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::ResourceMetrics;
use prost::Message;

use crate::decode::{Endian, Value, decode_field};
use crate::json_line::PreparedFormat;
use crate::schema::EventFormat;

/// The event name the exporter registers.
const EVENT: &str = "otlp_metrics";

/// Whether `prepared` is the exporter's event: named `otlp_metrics`, with a `buffer`
/// field.
pub(crate) fn is_metrics_event(prepared: &PreparedFormat) -> bool {
    prepared.event() == EVENT && prepared.format().field("buffer").is_some()
}

/// The request in the record `raw` and its bytes, or why there is none.
pub(crate) fn decode<'a>(
    format: &EventFormat,
    raw: &'a [u8],
    endian: Endian,
) -> Result<(ExportMetricsServiceRequest, &'a [u8]), String> {
    if let Some(protocol) = format.field("protocol") {
        match decode_field(protocol, raw, endian) {
            Value::Unsigned(0) | Value::Signed(0) => {}
            Value::Unsigned(n) => {
                return Err(format!(
                    "otlp_metrics protocol {n} is not 0 (protobuf): not decoded"
                ));
            }
            Value::Signed(n) => {
                return Err(format!(
                    "otlp_metrics protocol {n} is not 0 (protobuf): not decoded"
                ));
            }
            _ => return Err("otlp_metrics protocol is not a number: not decoded".into()),
        }
    }
    let buffer = format
        .field("buffer")
        .ok_or("otlp_metrics without a buffer field")?;
    let bytes = match decode_field(buffer, raw, endian) {
        Value::Bytes(b) | Value::Str(b) => b,
        Value::Error(e) => return Err(format!("otlp_metrics buffer: {e}")),
        _ => return Err("otlp_metrics buffer is not bytes: not decoded".into()),
    };
    ExportMetricsServiceRequest::decode(bytes)
        .map(|request| (request, bytes))
        .map_err(|e| format!("otlp_metrics buffer is not an ExportMetricsServiceRequest: {e}"))
}

/// The data points of `resource_metrics` (the items of a metrics request, what a
/// `partial_success` counts as `rejected_data_points`).
pub(crate) fn data_points(resource_metrics: &[ResourceMetrics]) -> usize {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let points = |data: &Option<Data>| match data {
        Some(Data::Gauge(g)) => g.data_points.len(),
        Some(Data::Sum(s)) => s.data_points.len(),
        Some(Data::Histogram(h)) => h.data_points.len(),
        Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
        Some(Data::Summary(s)) => s.data_points.len(),
        None => 0,
    };
    resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .map(|m| points(&m.data))
        .sum()
}

/// One `ResourceMetrics` as OTLP/JSON on `out` (`opentelemetry-proto`'s serde mapping).
pub(crate) fn to_json(out: &mut Vec<u8>, rm: &ResourceMetrics) {
    // Writing to a Vec cannot fail, and the messages have only string keys.
    let _ = serde_json::to_writer(out, rm);
}
