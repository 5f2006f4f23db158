//! A pass over a GGUF file's header before candle reads it. candle's reader divides by
//! `general.alignment` (0 panics), builds a 32-byte value for every element of every
//! metadata array (a 64 MB byte array took 4.4 GB), keeps the last of duplicate keys and
//! tensor names, and multiplies tensor dims without a check. This reads the same
//! header, counting and skipping instead of building, and refuses what no real file
//! holds, naming the key or the tensor and the bound. What candle itself refuses (a bad
//! magic, an unknown type, a truncated header) is left to candle, whose message stands.

use crate::candle::chat_template::MAX_TEMPLATE_BYTES;
use crate::EngineError;
use candle_core::quantized::GgmlDType;
use std::collections::HashSet;
use std::io::{BufReader, Read};
use std::path::Path;

/// Metadata entries, and tensors, in one file (real files: about 40 and 1,000).
pub const MAX_ENTRIES: u64 = 1 << 16;
/// Elements of one metadata array (the panel's largest vocabulary is 262,144 tokens).
pub const MAX_ARRAY: u64 = 1 << 20;
/// Metadata values in all, each array element counted.
pub const MAX_VALUES: u64 = 1 << 22;
/// Bytes of one metadata string (a key, a tensor name: 64 KiB).
pub const MAX_STRING: u64 = 16 << 20;
const MAX_NAME: u64 = 1 << 16;
/// Bytes of all metadata strings together.
pub const MAX_STRING_BYTES: u64 = 64 << 20;
/// Bytes of one token of `tokenizer.ggml.tokens`; a SentencePiece vocabulary's merges
/// are recovered from every split of every token, so the squares of the tokens' lengths
/// are bounded too.
pub const MAX_TOKEN_BYTES: u64 = 4096;
pub const MAX_TOKEN_SQUARES: u64 = 1 << 30;
/// Positions of a `*.context_length`.
pub const MAX_CONTEXT: u64 = 1 << 32;

const MAX_DEPTH: usize = 64;

/// Why the pass stopped: a refusal, or a fault candle reports in its own words.
enum Stop {
    Bad(String),
    Candle,
}

impl From<std::io::Error> for Stop {
    fn from(_: std::io::Error) -> Self {
        Stop::Candle
    }
}

/// Checks the header of the GGUF file at `path`; see the module's words.
pub fn check(path: &Path) -> Result<(), EngineError> {
    let file = std::fs::File::open(path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let size = file
        .metadata()
        .map_err(|source| EngineError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    let mut scan = Scan {
        r: BufReader::with_capacity(1 << 16, file),
        pos: 0,
        size,
        v1: false,
        values: 0,
        string_bytes: 0,
    };
    match scan.header() {
        Err(Stop::Bad(message)) => Err(EngineError::BadFile {
            what: "GGUF file",
            path: path.to_path_buf(),
            message,
        }),
        Ok(()) | Err(Stop::Candle) => Ok(()),
    }
}

struct Scan {
    r: BufReader<std::fs::File>,
    pos: u64,
    size: u64,
    v1: bool,
    values: u64,
    string_bytes: u64,
}

/// What a scalar value was, for the checks of single keys.
enum Scalar {
    Int(i128),
    Float(f64),
    Other,
}

struct Tensor {
    name: String,
    offset: u64,
    bytes: u64,
}

impl Scan {
    fn u32(&mut self) -> Result<u32, Stop> {
        let mut b = [0u8; 4];
        self.r.read_exact(&mut b)?;
        self.pos += 4;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, Stop> {
        let mut b = [0u8; 8];
        self.r.read_exact(&mut b)?;
        self.pos += 8;
        Ok(u64::from_le_bytes(b))
    }

    fn len(&mut self) -> Result<u64, Stop> {
        if self.v1 {
            Ok(self.u32()?.into())
        } else {
            self.u64()
        }
    }

    fn skip(&mut self, n: u64) -> Result<(), Stop> {
        if n > self.size.saturating_sub(self.pos) {
            return Err(Stop::Candle);
        }
        self.r.seek_relative(n as i64)?;
        self.pos += n;
        Ok(())
    }

    fn name(&mut self, what: &str) -> Result<String, Stop> {
        let n = self.len()?;
        if n > MAX_NAME {
            return Err(Stop::Bad(format!(
                "a {what} is {n} bytes long, over the bound of {MAX_NAME}"
            )));
        }
        if n > self.size.saturating_sub(self.pos) {
            return Err(Stop::Candle);
        }
        let mut b = vec![0u8; n as usize];
        self.r.read_exact(&mut b)?;
        self.pos += n;
        String::from_utf8(b).map_err(|_| Stop::Candle)
    }

    fn header(&mut self) -> Result<(), Stop> {
        if self.u32()? != u32::from_le_bytes(*b"GGUF") {
            return Err(Stop::Candle);
        }
        match self.u32()? {
            1 => self.v1 = true,
            2 | 3 => {}
            _ => return Err(Stop::Candle),
        }
        let tensors = self.len()?;
        let entries = self.len()?;
        for (n, what) in [(tensors, "tensors"), (entries, "metadata entries")] {
            if n > MAX_ENTRIES {
                return Err(Stop::Bad(format!(
                    "the header declares {n} {what}, over the bound of {MAX_ENTRIES}"
                )));
            }
        }
        let mut keys = HashSet::new();
        let mut alignment = None;
        for _ in 0..entries {
            let key = self.name("metadata key")?;
            if !keys.insert(key.clone()) {
                return Err(Stop::Bad(format!("metadata key {key} appears twice")));
            }
            let ty = self.u32()?;
            let value = self.value(&key, ty, 0)?;
            self.check_key(&key, &value)?;
            if key == "general.alignment" && matches!(ty, 0..=5) {
                alignment = Some(value);
            }
        }
        if let Some(Scalar::Int(a)) = alignment {
            // candle reads the unsigned and signed types up to 32 bits, a negative as
            // its default of 32.
            if a >= 0 && (a as u64).count_ones() != 1 {
                return Err(Stop::Bad(format!(
                    "general.alignment is {a}; an alignment must be a power of two (1, 2, 4, \
                     ..., 32 by default)"
                )));
            }
        }
        let mut names = HashSet::new();
        let mut placed = Vec::new();
        for _ in 0..tensors {
            let name = self.name("tensor name")?;
            if !names.insert(name.clone()) {
                return Err(Stop::Bad(format!("tensor {name} appears twice")));
            }
            let n_dims = self.u32()?;
            if n_dims > 4 {
                return Err(Stop::Candle);
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(if self.v1 {
                    self.u32()?.into()
                } else {
                    self.u64()?
                });
            }
            let dtype = self.u32()?;
            let offset = self.u64()?;
            let overflow = || {
                Stop::Bad(format!(
                    "tensor {name} has dims {dims:?}, whose product overflows a 64-bit count"
                ))
            };
            let elements = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .filter(|&n| usize::try_from(n).is_ok())
                .ok_or_else(overflow)?;
            let Some(t) = dtype_of(dtype) else {
                return Err(Stop::Candle);
            };
            let bytes = (elements / t.block_size() as u64)
                .checked_mul(t.type_size() as u64)
                .ok_or_else(overflow)?;
            // A type this engine does not read is refused by name after candle's read.
            if !super::SUPPORTED_TYPES.contains(&t) {
                continue;
            }
            placed.push(Tensor {
                name,
                offset,
                bytes,
            });
        }
        placed.retain(|t| t.bytes > 0);
        placed.sort_by_key(|t| t.offset);
        for w in placed.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if a.offset.saturating_add(a.bytes) > b.offset {
                return Err(Stop::Bad(format!(
                    "tensors {} ({} bytes at data offset {}) and {} (at data offset {}) overlap",
                    a.name, a.bytes, a.offset, b.name, b.offset
                )));
            }
        }
        Ok(())
    }

    /// Reads past one value of type `ty` under `key`, counting it against the bounds.
    fn value(&mut self, key: &str, ty: u32, depth: usize) -> Result<Scalar, Stop> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(Stop::Bad(format!(
                "{key}: the metadata holds over {MAX_VALUES} values (array elements counted), \
                 the bound"
            )));
        }
        let mut b = [0u8; 8];
        let fixed = fixed_size(ty);
        if let Some(n) = fixed {
            self.r.read_exact(&mut b[..n as usize])?;
            self.pos += n;
        }
        Ok(match ty {
            0 => Scalar::Int(b[0].into()),
            1 => Scalar::Int((b[0] as i8).into()),
            2 => Scalar::Int(u16::from_le_bytes([b[0], b[1]]).into()),
            3 => Scalar::Int(i16::from_le_bytes([b[0], b[1]]).into()),
            4 => Scalar::Int(u32::from_le_bytes([b[0], b[1], b[2], b[3]]).into()),
            5 => Scalar::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]).into()),
            6 => Scalar::Float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]).into()),
            10 => Scalar::Int(u64::from_le_bytes(b).into()),
            11 => Scalar::Int(i64::from_le_bytes(b).into()),
            12 => Scalar::Float(f64::from_le_bytes(b)),
            7 => Scalar::Other,
            8 => {
                let n = self.len()?;
                self.string(key, n)?;
                self.skip(n)?;
                Scalar::Other
            }
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(Stop::Candle);
                }
                let elem = self.u32()?;
                let n = self.len()?;
                if n > MAX_ARRAY {
                    return Err(Stop::Bad(format!(
                        "{key}: an array of {n} elements, over the bound of {MAX_ARRAY}"
                    )));
                }
                if let Some(size) = fixed_size(elem) {
                    self.values += n;
                    if self.values > MAX_VALUES {
                        return Err(Stop::Bad(format!(
                            "{key}: the metadata holds over {MAX_VALUES} values (array \
                             elements counted), the bound"
                        )));
                    }
                    self.skip(n * size)?;
                } else if elem == 8 {
                    self.strings(key, n)?;
                } else {
                    for _ in 0..n {
                        self.value(key, elem, depth + 1)?;
                    }
                }
                Scalar::Other
            }
            _ => return Err(Stop::Candle),
        })
    }

    /// Counts one string of `n` bytes under `key` against the bounds.
    fn string(&mut self, key: &str, n: u64) -> Result<(), Stop> {
        let bound = if key == "tokenizer.chat_template" {
            MAX_TEMPLATE_BYTES as u64
        } else {
            MAX_STRING
        };
        if n > bound {
            return Err(Stop::Bad(format!(
                "{key}: a string of {n} bytes, over the bound of {} MiB",
                bound >> 20
            )));
        }
        self.string_bytes += n;
        if self.string_bytes > MAX_STRING_BYTES {
            return Err(Stop::Bad(format!(
                "{key}: the metadata's strings pass {} MiB together, the bound",
                MAX_STRING_BYTES >> 20
            )));
        }
        Ok(())
    }

    /// An array of `n` strings under `key`; the vocabulary's tokens are bounded in length.
    fn strings(&mut self, key: &str, n: u64) -> Result<(), Stop> {
        let tokens = key == "tokenizer.ggml.tokens";
        let mut squares = 0u64;
        self.values += n;
        if self.values > MAX_VALUES {
            return Err(Stop::Bad(format!(
                "{key}: the metadata holds over {MAX_VALUES} values (array elements counted), \
                 the bound"
            )));
        }
        for i in 0..n {
            let len = self.len()?;
            if tokens && len > MAX_TOKEN_BYTES {
                return Err(Stop::Bad(format!(
                    "{key}: token {i} is {len} bytes long, over the bound of {MAX_TOKEN_BYTES}"
                )));
            }
            squares += if tokens { len * len } else { 0 };
            if squares > MAX_TOKEN_SQUARES {
                return Err(Stop::Bad(format!(
                    "{key}: the squares of the tokens' lengths pass {MAX_TOKEN_SQUARES} at \
                     token {i}, the bound (the vocabulary's merges are recovered from every \
                     split of every token)"
                )));
            }
            self.string(key, len)?;
            self.skip(len)?;
        }
        Ok(())
    }

    /// The bounds of single keys: finite floats, a context length of whole positions.
    fn check_key(&self, key: &str, value: &Scalar) -> Result<(), Stop> {
        match value {
            Scalar::Float(x) if !x.is_finite() => Err(Stop::Bad(format!(
                "key {key} is {x}, expected a finite number"
            ))),
            Scalar::Int(n) if key.ends_with(".context_length") => {
                if *n < 1 || *n > MAX_CONTEXT.into() {
                    Err(Stop::Bad(format!(
                        "key {key} is {n}, outside the bound of 1 to {MAX_CONTEXT} positions"
                    )))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

/// Bytes of a GGUF value of a fixed-size type.
fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// GGML's type ids (candle's table, which it keeps to itself).
fn dtype_of(id: u32) -> Option<GgmlDType> {
    Some(match id {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        9 => GgmlDType::Q8_1,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        15 => GgmlDType::Q8K,
        30 => GgmlDType::BF16,
        _ => return None,
    })
}
