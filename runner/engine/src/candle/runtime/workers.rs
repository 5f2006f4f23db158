//! A whole decode run on one of rayon's worker threads, on the CPU.
//!
//! The CPU kernels split each product, attention and norm across rayon's pool, a few
//! hundred times per decode step. From a thread outside the pool every split is
//! queued, a worker woken, and the caller put to sleep until the pool is done; on a
//! small machine those hand-overs cost tens of microseconds each. From a worker, the
//! caller takes its own share of the split and its peer is often still awake. So the
//! engine moves a whole run onto a worker, once: not each step, which would move the
//! run between workers, and with it the allocator arena its tensors come from.

use candle_core::Device;
use std::sync::mpsc;

/// Whether work for `device` should move to a worker: on the CPU, from outside the pool.
/// A GPU's kernels do not run in the pool.
fn moves(device: &Device) -> bool {
    device.is_cpu() && rayon::current_thread_index().is_none()
}

/// `work`'s result, run on a worker of rayon's global pool where [`moves`] says so,
/// else here. Only the bench's fixed runs use it.
#[cfg_attr(not(any(test, feature = "tools")), allow(dead_code))]
pub(crate) fn on_worker<R: Send>(device: &Device, work: impl FnOnce() -> R + Send) -> R {
    if !moves(device) {
        return work();
    }
    rayon::scope(|_| work())
}

/// [`on_worker`] for work that hands over items as it goes: `work` runs on a worker
/// and `on_item` here, on the calling thread, as each item arrives. The caller's
/// callback need not be `Send` (the command line's writes a journal), and it now runs
/// while the workers go on decoding.
pub(crate) fn streamed_from_worker<T: Send, R: Send>(
    device: &Device,
    work: impl FnOnce(&mut dyn FnMut(T)) -> R + Send,
    on_item: &mut dyn FnMut(T),
) -> R {
    if !moves(device) {
        return work(on_item);
    }
    let (tx, rx) = mpsc::channel();
    let mut result = None;
    rayon::in_place_scope(|scope| {
        let slot = &mut result;
        scope.spawn(move |_| {
            // A send fails only once the caller's callback has panicked, and the
            // scope carries that panic on when this job ends.
            *slot = Some(work(&mut |item| tx.send(item).unwrap_or(())));
        });
        // Ends when the job drops its sender: it returned, or it panicked (and the
        // scope then carries the panic on).
        for item in rx {
            on_item(item);
        }
    });
    result.expect("a scope returns once its job has run")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_on_a_worker_and_items_reach_the_caller_in_order_on_its_own_thread() {
        let caller = std::thread::current().id();
        let mut seen = Vec::new();
        let result = streamed_from_worker(
            &Device::Cpu,
            |emit| {
                let on_pool = rayon::current_thread_index().is_some();
                for i in 0..100 {
                    emit(i);
                }
                on_pool
            },
            &mut |i| {
                assert_eq!(std::thread::current().id(), caller);
                seen.push(i);
            },
        );
        assert!(result, "the work ran outside rayon's pool");
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        assert!(on_worker(&Device::Cpu, || rayon::current_thread_index().is_some()));
    }

    #[test]
    fn a_panic_in_the_work_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            streamed_from_worker(
                &Device::Cpu,
                |emit: &mut dyn FnMut(u32)| {
                    emit(1);
                    panic!("the work failed")
                },
                &mut |_| {},
            )
        });
        assert!(caught.is_err());
    }
}
