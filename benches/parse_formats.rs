//! Parse speed of `parse_format` over the 2,751 real format files of `formats0.zip`,
//! reported by criterion as files per second (`thrpt: … elem/s`).
//!
//! Corpus: `$UEVREC_CORPUS_DIR`, else `<project root>/../shared/corpus`; skipped, saying
//! why, when absent.

use std::hint::black_box;
use std::io::Read;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec_parsers::parse_format;

/// The texts of all corpus entries, or `None` with the reason printed.
fn corpus_texts() -> Option<Vec<String>> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    let path = dir.join("formats0.zip");
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) => {
            println!(
                "SKIP: corpus not found at {}: {e} (set UEVREC_CORPUS_DIR)",
                path.display()
            );
            return None;
        }
    };
    let mut zip = match zip::ZipArchive::new(file) {
        Ok(zip) => zip,
        Err(e) => {
            println!("SKIP: {} is not a readable zip: {e}", path.display());
            return None;
        }
    };
    let mut texts = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut text = String::new();
        match zip
            .by_index(i)
            .map(|mut entry| entry.read_to_string(&mut text))
        {
            Ok(Ok(_)) => texts.push(text),
            other => {
                println!(
                    "SKIP: entry {i} of {} unreadable: {other:?}",
                    path.display()
                );
                return None;
            }
        }
    }
    Some(texts)
}

fn parse_all(c: &mut Criterion) {
    let Some(texts) = corpus_texts() else { return };
    let bytes: usize = texts.iter().map(String::len).sum();
    let failures = texts.iter().filter(|t| parse_format(t).is_err()).count();
    println!(
        "{} format files, {bytes} bytes, {failures} parse failures",
        texts.len()
    );

    let mut group = c.benchmark_group("parse_formats");
    group.sample_size(20);
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.bench_function("corpus_files", |b| {
        b.iter(|| {
            for text in &texts {
                let _ = black_box(parse_format(black_box(text)));
            }
        })
    });
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("corpus_bytes", |b| {
        b.iter(|| {
            for text in &texts {
                let _ = black_box(parse_format(black_box(text)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, parse_all);
criterion_main!(benches);
