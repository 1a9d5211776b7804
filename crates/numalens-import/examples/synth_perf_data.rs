//! Writes a synthetic `perf mem record`-style file (PEBS load-latency layout) with N samples over
//! a few mappings and threads, for `bench/import`: `synth_perf_data OUT N`.

use numalens_import::write::*;

const PID: u32 = 7000;
const THREADS: u32 = 8;
/// (start, size) of the mappings the samples fall in.
const MAPPINGS: [(u64, u64); 4] = [
    (0x7f10_0000_0000, 1 << 30),
    (0x7f20_0000_0000, 256 << 20),
    (0x7f30_0000_0000, 64 << 20),
    (0x5600_0000_0000, 8 << 20),
];

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(out), Some(n)) = (args.next(), args.next()) else {
        eprintln!("usage: synth_perf_data OUT SAMPLES");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("SAMPLES is a number");
    let mut w = PerfDataWriter::new();
    let loads = w.event(mem_loads_event(1000, vec![1]));
    w.comm(PID, PID, "synth", 0);
    for (start, size) in MAPPINGS {
        w.mmap2(PID, start, size, 0, 3, 0x22, "//anon", 0);
    }
    // A cheap deterministic generator (xorshift) spreads the addresses.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..n {
        // perf writes a round after each pass over the rings: some thousands of samples.
        if i % 4096 == 4095 {
            w.finished_round();
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (start, size) = MAPPINGS[(x % 4) as usize];
        w.sample(
            loads,
            &SampleFields {
                ip: 0x40_1000 + (x >> 40) % 512,
                pid: PID,
                tid: PID + (i % u64::from(THREADS)) as u32,
                time: 1_000_000 + i * 100,
                addr: start + (x >> 8) % size,
                id: 1,
                cpu: (i % 16) as u32,
                period: 1000,
                weight: weight_struct(30 + (x % 400) as u32, 5, 0),
                data_src: [0x6810_0142, 0x6810_1042, 0x6810_2042][(x >> 20) as usize % 3],
                phys_addr: (x >> 4) % (64 << 30),
                ..SampleFields::default()
            },
        );
    }
    w.finished_round();
    w.write_to(std::path::Path::new(&out))
        .expect("the file is written");
}
