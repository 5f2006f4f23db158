//! The token embedding table. On the CPU its rows stay in the checkpoint's file and
//! are read as tokens look them up, in the dtype they are stored in: a prompt touches
//! a few thousand of a table's rows, and a 7B model's table is 1.1 GB in bf16. A
//! quantized model's lookups are then exact too, which matters more than the table's
//! size suggests: every position's input is a looked-up row, and q8_0 rows were what
//! most often turned a greedy choice (docs/notes/2026-12-engine-history.md).

use crate::candle::checkpoint::StoredRows;
use crate::candle::cpu::quantized::RowSource;
use crate::candle::gguf::{FileRows, GgufPart};
use crate::candle::layers::Proj;
use crate::candle::layers::Weights;
use candle_core::quantized::QTensor;
use candle_core::{DType, Result, Tensor};
use candle_nn::VarBuilder;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Embedding {
    table: Table,
    /// The activations' dtype, that looked-up rows are widened to.
    dtype: DType,
}

#[derive(Debug, Clone)]
enum Table {
    /// Held in memory: on a GPU, and for weights that come from no checkpoint file.
    Held(Tensor),
    /// Read from the checkpoint on the CPU.
    Stored(StoredRows),
    /// A GGUF file's table in its stored blocks, rows dequantized as they are looked up
    /// (on a GPU).
    Blocks(String, Arc<QTensor>),
    /// A GGUF file's table read from the file, rows dequantized as they are looked up
    /// (on the CPU), under its GGUF name.
    FileRows(String, Arc<FileRows>),
}

impl Embedding {
    /// The table `vb`/`name`/weight of `(vocab, hidden)`.
    pub fn load(
        vb: &VarBuilder,
        name: &str,
        (vocab, hidden): (usize, usize),
        weights: &Weights,
    ) -> Result<Self> {
        let vb = vb.pp(name);
        let name = format!("{}.weight", vb.prefix());
        if let Some(gguf) = &weights.gguf {
            let Some((gguf_name, shape)) = gguf.by_hf_name(&name) else {
                candle_core::bail!("{} has no tensor for {name}", gguf.path().display());
            };
            if shape.dims() != [vocab, hidden] {
                candle_core::bail!(
                    "tensor {gguf_name} has shape {:?}, the architecture expects [{vocab}, {hidden}]",
                    shape.dims()
                );
            }
            let table = if weights.kernels.table_from_file() {
                let rows = gguf.rows(&gguf_name).map_err(candle_core::Error::wrap)?;
                Table::FileRows(gguf_name, Arc::new(rows))
            } else {
                let blocks = gguf.read(&gguf_name).map_err(candle_core::Error::wrap)?;
                Table::Blocks(gguf_name, blocks)
            };
            return Ok(Embedding {
                table,
                dtype: vb.dtype(),
            });
        }
        // Weights carry their checkpoint only where the kernel set reads rows from it.
        let stored = weights.checkpoint.as_ref().and_then(|c| c.rows(&name));
        let table = match stored {
            Some(rows) if rows.dims() == (vocab, hidden) => Table::Stored(rows),
            Some(rows) => candle_core::bail!(
                "shape mismatch for {name}: expected ({vocab}, {hidden}), found {:?}",
                rows.dims()
            ),
            None => {
                let keep = weights.kernels.held_table_dtype(weights.format, vb.dtype());
                Table::Held(vb.get_with_hints_dtype(
                    (vocab, hidden),
                    "weight",
                    Default::default(),
                    keep,
                )?)
            }
        };
        Ok(Embedding {
            table,
            dtype: vb.dtype(),
        })
    }

    /// The output head when it is this table (tied embeddings), from the `vb` and
    /// `name` the table was loaded from. On a GPU the head shares the table's memory;
    /// on the CPU it is packed or quantized from the checkpoint like any other layer.
    pub fn tied_head(&self, vb: &VarBuilder, name: &str, weights: &Weights) -> Result<Proj> {
        match &self.table {
            Table::Held(t) => Proj::from_weight(t, weights),
            // The table's own blocks (shared on a GPU), or its rows from the file.
            Table::Blocks(gguf_name, t) => {
                let (vocab, hidden) = t.shape().dims2()?;
                gguf_head(vb, weights, (vocab, hidden), gguf_name, Some(t.clone()))
            }
            Table::FileRows(gguf_name, rows) => {
                let dims = RowSource::dims(rows.as_ref());
                gguf_head(vb, weights, dims, gguf_name, None)
            }
            Table::Stored(rows) => {
                let (vocab, hidden) = rows.dims();
                Proj::load(vb, &[(name, vocab)], hidden, false, weights)
            }
        }
    }

    /// Token ids (..) -> (.., hidden) in the activations' dtype.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let mut dims = ids.dims().to_vec();
        let rows = match &self.table {
            Table::Held(t) => {
                dims.push(t.dim(1)?);
                t.index_select(&ids.flatten_all()?, 0)?
            }
            Table::Stored(rows) => {
                dims.push(rows.dims().1);
                let ids = ids.flatten_all()?.to_dtype(DType::U32)?.to_vec1::<u32>()?;
                rows.gather(&ids)?
            }
            Table::FileRows(_, table) => {
                let (_, hidden) = RowSource::dims(table.as_ref());
                dims.push(hidden);
                let device = ids.device().clone();
                let ids = ids.flatten_all()?.to_dtype(DType::U32)?.to_vec1::<u32>()?;
                Tensor::from_vec(table.gather(&ids)?, (ids.len(), hidden), &device)?
            }
            Table::Blocks(_, t) => {
                let (vocab, hidden) = t.shape().dims2()?;
                dims.push(hidden);
                let ids = ids.flatten_all()?.to_dtype(DType::U32)?;
                if let Some(bad) = ids.to_vec1::<u32>()?.iter().find(|&&i| i as usize >= vocab) {
                    candle_core::bail!(
                        "token id {bad} is outside the embedding table of {vocab} rows"
                    );
                }
                t.embedding(&ids)?
            }
        };
        rows.reshape(dims)?.to_dtype(self.dtype)
    }
}

/// The output head over a GGUF table of `(vocab, hidden)`, its blocks `held` or read
/// from the file under `gguf_name`.
fn gguf_head(
    vb: &VarBuilder,
    weights: &Weights,
    (vocab, hidden): (usize, usize),
    gguf_name: &str,
    held: Option<Arc<QTensor>>,
) -> Result<Proj> {
    let Some(model) = weights.gguf.as_deref() else {
        candle_core::bail!("the GGUF table {gguf_name} without its file");
    };
    let parts = [GgufPart {
        outputs: vocab,
        model,
        name: gguf_name.to_string(),
        held,
    }];
    weights
        .kernels
        .gguf_proj(&parts, hidden, None, vb.device(), vb.dtype())
}
