//! Helpers shared by the format tests.
#![allow(dead_code)]

use std::path::Path;

use numalens_format::{Backend, Clock, Completeness, Host, Meta, ProfileWriter};

pub fn meta() -> Meta {
    Meta::new(
        vec!["./app".into(), "--size".into(), "10".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "test".into(),
            kernel: "6.1.0".into(),
            arch: "x86_64".into(),
        },
        Clock {
            name: "CLOCK_MONOTONIC".into(),
            origin_ns: 123,
        },
    )
}

pub fn complete() -> Completeness {
    Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    }
}

/// Writes a profile holding `samples` and nothing else.
pub fn write_samples(dir: &Path, samples: &[numalens_format::Sample]) {
    let mut writer = ProfileWriter::create(dir, meta()).unwrap();
    for s in samples {
        writer.push_sample(s.clone()).unwrap();
    }
    writer.finish(complete()).unwrap();
}
