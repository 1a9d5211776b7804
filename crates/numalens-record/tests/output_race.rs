//! Two recordings started at once with the same `-o`: one gets the directory, the other is told
//! it already exists (not that it "is not writable: File exists").

use std::sync::{Arc, Barrier};

use numalens_record::record::{RecordError, prepare_output};

#[test]
fn recordings_racing_for_one_output_get_one_directory_and_one_already_exists() {
    let dir = tempfile::tempdir().unwrap();
    const RACERS: usize = 4;
    for round in 0..200 {
        let output = dir.path().join(format!("r{round}.numalens"));
        let start = Arc::new(Barrier::new(RACERS));
        let racers: Vec<_> = (0..RACERS)
            .map(|_| {
                let (output, start) = (output.clone(), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    prepare_output(&output)
                })
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        for lost in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(lost, RecordError::OutputExists { .. }),
                "round {round}: {lost}"
            );
            assert!(lost.to_string().contains("already exists"), "{lost}");
        }
        assert_eq!(won, 1, "round {round}");
    }
}
