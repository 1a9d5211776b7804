//! One table file of a profile, as `Profile` reads it: the footer, the whole table, and projected
//! batches spread over threads (how the analysis streams `samples` and `page_stats`). The first
//! byte picks the table, the rest is its Parquet file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numalens_format::{
    CodeLocation, Migration, Object, PageNodes, PageStat, Profile, Row, Sample, SiteFrame, Thread,
};

fuzz_target!(|data: &[u8]| {
    numalens_fuzz::let_the_reader_catch_decoder_panics();
    let Some((&which, file)) = data.split_first() else {
        return;
    };
    let dir = numalens_fuzz::scratch();
    let meta = numalens_fuzz::meta();
    meta.write(&dir.path().join("meta.json")).unwrap();
    let profile = Profile::open(dir.path()).unwrap();
    match which % 8 {
        0 => read::<Sample>(&profile, file),
        1 => read::<Thread>(&profile, file),
        2 => read::<SiteFrame>(&profile, file),
        3 => read::<Object>(&profile, file),
        4 => read::<PageStat>(&profile, file),
        5 => read::<Migration>(&profile, file),
        6 => read::<PageNodes>(&profile, file),
        _ => read::<CodeLocation>(&profile, file),
    }
});

fn read<R: Row>(profile: &Profile, file: &[u8]) {
    std::fs::write(profile.table_path::<R>(), file).unwrap();
    let _ = profile.table_shape::<R>();
    let _ = profile.read_all::<R>();
    let columns: Vec<&str> = R::COLUMNS.iter().take(3).map(|c| c.name).collect();
    let _ = profile.for_each_batch_parallel::<R, _>(&columns, 2, |_| Ok(()));
}
