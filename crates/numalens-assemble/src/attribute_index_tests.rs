//! The index against a brute-force reference on random object sets: nested, overlapping,
//! duplicated and reused ranges, tracked and fallback, several processes, random lifetimes, and
//! time-ordered lookups dense or sparse between the object events.

use numalens_format::ObjectKind;

use super::*;
use crate::attribute::Locator;

/// xorshift64*: deterministic, no dependency.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const SPACE: u64 = 1 << 16;
const END_NS: u64 = 10_000;

fn object(pid: u32, start: u64, size: u64, alloc_ns: u64, free_ns: Option<u64>) -> ObjectSpec {
    ObjectSpec {
        pid,
        kind: ObjectKind::Heap,
        name: String::new(),
        start,
        size,
        alloc_ns,
        free_ns,
        alloc_tid: None,
        site_key: None,
        tracked: true,
    }
}

fn random_objects(rng: &mut Rng, count: usize) -> Vec<ObjectSpec> {
    let mut objects: Vec<ObjectSpec> = Vec::with_capacity(count);
    // Short lives in some sets, long ones in others: churn against a stable population.
    let max_life = [50, 500, END_NS][rng.below(3) as usize];
    for _ in 0..count {
        let pid = 1 + rng.below(3) as u32;
        let size = match rng.below(10) {
            0 => 0,
            1..=4 => 1 + rng.below(64),
            5..=7 => 1 + rng.below(4096),
            _ => 1 + rng.below(SPACE),
        };
        let start = match rng.below(10) {
            // Inside, or overlapping the end of, an earlier object (of any process).
            0..=3 if !objects.is_empty() => {
                let o = &objects[rng.below(objects.len() as u64) as usize];
                o.start.saturating_add(rng.below(o.size.max(1)))
            }
            // The same range as an earlier object.
            4 if !objects.is_empty() => {
                let o = objects[rng.below(objects.len() as u64) as usize].clone();
                let alloc = rng.below(END_NS);
                let mut dup = object(pid, o.start, o.size, alloc, None);
                dup.free_ns = rng.chance(60).then(|| alloc + 1 + rng.below(max_life));
                dup.tracked = rng.chance(70);
                objects.push(dup);
                continue;
            }
            // Where an end saturates.
            5 if rng.chance(5) => u64::MAX - rng.below(8),
            _ => rng.below(SPACE),
        };
        let alloc = rng.below(END_NS);
        let mut o = object(pid, start, size, alloc, None);
        o.free_ns = rng.chance(60).then(|| alloc + 1 + rng.below(max_life));
        o.tracked = rng.chance(70);
        objects.push(o);
    }
    objects
}

/// (time, pid, address), time-ordered: near objects' edges, inside them, anywhere.
fn random_lookups(rng: &mut Rng, objects: &[ObjectSpec], count: usize) -> Vec<(u64, u32, u64)> {
    let mut lookups: Vec<(u64, u32, u64)> = (0..count)
        .map(|_| {
            let time = rng.below(END_NS + 100);
            if objects.is_empty() || rng.chance(20) {
                return (time, 1 + rng.below(4) as u32, rng.below(SPACE));
            }
            let o = &objects[rng.below(objects.len() as u64) as usize];
            let address = match rng.below(6) {
                0 => o.start,
                1 => o.start.wrapping_add(o.size).wrapping_sub(1),
                2 => o.start.saturating_add(o.size),
                3 => o.start.wrapping_sub(1),
                _ => o.start.wrapping_add(rng.below(o.size.max(1))),
            };
            (time, o.pid, address)
        })
        .collect();
    lookups.sort_by_key(|l| l.0);
    // Runs of lookups at one time, as between two object events.
    for i in 1..lookups.len() {
        if rng.chance(30) {
            lookups[i].0 = lookups[i - 1].0;
        }
    }
    lookups
}

/// Of every object of `pid` live at `time` and containing `address`: a tracked one before a
/// fallback one, then the smallest, the lowest, the first to become live (allocated first, or
/// listed first when allocated at the same time).
fn reference(objects: &[ObjectSpec], time: u64, pid: u32, address: u64) -> Option<usize> {
    (0..objects.len())
        .filter(|&id| {
            let o = &objects[id];
            o.pid == pid
                && o.alloc_ns <= time
                && o.free_ns.is_none_or(|f| f > time)
                && o.start <= address
                // Ends are clipped to the top of the address space, whose last byte no object holds.
                && address < o.start.saturating_add(o.size)
        })
        .min_by_key(|&id| {
            let o = &objects[id];
            (!o.tracked, o.size, o.start, o.alloc_ns, id)
        })
}

/// Runs the lookups against the index fed in time order, as `Locator` feeds it.
fn check(objects: &[ObjectSpec], lookups: &[(u64, u32, u64)], stats: &mut Stats) {
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (id, o) in objects.iter().enumerate() {
        events.push((o.alloc_ns, true, id));
        if let Some(f) = o.free_ns {
            events.push((f, false, id));
        }
    }
    events.sort();
    let mut index = LiveIndex::new(objects);
    let mut next = 0;
    for (n, &(time, pid, address)) in lookups.iter().enumerate() {
        while next < events.len() && events[next].0 <= time {
            let (_, starts, id) = events[next];
            if starts {
                index.insert(id);
            } else {
                index.remove(id);
            }
            next += 1;
        }
        let want = reference(objects, time, pid, address);
        let got = index.find(pid, address);
        assert_eq!(
            got,
            want,
            "lookup {n}: pid {pid} address {address:#x} at {time}: got {:?}, want {:?}",
            got.map(|i| &objects[i]),
            want.map(|i| &objects[i]),
        );
    }
    let s = index.stats;
    stats.unbuilt += s.unbuilt;
    stats.freed_winner += s.freed_winner;
    stats.many_added += s.many_added;
    stats.short_list += s.short_list;
    stats.clean += s.clean;
    stats.rebuilds += s.rebuilds;
}

#[test]
fn the_index_agrees_with_a_brute_force_search_on_random_object_sets() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut stats = Stats::default();
    for _ in 0..60 {
        let n = 1 + rng.below(400) as usize;
        let objects = random_objects(&mut rng, n);
        let n = 1 + rng.below(4000) as usize;
        let lookups = random_lookups(&mut rng, &objects, n);
        check(&objects, &lookups, &mut stats);
    }
    // Every way of answering was taken, many times.
    for (what, n) in [
        ("unbuilt", stats.unbuilt),
        ("freed winner", stats.freed_winner),
        ("many added", stats.many_added),
        ("short list", stats.short_list),
        ("clean", stats.clean),
        ("rebuilds", stats.rebuilds),
    ] {
        assert!(n >= 100, "{what}: only {n} times ({stats:?})");
    }
}

#[test]
fn the_locator_agrees_with_a_brute_force_search_on_random_object_sets() {
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    for _ in 0..20 {
        let n = 1 + rng.below(300) as usize;
        let objects = random_objects(&mut rng, n);
        let n = 1 + rng.below(3000) as usize;
        let lookups = random_lookups(&mut rng, &objects, n);
        let mut locator = Locator::new(&objects);
        for &(time, pid, address) in &lookups {
            locator.advance_to(time);
            assert_eq!(
                locator.find(pid, address),
                reference(&objects, time, pid, address),
                "pid {pid} address {address:#x} at {time}"
            );
        }
    }
}

#[test]
fn a_freed_container_uncovers_the_one_beneath_and_a_new_one_covers_it() {
    let objects = vec![
        object(1, 0, 1 << 20, 0, None),
        object(1, 0x1000, 0x10000, 0, Some(50)),
        object(1, 0x2000, 0x100, 0, None),
        object(1, 0x1000, 0x8000, 60, None),
    ];
    let mut index = LiveIndex::new(&objects);
    for id in 0..3 {
        index.insert(id);
    }
    // Enough lookups for the interval list to be built.
    for _ in 0..1000 {
        assert_eq!(index.find(1, 0x1800), Some(1));
    }
    assert!(index.stats.rebuilds > 0);
    assert_eq!(index.find(1, 0x2010), Some(2));
    index.remove(1);
    assert_eq!(index.find(1, 0x1800), Some(0));
    assert_eq!(index.find(1, 0x2010), Some(2));
    index.insert(3);
    assert_eq!(index.find(1, 0x1800), Some(3));
    assert_eq!(index.find(1, 0x9000), Some(0));
    assert_eq!(index.find(2, 0x1800), None);
}
