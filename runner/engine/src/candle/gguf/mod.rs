//! GGUF files as models: the weights stay in the blocks the file stores them in
//! (GGML's q4_0 … q6_K, or floats), the hyper-parameters come from the file's metadata
//! and are handed to the architecture's registry row as the config.json it would have
//! read, and the layers find each tensor under the Hugging Face name they load by.

pub mod backend;
pub mod config;
pub mod names;
pub mod prescan;

use crate::EngineError;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{Device, Shape};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tensor types this engine reads from a GGUF file.
pub const SUPPORTED_TYPES: [GgmlDType; 13] = [
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// A GGUF file's name for a tensor type (llama.cpp's).
pub fn type_name(t: GgmlDType) -> &'static str {
    match t {
        GgmlDType::F32 => "F32",
        GgmlDType::F16 => "F16",
        GgmlDType::BF16 => "BF16",
        GgmlDType::Q4_0 => "Q4_0",
        GgmlDType::Q4_1 => "Q4_1",
        GgmlDType::Q5_0 => "Q5_0",
        GgmlDType::Q5_1 => "Q5_1",
        GgmlDType::Q8_0 => "Q8_0",
        GgmlDType::Q8_1 => "Q8_1",
        GgmlDType::Q2K => "Q2_K",
        GgmlDType::Q3K => "Q3_K",
        GgmlDType::Q4K => "Q4_K",
        GgmlDType::Q5K => "Q5_K",
        GgmlDType::Q6K => "Q6_K",
        GgmlDType::Q8K => "Q8_K",
    }
}

/// Whether `path` names a GGUF file by its extension.
pub fn is_gguf(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// An opened GGUF model: its metadata and where each tensor's blocks are. A tensor is
/// read from the file when a layer asks for it (onto the load device, in the layout
/// the layers expect: llama's q and k rows back in Hugging Face's order), so a layer
/// that repacks its weight holds one tensor's blocks at a time, never the whole file's.
pub struct GgufModel {
    path: PathBuf,
    metadata: HashMap<String, Value>,
    architecture: String,
    tensors: HashMap<String, TensorAt>,
    /// Bytes of the tensors' blocks as the file stores them.
    tensor_bytes: u64,
    device: Device,
}

/// Where a tensor's blocks lie in the file and how they are read back.
struct TensorAt {
    /// From the start of the file.
    offset: u64,
    bytes: u64,
    dtype: GgmlDType,
    shape: Shape,
    /// The heads whose rows llama.cpp's converter interleaved (llama's q and k).
    heads: Option<usize>,
}

impl std::fmt::Debug for GgufModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufModel")
            .field("path", &self.path)
            .field("architecture", &self.architecture)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// The header of a GGUF file without its tensors: enough to check a run's context and
/// the memory a load takes before reading the weights.
pub struct GgufHeader {
    pub path: PathBuf,
    pub content: Content,
    pub file_size: u64,
}

impl GgufHeader {
    pub fn read(path: &Path) -> Result<Self, EngineError> {
        let mut file = std::fs::File::open(path).map_err(|source| EngineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        prescan::check(path)?;
        let content = Content::read(&mut file).map_err(|e| bad(path, header_message(&e)))?;
        let file_size = file
            .seek(SeekFrom::End(0))
            .map_err(|source| EngineError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        let header = GgufHeader {
            path: path.to_path_buf(),
            content,
            file_size,
        };
        header.check_tensors()?;
        Ok(header)
    }

    /// Every tensor of a supported type, a whole number of blocks, inside the file.
    fn check_tensors(&self) -> Result<(), EngineError> {
        let mut names: Vec<&String> = self.content.tensor_infos.keys().collect();
        names.sort();
        for name in names {
            let info = &self.content.tensor_infos[name];
            if !SUPPORTED_TYPES.contains(&info.ggml_dtype) {
                return Err(bad(
                    &self.path,
                    format!(
                        "tensor {name} is of type {}, which this engine does not read ({})",
                        type_name(info.ggml_dtype),
                        supported_list()
                    ),
                ));
            }
            let bytes = tensor_size(name, info.ggml_dtype, info.shape.elem_count())
                .map_err(|m| bad(&self.path, m))?;
            let start = self.content.tensor_data_offset.saturating_add(info.offset);
            let end = start.saturating_add(bytes);
            if end > self.file_size {
                return Err(bad(
                    &self.path,
                    format!(
                        "tensor {name} ({} bytes at offset {start}) ends past the end of the \
                         file ({} bytes): the file is truncated",
                        bytes, self.file_size
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The metadata's `general.architecture`.
    pub fn architecture(&self) -> Result<String, EngineError> {
        config::Metadata::new(&self.path, &self.content.metadata).string("general.architecture")
    }

    /// Bytes of the largest tensor's blocks.
    pub fn largest_tensor_bytes(&self) -> u64 {
        self.content
            .tensor_infos
            .iter()
            .map(|(name, i)| tensor_size(name, i.ggml_dtype, i.shape.elem_count()).unwrap_or(0))
            .max()
            .unwrap_or(0)
    }

    /// Bytes of all tensors' blocks.
    pub fn tensor_bytes(&self) -> u64 {
        self.content
            .tensor_infos
            .iter()
            .map(|(name, i)| tensor_size(name, i.ggml_dtype, i.shape.elem_count()).unwrap_or(0))
            .sum()
    }

    /// How many tensors of each type the file holds, by the type's GGUF name.
    pub fn tensor_types(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for i in self.content.tensor_infos.values() {
            *out.entry(type_name(i.ggml_dtype).to_string()).or_default() += 1;
        }
        out
    }

    /// The names of the file's tensor types that the CPU holds as q8_0 panels
    /// ([`held_as_q8_panels`]).
    pub fn types_as_q8_panels(&self) -> Vec<String> {
        self.content
            .tensor_infos
            .values()
            .filter(|i| held_as_q8_panels(i.ggml_dtype))
            .map(|i| type_name(i.ggml_dtype).to_string())
            .collect()
    }

    /// For the projections of the types the CPU holds as q8_0 panels (every tensor but
    /// the embedding table, whose rows are read from the file): the panels' bytes (34
    /// per 32 values) and the bytes of the blocks they replace.
    pub fn q8_panels(&self) -> (u64, u64) {
        self.content
            .tensor_infos
            .iter()
            .filter(|(name, i)| *name != "token_embd.weight" && held_as_q8_panels(i.ggml_dtype))
            .map(|(name, i)| {
                let n = i.shape.elem_count();
                let blocks = tensor_size(name, i.ggml_dtype, n).unwrap_or(0);
                ((n as u64).div_ceil(32) * 34, blocks)
            })
            .fold((0, 0), |(p, b), (p1, b1)| (p + p1, b + b1))
    }

    /// The context length the metadata declares (`<arch>.context_length`).
    pub fn context_length(&self) -> Result<usize, EngineError> {
        let arch = self.architecture()?;
        config::Metadata::new(&self.path, &self.content.metadata)
            .usize(&format!("{arch}.context_length"))
    }

    /// The model with every tensor's place checked, read later onto `device`.
    pub fn load(self, device: &Device) -> Result<GgufModel, EngineError> {
        let architecture = self.architecture()?;
        let tensor_bytes = self.tensor_bytes();
        let permute_heads = if architecture == "llama" {
            let meta = config::Metadata::new(&self.path, &self.content.metadata);
            let heads = meta.usize("llama.attention.head_count")?;
            let kv_heads = meta
                .opt_usize("llama.attention.head_count_kv")?
                .unwrap_or(heads);
            Some((heads, kv_heads))
        } else {
            None
        };
        let mut tensors = HashMap::new();
        for (name, info) in &self.content.tensor_infos {
            let bytes = tensor_size(name, info.ggml_dtype, info.shape.elem_count())
                .map_err(|m| bad(&self.path, m))?;
            // llama.cpp's converter reorders each head's q and k rows for its rotary
            // layout (pairs interleaved); the layers rotate halves, as Hugging Face does.
            let heads = match (permute_heads, name.as_str()) {
                (Some((h, _)), n) if n.ends_with("attn_q.weight") => Some(h),
                (Some((_, kv)), n) if n.ends_with("attn_k.weight") => Some(kv),
                _ => None,
            };
            if let Some(heads) = heads {
                check_heads(info.shape.dims(), heads)
                    .map_err(|m| bad(&self.path, format!("tensor {name}: {m}")))?;
            }
            let at = TensorAt {
                offset: self.content.tensor_data_offset.saturating_add(info.offset),
                bytes,
                dtype: info.ggml_dtype,
                shape: info.shape.clone(),
                heads,
            };
            tensors.insert(name.clone(), at);
        }
        Ok(GgufModel {
            path: self.path,
            metadata: self.content.metadata,
            architecture,
            tensors,
            tensor_bytes,
            device: device.clone(),
        })
    }
}

impl GgufModel {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    pub fn metadata(&self) -> config::Metadata<'_> {
        config::Metadata::new(&self.path, &self.metadata)
    }

    pub fn tensor_bytes(&self) -> u64 {
        self.tensor_bytes
    }

    /// The shape of the tensor the file stores under `gguf_name`.
    pub fn shape(&self, gguf_name: &str) -> Option<&Shape> {
        self.tensors.get(gguf_name).map(|t| &t.shape)
    }

    /// The GGUF name and shape of the tensor a layer loads as `hf_name`
    /// (`model.layers.3.self_attn.q_proj.weight`).
    pub fn by_hf_name(&self, hf_name: &str) -> Option<(String, &Shape)> {
        let gguf = names::gguf_name(hf_name, &self.architecture)?;
        let shape = self.shape(&gguf)?;
        Some((gguf, shape))
    }

    /// The rows of the 2-D tensor the file stores under `gguf_name`, each read from the
    /// file (and dequantized) when asked for, on the CPU.
    pub fn rows(&self, gguf_name: &str) -> Result<FileRows, EngineError> {
        let at = self.at(gguf_name)?;
        let fail = |m: String| self.bad(format!("tensor {gguf_name}: {m}"));
        let &[rows, k] = at.shape.dims() else {
            return Err(fail(format!(
                "expected a matrix, found shape {:?}",
                at.shape.dims()
            )));
        };
        if !k.is_multiple_of(at.dtype.block_size()) {
            return Err(fail(format!("rows of {k} do not fill its blocks")));
        }
        let file = std::fs::File::open(&self.path).map_err(|e| fail(e.to_string()))?;
        Ok(FileRows {
            path: self.path.clone(),
            name: gguf_name.to_string(),
            file,
            offset: at.offset,
            row_bytes: (k / at.dtype.block_size() * at.dtype.type_size()) as u64,
            dtype: at.dtype,
            rows,
            k,
            heads: at.heads,
        })
    }

    /// Reads the tensor the file stores under `gguf_name` onto the load device: a
    /// fresh copy each time, held as long as the caller keeps it.
    pub fn read(&self, gguf_name: &str) -> Result<Arc<QTensor>, EngineError> {
        let at = self.at(gguf_name)?;
        let fail = |m: String| self.bad(format!("tensor {gguf_name}: {m}"));
        let mut raw = vec![0u8; at.bytes as usize];
        std::fs::File::open(&self.path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(at.offset))?;
                f.read_exact(&mut raw)
            })
            .map_err(|e| fail(e.to_string()))?;
        if let Some(heads) = at.heads {
            raw = unpermute_rows(&raw, at.shape.dims(), heads).map_err(fail)?;
        }
        let storage = QStorage::from_data(Cow::Owned(raw), &self.device, at.dtype)
            .and_then(|s| QTensor::new(s, at.shape.clone()))
            .map_err(|e| fail(e.to_string()))?;
        Ok(Arc::new(storage))
    }

    /// Where the file stores the tensor `gguf_name`, or the error naming it.
    fn at(&self, gguf_name: &str) -> Result<&TensorAt, EngineError> {
        self.tensors
            .get(gguf_name)
            .ok_or_else(|| self.bad(format!("no tensor {gguf_name}")))
    }

    /// The error for something wrong with this file.
    pub fn bad(&self, message: String) -> EngineError {
        bad(&self.path, message)
    }
}

/// One stacked part of a projection over a GGUF file's tensors: its outputs, and its
/// blocks, already in memory or read from the file when the kernel set asks.
pub struct GgufPart<'a> {
    pub outputs: usize,
    pub model: &'a GgufModel,
    pub name: String,
    /// Blocks a table already holds (a tied head shares its table's on a GPU).
    pub held: Option<Arc<QTensor>>,
}

impl GgufPart<'_> {
    pub fn dtype(&self) -> GgmlDType {
        match (&self.held, self.model.tensors.get(&self.name)) {
            (Some(t), _) => t.dtype(),
            (None, Some(at)) => at.dtype,
            // Unknown names are refused when the blocks are read.
            (None, None) => GgmlDType::F32,
        }
    }

    /// The part's blocks in memory: the held ones, else read from the file.
    pub fn tensor(&self) -> candle_core::Result<Arc<QTensor>> {
        match &self.held {
            Some(t) => Ok(t.clone()),
            None => self
                .model
                .read(&self.name)
                .map_err(candle_core::Error::wrap),
        }
    }

    /// The part's rows read from the file one at a time (its blocks never held whole).
    pub fn file_rows(&self) -> candle_core::Result<FileRows> {
        self.model
            .rows(&self.name)
            .map_err(candle_core::Error::wrap)
    }
}

/// A GGUF tensor's rows, read from the file one at a time: a table's lookups, and a
/// weight packed without a copy of its blocks in memory.
#[derive(Debug)]
pub struct FileRows {
    path: PathBuf,
    name: String,
    file: std::fs::File,
    offset: u64,
    row_bytes: u64,
    dtype: GgmlDType,
    rows: usize,
    k: usize,
    heads: Option<usize>,
}

impl FileRows {
    pub fn dtype(&self) -> GgmlDType {
        self.dtype
    }

    /// Where row `r` (in Hugging Face's order) is stored: llama.cpp's converter
    /// interleaved each head's q and k rows (see [`interleaved_row`]).
    fn stored_row(&self, r: usize) -> usize {
        match self.heads {
            Some(heads) => interleaved_row(r, self.rows, heads),
            None => r,
        }
    }

    /// The rows `ids`, widened to f32, one after another.
    pub fn gather(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let mut out = vec![0f32; ids.len() * self.k];
        for (&id, row) in ids.iter().zip(out.chunks_exact_mut(self.k.max(1))) {
            if id as usize >= self.rows {
                candle_core::bail!(
                    "token id {id} is outside the embedding table of {} rows",
                    self.rows
                );
            }
            crate::candle::cpu::quantized::RowSource::row_f32(self, id as usize, row)?;
        }
        Ok(out)
    }
}

impl crate::candle::cpu::quantized::RowSource for FileRows {
    fn dims(&self) -> (usize, usize) {
        (self.rows, self.k)
    }

    fn row_f32(&self, r: usize, out: &mut [f32]) -> candle_core::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut raw = vec![0u8; self.row_bytes as usize];
        let at = self.offset + self.stored_row(r) as u64 * self.row_bytes;
        self.file.read_exact_at(&mut raw, at).map_err(|e| {
            candle_core::Error::Msg(format!(
                "{}: tensor {} row {r}: {e}",
                self.path.display(),
                self.name
            ))
        })?;
        crate::candle::cpu::quantized::dequantize_row(self.dtype, &raw, out)
    }
}

fn bad(path: &Path, message: String) -> EngineError {
    EngineError::BadFile {
        what: "GGUF model",
        path: path.to_path_buf(),
        message,
    }
}

fn supported_list() -> String {
    SUPPORTED_TYPES
        .iter()
        .map(|t| type_name(*t))
        .collect::<Vec<_>>()
        .join(", ")
}

/// candle's message for a header it cannot read, with what a reader can do about it.
fn header_message(e: &candle_core::Error) -> String {
    let m = e.to_string();
    if m.contains("unknown dtype for tensor") {
        format!(
            "{m}: a tensor type this engine does not read (it reads {})",
            supported_list()
        )
    } else if m.contains("failed to fill whole buffer") || m.contains("remaining") {
        format!("{m}: the file's header is cut short (a truncated or partly downloaded file?)")
    } else {
        m
    }
}

/// Bytes of a tensor of `elements` values of type `t`.
fn tensor_size(name: &str, t: GgmlDType, elements: usize) -> Result<u64, String> {
    let block = t.block_size();
    if !elements.is_multiple_of(block) {
        return Err(format!(
            "tensor {name} has {elements} values, not a whole number of {}'s blocks of {block}",
            type_name(t)
        ));
    }
    Ok((elements / block * t.type_size()) as u64)
}

/// Where llama.cpp's converter stores Hugging Face's row `r` of a q or k weight of
/// `rows` rows in `heads` heads of `d` rows: HF's row `h*d + j*d/2 + i` is its row
/// `h*d + 2i + j` (each head's two rotary halves interleaved).
fn interleaved_row(r: usize, rows: usize, heads: usize) -> usize {
    let d = rows / heads;
    let (h, rem) = (r / d, r % d);
    let (j, i) = (rem / (d / 2), rem % (d / 2));
    h * d + 2 * i + j
}

/// The rows of a (rows, k) tensor whose rows split into `heads` heads of an even size.
fn check_heads(dims: &[usize], heads: usize) -> Result<usize, String> {
    let [rows, _] = dims else {
        return Err(format!("expected a matrix, found shape {dims:?}"));
    };
    let rows = *rows;
    if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
        return Err(format!(
            "{rows} rows do not split into {heads} heads of an even size"
        ));
    }
    Ok(rows)
}

/// Undoes llama.cpp's reordering of a q or k weight (outputs, inputs) of `heads` heads
/// (see [`interleaved_row`]). Rows are whole blocks, so the stored bytes move as they are.
pub(crate) fn unpermute_rows(raw: &[u8], dims: &[usize], heads: usize) -> Result<Vec<u8>, String> {
    let rows = check_heads(dims, heads)?;
    let row_bytes = raw.len() / rows;
    let mut out = vec![0u8; raw.len()];
    for (to, row) in out.chunks_exact_mut(row_bytes.max(1)).enumerate() {
        let from = interleaved_row(to, rows, heads);
        row.copy_from_slice(&raw[from * row_bytes..(from + 1) * row_bytes]);
    }
    Ok(out)
}

/// Whether the CPU holds a GGUF block type as the engine's q8_0 panels, each row
/// dequantized exactly and quantized again to 8 bits at load: every type of 4 bits or
/// more, which the panels multiply faster than candle's block products (Gemma 3's
/// Q4_K_M: 2.2x the prompt tokens/s, 3.1x the decode at batch 8) and, on Gemma 3,
/// closer to transformers' f32 choices (docs/gguf.md). Q2_K and Q3_K stay in their
/// blocks, which panels would make about three times as large.
pub fn held_as_q8_panels(t: GgmlDType) -> bool {
    !matches!(
        t,
        GgmlDType::F32
            | GgmlDType::F16
            | GgmlDType::BF16
            | GgmlDType::Q2K
            | GgmlDType::Q3K
            | GgmlDType::Q8K
    )
}
