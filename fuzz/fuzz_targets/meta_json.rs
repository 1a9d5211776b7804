//! `meta.json` as `Profile::open` reads it: parsed and checked, and a profile directory holding
//! it opened.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use numalens_format::{Meta, Profile};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(meta) = Meta::from_json_str(text, Path::new("meta.json")) else {
        return;
    };
    // What was accepted is written and read back the same.
    let dir = numalens_fuzz::scratch();
    meta.write(&dir.path().join("meta.json")).unwrap();
    let profile = Profile::open(dir.path()).expect("a meta.json that was accepted opens");
    assert_eq!(profile.meta(), &meta);
});
