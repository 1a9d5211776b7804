//! An Arm SPE AUX buffer as `numalens import` decodes it: packets, the records they make, each
//! record's load/store kind and data source (Neoverse and generic), and the time conversion
//! (the first 48 bytes are a `PERF_RECORD_TIME_CONV` body, the rest the packets).
#![no_main]

use libfuzzer_sys::fuzz_target;
use numalens_import::bytes::Bytes;
use numalens_import::spe::{self, Records, TimeConv};

fuzz_target!(|data: &[u8]| {
    let (conv, packets) = data.split_at(data.len().min(48));
    let conv = TimeConv::parse(&mut Bytes::new(conv, false)).unwrap_or_default();
    let mut records = Records::new(packets);
    for r in records.by_ref() {
        let _ = r.kind();
        let _ = spe::data_source(&r, true);
        let _ = spe::data_source(&r, false);
        let _ = conv.perf_time(r.timestamp.unwrap_or(0));
    }
    assert!(records.bad <= packets.len() as u64);
});
