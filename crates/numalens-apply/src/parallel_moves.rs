//! Calls made by several threads at once, answers kept in the calls' order: the mover's
//! `move_pages` calls of one job, so that pages are copied on several CPUs at once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `call(item)` for every item, by at most `threads` threads (taking the next item as each
/// finishes); the answers in the items' order.
pub fn run<T: Sync, R: Send>(items: &[T], threads: usize, call: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(&call).collect();
    }
    let next = AtomicUsize::new(0);
    let answers: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let answer = call(item);
                    answers.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(answer);
                }
            });
        }
    });
    answers
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|a| a.expect("every item was called"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn answers_come_in_the_items_order_from_several_threads() {
        let items: Vec<u64> = (0..64).collect();
        let seen = Mutex::new(HashSet::new());
        let answers = run(&items, 4, |&i| {
            seen.lock().unwrap().insert(std::thread::current().id());
            // Uneven work so that the threads finish out of order.
            std::thread::sleep(std::time::Duration::from_micros((64 - i) * 50));
            i * 10
        });
        assert_eq!(answers, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        assert!(seen.lock().unwrap().len() > 1, "one thread made every call");
    }

    #[test]
    fn one_thread_or_one_item_runs_on_the_caller() {
        let me = std::thread::current().id();
        assert_eq!(
            run(&[1, 2, 3], 1, |_| std::thread::current().id()),
            vec![me; 3]
        );
        assert_eq!(run(&[1], 8, |_| std::thread::current().id()), vec![me]);
        assert!(run(&[] as &[u8], 4, |_| 0).is_empty());
    }
}
