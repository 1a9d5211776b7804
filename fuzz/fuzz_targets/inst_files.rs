//! The `inst` backend's files as the recorder reads them when the program ended or was killed:
//! two `.pages` files (summed when they are the same thread's) and a `.samples` file, separated
//! in the input by `NLFUZZ--`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numalens_inst::files::read_inst_dir;

fuzz_target!(|data: &[u8]| {
    let parts = numalens_fuzz::split(data, 3);
    let dir = numalens_fuzz::scratch();
    for (name, part) in ["inst-1.pages", "inst-2.pages", "inst-1.samples"]
        .iter()
        .zip(&parts)
    {
        if !part.is_empty() {
            std::fs::write(dir.path().join(name), part).unwrap();
        }
    }
    let data = read_inst_dir(dir.path());
    let _ = data.pages.len() + data.samples.len();
});
