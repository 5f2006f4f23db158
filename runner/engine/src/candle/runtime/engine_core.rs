//! The engine core: checks the requests, runs the batching loop the engine is set to,
//! and after an out-of-memory error runs what is left again with fewer rows.

use crate::candle::runtime::scheduler::Demand;
use crate::candle::runtime::{continuous, static_group, workers};
use crate::candle::{Batching, Engine};
use crate::{Backend, BatchStats, EngineError, Request, RequestId, Sample};
use std::collections::HashSet;

impl Backend for Engine {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn memory_bounds(&self) -> Option<String> {
        let (budget, per_token) = (self.limits.kv_budget_bytes, self.kv_bytes_per_token);
        // The budget follows the memory free at load, so it moves from run to run: say so.
        let bound = if self.device.is_cpu() {
            "half the memory available when the model loaded"
        } else {
            "most of the GPU memory free after the weights loaded"
        };
        Some(format!(
            "KV cache up to {:.1} GB, {bound} ({} KB a token, {} tokens in all); at most {} \
             rows decode together (--max-batch)",
            budget as f64 / 1e9,
            per_token.div_ceil(1000),
            crate::batch::grouped(budget / per_token.max(1)),
            self.limits.max_rows,
        ))
    }

    /// A few batches' worth at the row limit of prompts of 2,048 tokens, so that the
    /// scheduler has prompts waiting when rows finish.
    fn preferred_batch(&self) -> usize {
        (2 * self.row_limit(2048)).clamp(64, 2048)
    }

    fn batch_stats(&self) -> Option<BatchStats> {
        Some(self.batch_stats)
    }

    fn activity(&self) -> Option<std::sync::Arc<crate::activity::Activity>> {
        Some(self.activity.clone())
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let device = self.device.clone();
        workers::streamed_from_worker(
            &device,
            |emit| self.generate_here(requests, emit),
            on_sample,
        )
    }
}

impl Engine {
    /// [`Backend::generate_each`] on the calling thread.
    fn generate_here(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut pending: Vec<(Request, Vec<u32>)> = Vec::new();
        for r in requests {
            if r.seeds.is_empty() {
                continue;
            }
            if r.max_new_tokens == 0 {
                return Err(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: "max_new_tokens must be at least 1".into(),
                });
            }
            let ids = self.encode(&r.prompt)?;
            if ids.is_empty() {
                return Err(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: "the prompt encodes to no tokens".into(),
                });
            }
            pending.push((r.clone(), ids));
        }
        let pending = self.policy().split_seeds(pending);
        let result = self.decode_with_retry(pending, on_sample);
        self.activity.idle();
        result
    }
}

impl Engine {
    /// Decodes `pending` with the engine's batching mode. After an out-of-memory error
    /// the scheduler lowers the row limit ([`Policy::rows_after_out_of_memory`]) and the
    /// samples not yet handed over are decoded again: identically, as rows are
    /// batch-invariant and a sample's randomness is keyed on its request and seed, and
    /// none is handed over twice.
    ///
    /// [`Policy::rows_after_out_of_memory`]: crate::candle::runtime::scheduler::Policy::rows_after_out_of_memory
    fn decode_with_retry(
        &mut self,
        mut pending: Vec<(Request, Vec<u32>)>,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut emitted: HashSet<(RequestId, u64)> = HashSet::new();
        loop {
            let mut peak = 0;
            let result = {
                let mut once = |s: Sample| {
                    if emitted.insert((s.request_id.clone(), s.seed)) {
                        on_sample(s)
                    }
                };
                match self.batching {
                    Batching::Continuous => self.continuous(&pending, &mut peak, &mut once),
                    Batching::Static => self.static_groups(&pending, &mut peak, &mut once),
                }
            };
            let retry = match &result {
                Err(e) if is_out_of_memory(e) => self.policy().rows_after_out_of_memory(peak),
                _ => None,
            };
            let Some(rows) = retry else {
                return result;
            };
            eprintln!(
                "warning: out of memory decoding {peak} rows together; retrying with at most {rows}"
            );
            self.limits.max_rows = rows;
            for (r, _) in &mut pending {
                r.seeds
                    .retain(|&seed| !emitted.contains(&(r.id.clone(), seed)));
            }
            pending.retain(|(r, _)| !r.seeds.is_empty());
        }
    }

    /// Continuous batching over all of `pending`; `peak` gets the most rows the device
    /// held.
    fn continuous(
        &mut self,
        pending: &[(Request, Vec<u32>)],
        peak: &mut usize,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let refs: Vec<(&Request, Vec<u32>)> = pending.iter().map(|(r, p)| (r, p.clone())).collect();
        let (mut stats, mut times) = (self.batch_stats, self.phase_times);
        let result = continuous::run(self, &refs, &mut stats, &mut times, peak, on_sample);
        (self.batch_stats, self.phase_times) = (stats, times);
        result
    }

    /// Static groups, the benchmark's baseline for continuous batching, one after the
    /// other; `peak` gets the rows of the group that failed.
    fn static_groups(
        &mut self,
        pending: &[(Request, Vec<u32>)],
        peak: &mut usize,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let demands: Vec<Demand> = pending
            .iter()
            .map(|(r, p)| Demand::of(r, p.len()))
            .collect();
        let mut start = 0;
        // Draining (a first Ctrl-C): the group decoding finishes, no new one starts.
        while start < pending.len() && self.activity.admitting() {
            let end = self.policy().group_end(&demands, start);
            let group: Vec<&Request> = pending[start..end].iter().map(|(r, _)| r).collect();
            let prompts: Vec<Vec<u32>> =
                pending[start..end].iter().map(|(_, p)| p.clone()).collect();
            let waiting: usize = demands[end..].iter().map(|d| d.rows).sum();
            *peak = demands[start..end].iter().map(|d| d.rows).sum();
            let (mut stats, mut times) = (self.batch_stats, self.phase_times);
            let result = static_group::run(
                self, &group, &prompts, waiting, &mut stats, &mut times, on_sample,
            );
            (self.batch_stats, self.phase_times) = (stats, times);
            result?;
            start = end;
        }
        Ok(())
    }
}

/// Whether an engine error is the device running out of memory (worth a smaller batch):
/// the driver's `CUDA_ERROR_OUT_OF_MEMORY`, and cuBLAS's `CUBLAS_STATUS_ALLOC_FAILED`
/// when a matmul cannot get its workspace.
fn is_out_of_memory(e: &EngineError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("out of memory")
        || text.contains("out_of_memory")
        || text.contains("status_alloc_failed")
}

#[cfg(test)]
mod tests {
    use crate::candle::{fixture, load::hub::ModelFiles, Engine};
    use crate::EngineError;

    #[test]
    fn cuda_and_cublas_allocation_failures_are_out_of_memory_and_others_are_not() {
        let err = |m: &str| EngineError::Tensor(candle_core::Error::Msg(m.into()));
        for oom in [
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")",
            "cublas error: CublasError(CUBLAS_STATUS_ALLOC_FAILED)",
        ] {
            assert!(super::is_out_of_memory(&err(oom)), "{oom}");
        }
        for other in [
            "cublas error: CublasError(CUBLAS_STATUS_EXECUTION_FAILED)",
            "DriverError(CUDA_ERROR_ILLEGAL_ADDRESS)",
        ] {
            assert!(!super::is_out_of_memory(&err(other)), "{other}");
        }
    }
    use crate::{Backend, FinishReason, Prompt, Request, RequestId, Sampling};
    use candle_core::Device;

    #[test]
    fn decoding_stops_before_any_declared_end_token() {
        let dir = std::env::temp_dir().join(format!("engine-stop-{}", std::process::id()));
        fixture::write_fixture(fixture::Arch::Qwen2, fixture::Size::Tiny, &dir).unwrap();
        let mut e =
            Engine::load(&ModelFiles::from_dir(&dir).unwrap(), Device::Cpu, "stop").unwrap();
        let req = Request {
            id: RequestId::new("stop"),
            prompt: Prompt::Raw("the river is north".into()),
            seeds: vec![0],
            max_new_tokens: 6,
            sampling: Sampling::Greedy,
        };
        let free = e.generate(std::slice::from_ref(&req)).unwrap().remove(0);
        assert_eq!(free.finish_reason, FinishReason::Length);
        assert_eq!(free.token_ids.len(), 6);
        let end = free.token_ids[2];
        e.eos.push(end);
        let stopped = e.generate(std::slice::from_ref(&req)).unwrap().remove(0);
        let cut = free.token_ids.iter().position(|&t| t == end).unwrap();
        assert_eq!(stopped.finish_reason, FinishReason::Stop);
        assert_eq!(stopped.token_ids, free.token_ids[..cut]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
