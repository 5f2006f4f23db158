//! Where a checkpoint keeps each layer's weights: the tensor names the layers load
//! by, which each architecture's registry row gives.

/// Where a decoder layer keeps its query, key and value projections.
#[derive(Debug, Clone, Copy)]
pub enum QkvNames {
    /// q, k and v, each a matrix of its own.
    Separate([&'static str; 3]),
    /// One matrix whose rows are q's, then k's, then v's.
    Fused(&'static str),
}

/// Where a gated MLP keeps its gate and up projections (down is always `down_proj`).
#[derive(Debug, Clone, Copy)]
pub enum GateUpNames {
    Separate([&'static str; 2]),
    /// One matrix whose rows are gate's, then up's.
    Fused(&'static str),
}

#[derive(Debug, Clone, Copy)]
pub struct TensorNames {
    pub qkv: QkvNames,
    pub gate_up: GateUpNames,
}

pub const SEPARATE: TensorNames = TensorNames {
    qkv: QkvNames::Separate(["q_proj", "k_proj", "v_proj"]),
    gate_up: GateUpNames::Separate(["gate_proj", "up_proj"]),
};
