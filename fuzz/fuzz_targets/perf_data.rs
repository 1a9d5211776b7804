//! A perf.data file as `numalens import` reads it: both passes over its records, the decoding
//! of every sample layout, the header's topology sections, and the profile written from them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numalens_import::{ImportOptions, import};

fuzz_target!(|data: &[u8]| {
    let dir = numalens_fuzz::scratch();
    let input = dir.path().join("perf.data");
    std::fs::write(&input, data).unwrap();
    let opts = ImportOptions { min_object: 4096 };
    let _ = import(&input, &dir.path().join("out.numalens"), &opts);
});
