//! Reads safetensors files tensor by tensor with positioned reads, not through a
//! memory map. A mapped file's pages count in the process's resident memory once
//! touched, so loading a 15 GB checkpoint through a map while packing or quantizing
//! it would peak at the file plus the copy; read this way, only one tensor's bytes
//! are held besides what is kept.

use crate::EngineError;
use candle_core::{DType, Device, Shape, Tensor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}

/// A safetensors header's entries in the order written, duplicates kept (a map would
/// silently keep the last of two).
struct Header(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = Header;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of tensors")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Header, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(Header(out))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// Where one tensor lies.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub dtype: DType,
    pub shape: Vec<usize>,
    file: usize,
    /// Byte offset in its file.
    start: u64,
}

impl TensorInfo {
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The tensors of a model's safetensors files; a clone shares the open files.
#[derive(Clone)]
pub struct Checkpoint {
    files: Arc<[(PathBuf, File)]>,
    tensors: Arc<BTreeMap<String, TensorInfo>>,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths: Vec<&Path> = self.files.iter().map(|(p, _)| p.as_path()).collect();
        f.debug_struct("Checkpoint")
            .field("files", &paths)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

fn bad(path: &Path, message: String) -> EngineError {
    EngineError::BadFile {
        what: "safetensors weights",
        path: path.to_path_buf(),
        message,
    }
}

/// A safetensors file's header entries, in file order.
type Entries = Vec<(String, serde_json::Value)>;

/// A safetensors file opened and its header read: the file, its size, the header's
/// length and its entries (a name given twice refused).
fn read_header(path: &Path) -> Result<(File, u64, u64, Entries), EngineError> {
    let io = |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut len = [0u8; 8];
    file.read_exact_at(&mut len, 0).map_err(io)?;
    let len = u64::from_le_bytes(len);
    if len > 100 << 20 || 8 + len > size {
        return Err(bad(
            path,
            format!("header length {len} does not fit a file of {size} bytes"),
        ));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact_at(&mut header, 8).map_err(io)?;
    let Header(entries) =
        serde_json::from_slice(&header).map_err(|e| bad(path, format!("header: {e}")))?;
    let mut names = std::collections::BTreeSet::new();
    if let Some(twice) = entries.iter().find(|(n, _)| !names.insert(n.as_str())) {
        // JSON readers disagree on which of two entries wins: refuse to guess.
        return Err(bad(
            path,
            format!("header: tensor {} is named twice", twice.0),
        ));
    }
    Ok((file, size, len, entries))
}

/// Where a file's tensors are: which file of the checkpoint, where its data begins
/// (after the header) and its size.
#[derive(Clone, Copy)]
struct Placement {
    file: usize,
    data_start: u64,
    size: u64,
}

/// One header entry checked: a supported dtype, and offsets that hold its shape inside
/// the file. Returns the tensor and its byte span relative to the data.
fn tensor_info(
    path: &Path,
    name: &str,
    value: serde_json::Value,
    at: Placement,
) -> Result<(TensorInfo, u64, u64), EngineError> {
    let e: Entry =
        serde_json::from_value(value).map_err(|err| bad(path, format!("tensor {name}: {err}")))?;
    let dtype = match e.dtype.as_str() {
        "F32" => DType::F32,
        "BF16" => DType::BF16,
        "F16" => DType::F16,
        other => {
            return Err(bad(
                path,
                format!("tensor {name}: dtype {other} is not supported (F32, BF16, F16)"),
            ))
        }
    };
    let [from, to] = e.data_offsets;
    // Checked: a shape such as [2^62, 64] wraps an unchecked product to a small number
    // that passes the offsets, and then fails to allocate.
    let bytes = e
        .shape
        .iter()
        .try_fold(dtype.size_in_bytes() as u64, |n, &d| {
            n.checked_mul(d as u64)
        })
        .filter(|&b| usize::try_from(b).is_ok());
    let start = at.data_start.checked_add(from);
    let fits = match (bytes, start) {
        (Some(bytes), Some(start)) => {
            to >= from
                && to - from == bytes
                && start.checked_add(bytes).is_some_and(|end| end <= at.size)
        }
        _ => false,
    };
    if !fits {
        return Err(bad(
            path,
            format!(
                "tensor {name}: offsets {from}..{to} do not hold shape {:?} of {}",
                e.shape, e.dtype
            ),
        ));
    }
    let info = TensorInfo {
        dtype,
        shape: e.shape,
        file: at.file,
        start: at.data_start + from,
    };
    Ok((info, from, to))
}

/// Refuses two tensors sharing bytes: writing one would change the other, and a forged
/// file can alias a weight it wants to control.
fn check_disjoint(path: &Path, mut spans: Vec<(u64, u64, String)>) -> Result<(), EngineError> {
    spans.retain(|(from, to, _)| from < to);
    spans.sort();
    for pair in spans.windows(2) {
        let ((a_from, a_to, a), (b_from, b_to, b)) = (&pair[0], &pair[1]);
        // Sorted by start, spans clear of their neighbours are clear of all.
        if b_from < a_to {
            return Err(bad(
                path,
                format!(
                    "tensors {a} (bytes {a_from}..{a_to}) and {b} (bytes \
                     {b_from}..{b_to}) overlap"
                ),
            ));
        }
    }
    Ok(())
}

impl Checkpoint {
    /// Reads the headers of `paths` (the tensors' bytes stay on disk).
    pub fn open(paths: &[PathBuf]) -> Result<Self, EngineError> {
        let mut files = Vec::new();
        let mut tensors = BTreeMap::new();
        for (index, path) in paths.iter().enumerate() {
            let (file, size, len, entries) = read_header(path)?;
            let mut spans: Vec<(u64, u64, String)> = Vec::new();
            for (name, value) in entries {
                if name == "__metadata__" {
                    continue;
                }
                if tensors.contains_key(&name) {
                    return Err(bad(
                        path,
                        format!("tensor {name} is also in an earlier file of the checkpoint"),
                    ));
                }
                let at = Placement {
                    file: index,
                    data_start: 8 + len,
                    size,
                };
                let (info, from, to) = tensor_info(path, &name, value, at)?;
                spans.push((from, to, name.clone()));
                tensors.insert(name, info);
            }
            check_disjoint(path, spans)?;
            files.push((path.clone(), file));
        }
        Ok(Checkpoint {
            files: files.into(),
            tensors: Arc::new(tensors),
        })
    }

    pub fn tensors(&self) -> &BTreeMap<String, TensorInfo> {
        &self.tensors
    }

    /// The dtype most of the checkpoint's values are stored in.
    pub fn stored_dtype(&self) -> DType {
        let mut count: BTreeMap<&'static str, (usize, DType)> = BTreeMap::new();
        for t in self.tensors.values() {
            count.entry(t.dtype.as_str()).or_insert((0, t.dtype)).0 += t.elements();
        }
        count
            .into_values()
            .max_by_key(|(n, _)| *n)
            .map_or(DType::F32, |(_, d)| d)
    }

    /// The rows of the 2-D tensor `name`, left on disk to be read when looked up.
    pub fn rows(&self, name: &str) -> Option<StoredRows> {
        let t = self.tensors.get(name)?;
        let [rows, width] = t.shape[..] else {
            return None;
        };
        Some(StoredRows {
            checkpoint: self.clone(),
            name: name.to_string(),
            file: t.file,
            start: t.start,
            dtype: t.dtype,
            rows,
            width,
        })
    }

    /// One tensor, read from disk into memory of its stored dtype on the CPU.
    fn read(&self, name: &str) -> candle_core::Result<Tensor> {
        let Some(t) = self.tensors.get(name) else {
            candle_core::bail!("cannot find tensor {name}");
        };
        let (path, file) = &self.files[t.file];
        let elems = t.elements();
        let read = |bytes: &mut [u8]| {
            file.read_exact_at(bytes, t.start)
                .map_err(|e| candle_core::Error::Msg(format!("{}: {name}: {e}", path.display())))
        };
        // Read straight into the vector the tensor keeps: no second copy.
        match t.dtype {
            DType::F32 => {
                let mut v = vec![0f32; elems];
                read(as_bytes(&mut v))?;
                Tensor::from_vec(v, t.shape.clone(), &Device::Cpu)
            }
            DType::BF16 => {
                let mut v = vec![half::bf16::ZERO; elems];
                read(as_bytes(&mut v))?;
                Tensor::from_vec(v, t.shape.clone(), &Device::Cpu)
            }
            _ => {
                let mut v = vec![half::f16::ZERO; elems];
                read(as_bytes(&mut v))?;
                Tensor::from_vec(v, t.shape.clone(), &Device::Cpu)
            }
        }
    }
}

/// A table whose rows stay in the checkpoint's file and are read as they are looked
/// up (an embedding table: a prompt touches a few thousand of its rows, and a 7B
/// model's table is 1.1 GB in bf16). Positioned reads go through the page cache, so
/// rows read often cost a copy, not a disk access, and count in no process's memory.
#[derive(Debug, Clone)]
pub struct StoredRows {
    checkpoint: Checkpoint,
    name: String,
    file: usize,
    start: u64,
    dtype: DType,
    rows: usize,
    width: usize,
}

impl StoredRows {
    /// (rows, width).
    pub fn dims(&self) -> (usize, usize) {
        (self.rows, self.width)
    }

    /// The dtype the rows are stored in.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Rows `ids`, in order, as (ids.len(), width) in the stored dtype on the CPU. Each
    /// distinct row is read once: a prompt repeats its tokens.
    pub fn gather(&self, ids: &[u32]) -> candle_core::Result<Tensor> {
        match self.dtype {
            DType::F32 => self.gather_as::<f32>(ids),
            DType::BF16 => self.gather_as::<half::bf16>(ids),
            _ => self.gather_as::<half::f16>(ids),
        }
    }

    fn gather_as<T: candle_core::WithDType>(&self, ids: &[u32]) -> candle_core::Result<Tensor> {
        let mut distinct = ids.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        if let Some(&id) = distinct.last().filter(|&&id| id as usize >= self.rows) {
            candle_core::bail!(
                "token id {id} is outside {}, which has {} rows",
                self.name,
                self.rows
            );
        }
        let (path, file) = &self.checkpoint.files[self.file];
        let w = self.width;
        let row_bytes = (w * self.dtype.size_in_bytes()) as u64;
        let mut read = vec![T::from_f64(0.0); distinct.len() * w];
        for (&id, row) in distinct.iter().zip(read.chunks_mut(w)) {
            file.read_exact_at(as_bytes(row), self.start + id as u64 * row_bytes)
                .map_err(|e| {
                    candle_core::Error::Msg(format!("{}: {}: {e}", path.display(), self.name))
                })?;
        }
        let mut out = Vec::with_capacity(ids.len() * w);
        for id in ids {
            // Present: `distinct` holds every id.
            let at = distinct.binary_search(id).unwrap_or_default();
            out.extend_from_slice(&read[at * w..(at + 1) * w]);
        }
        Tensor::from_vec(out, (ids.len(), w), &Device::Cpu)
    }
}

/// The bytes of a vector of plain numbers (little-endian, as safetensors stores them
/// and as x86 and arm64 hold them).
fn as_bytes<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // Safety: f32, bf16 and f16 have no invalid bit patterns and no padding.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

impl candle_nn::var_builder::SimpleBackend for Checkpoint {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let t = self.get_unchecked(name, dtype, dev)?;
        if t.shape() != &s {
            candle_core::bail!(
                "shape mismatch for {name}: expected {s:?}, found {:?}",
                t.shape()
            );
        }
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.read(name)?.to_dtype(dtype)?.to_device(dev)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}
