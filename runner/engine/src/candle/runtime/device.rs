//! Which device runs the model, in which dtype, and how much KV cache it can hold.

use crate::EngineError;
use candle_core::Device;

/// Where to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// CUDA device 0 when the binary has CUDA and a device answers, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(|| format!("unknown device {s:?} (auto, cpu, cuda:N)")),
        }
    }
}

/// The device to use and, for `auto` falling back to the CPU, the reason why.
pub fn select_device(choice: DeviceChoice) -> Result<(Device, Option<String>), EngineError> {
    match choice {
        DeviceChoice::Cpu => Ok((Device::Cpu, None)),
        DeviceChoice::Cuda(n) => cuda_device(n).map(|d| (d, None)),
        // A build without CUDA has only the CPU to choose: saying so on every run is
        // noise. A CUDA build that finds no usable device says why.
        DeviceChoice::Auto if !cfg!(feature = "cuda") => Ok((Device::Cpu, None)),
        DeviceChoice::Auto => match cuda_device(0) {
            Ok(d) => Ok((d, None)),
            Err(e) => Ok((Device::Cpu, Some(format!("running on the CPU: {e}")))),
        },
    }
}

/// `cpu`, `cuda:0`: the device as a run's manifest and a bench's table name it.
pub fn name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".to_string(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

#[cfg(feature = "cuda")]
fn cuda_device(n: usize) -> Result<Device, EngineError> {
    // Some CUDA initialisation failures panic inside the driver bindings instead of
    // returning an error; the fallback must survive them.
    match std::panic::catch_unwind(|| Device::new_cuda(n)) {
        Ok(Ok(d)) => {
            if let Device::Cuda(cuda) = &d {
                // Safety: the engine issues all its work on the device's one stream, in
                // order, so no tensor is used on another stream; the two CUDA events that
                // cudarc records per allocation to order streams are pure overhead here.
                unsafe { cuda.disable_event_tracking() };
                if let Err(e) = keep_freed_memory(cuda) {
                    eprintln!("warning: CUDA device {n}: freed memory goes back to the driver at every step ({e})");
                }
            }
            Ok(d)
        }
        Ok(Err(e)) => Err(EngineError::Device(format!(
            "CUDA device {n} is not usable: {}",
            crate::without_backtrace(e)
        ))),
        Err(_) => Err(EngineError::Device(format!(
            "CUDA device {n} is not usable (driver panic)"
        ))),
    }
}

/// Lets the device's memory pool keep what the engine frees. cudarc allocates from the
/// stream-ordered pool (`cuMemAllocAsync`), whose default release threshold is 0: at
/// every synchronisation (each decode step's logits read is one) the pool hands all its
/// unused memory back to the driver, and the next step's few hundred activation buffers
/// are mapped afresh. Kept, they are reused from the pool instead. What stays reserved
/// is bounded by a step's peak, which the KV budget's headroom already covers
/// ([`kv_budget`] takes 80% of what is free after the weights).
#[cfg(feature = "cuda")]
fn keep_freed_memory(cuda: &candle_core::CudaDevice) -> Result<(), String> {
    use candle_core::cuda_backend::cudarc::driver::{result, sys};
    let Some(pool) = default_pool(cuda)? else {
        return Ok(());
    };
    let mut keep: u64 = u64::MAX;
    // Safety: the release threshold is a cuuint64_t, which `keep` is.
    unsafe {
        result::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
    }
    .map_err(|e| e.to_string())
}

/// The pool the device's allocations come from, with its context bound to this
/// thread; none where they are plain `cuMemAlloc`s.
#[cfg(feature = "cuda")]
fn default_pool(
    cuda: &candle_core::CudaDevice,
) -> Result<Option<candle_core::cuda_backend::cudarc::driver::sys::CUmemoryPool>, String> {
    use candle_core::cuda_backend::cudarc::driver::result;
    let stream = cuda.cuda_stream();
    let context = stream.context();
    if !context.has_async_alloc() {
        return Ok(None);
    }
    context.bind_to_thread().map_err(|e| e.to_string())?;
    // Safety: the device comes from the context candle created.
    unsafe { result::device::get_default_mem_pool(context.cu_device()) }
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_n: usize) -> Result<Device, EngineError> {
    Err(EngineError::Device(
        "this binary was built without CUDA: rebuild it with `cargo build --release \
         --features runner/cuda` (needs nvcc), or carry one built elsewhere (scripts/gpu-bundle)"
            .into(),
    ))
}

/// Bytes the KV cache may take on `device`: most of what is free after the weights
/// are loaded on a GPU; half of what the process may still take on the CPU (its memory
/// cgroup's limit included: sized by the host's figure, a job's cache outgrows its
/// group and the kernel kills it).
pub(crate) fn kv_budget(device: &Device) -> usize {
    match device {
        Device::Cpu => cpu_kv_budget(crate::candle::runtime::host_memory::available()),
        _ => gpu_free_bytes(device).map_or(16 << 30, gpu_kv_budget),
    }
}

/// The CPU's KV budget with `available` bytes available: half of it.
pub fn cpu_kv_budget(available: Option<u64>) -> usize {
    available.map_or(8 << 30, |b| usize::try_from(b / 2).unwrap_or(usize::MAX))
}

/// The KV budget of a GPU with `free` bytes free once the weights are in: 80%, leaving
/// the rest for a step's activations, cuBLAS's workspace and the joins' overlap.
pub fn gpu_kv_budget(free: usize) -> usize {
    free / 10 * 8
}

/// Free memory on a GPU, as the driver reports it.
pub(crate) fn gpu_free(device: &Device) -> Option<u64> {
    gpu_free_bytes(device).map(|b| b as u64)
}

#[cfg(feature = "cuda")]
fn gpu_free_bytes(device: &Device) -> Option<usize> {
    // Loading frees the separate q/k/v and gate/up weights it stacks, and the pool keeps
    // what is freed (`keep_freed_memory`): handed back first, it counts as free for the
    // cache instead of being left out of the budget.
    if let Device::Cuda(cuda) = device {
        if let Err(e) = trim_pool(cuda) {
            eprintln!("warning: the KV budget leaves out memory the CUDA pool holds ({e})");
        }
    }
    candle_core::cuda_backend::cudarc::driver::result::mem_get_info()
        .ok()
        .map(|(free, _total)| free)
}

/// Hands the memory the device's pool holds unused back to the driver, once the work
/// that freed it has run.
#[cfg(feature = "cuda")]
fn trim_pool(cuda: &candle_core::CudaDevice) -> Result<(), String> {
    use candle_core::backend::BackendDevice;
    cuda.synchronize().map_err(|e| e.to_string())?;
    let Some(pool) = default_pool(cuda)? else {
        return Ok(());
    };
    // Safety: the pool is the device's own.
    unsafe { candle_core::cuda_backend::cudarc::driver::result::mem_pool::trim_to(pool, 0) }
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn gpu_free_bytes(_device: &Device) -> Option<usize> {
    None
}

/// Rows whose KV cache of `tokens_per_row` tokens each fits `budget` bytes; at least one
/// (a single row that does not fit fails as out of memory, not as an empty batch).
pub fn row_limit(budget: usize, kv_bytes_per_token: usize, tokens_per_row: usize) -> usize {
    let per_row = kv_bytes_per_token.saturating_mul(tokens_per_row).max(1);
    (budget / per_row).max(1)
}

/// Rows decoded together at most by default. A GPU's decode step reads the weights once
/// for all rows, so rows are nearly free up to [`crate::candle::ROW_CAP`]; on the CPU a step's
/// cost grows with its rows, so more rows buy little throughput and only make each call
/// of the run loop (which journals once per call) longer.
pub fn default_row_cap(device: &Device) -> usize {
    if device.is_cpu() {
        64
    } else {
        crate::candle::ROW_CAP
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fallback_reason_drops_the_backtrace_but_keeps_the_error() {
        let inner = candle_core::Error::Msg("DriverError(CUDA_ERROR_NO_DEVICE)".into());
        let traced = candle_core::Error::WithBacktrace {
            inner: Box::new(inner),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert!(
            traced.to_string().lines().count() > 1,
            "the trace is printed"
        );
        let plain = crate::without_backtrace(traced).to_string();
        assert_eq!(plain, "DriverError(CUDA_ERROR_NO_DEVICE)");
    }
}
