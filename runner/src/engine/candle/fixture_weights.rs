//! Random weights of a full-size model shape, streamed straight into a bf16 safetensors
//! file: a 7B model is 15 GB in bf16, too big to build as f32 tensors in memory first
//! and too slow to draw with one thread. The values only have to be deterministic and of
//! the right scale (a throughput benchmark reads no meaning from them), so they are
//! uniform with the requested mean and standard deviation.

use crate::engine::EngineError;
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

/// One tensor to draw: its name, shape, mean and standard deviation.
pub(super) struct Spec {
    pub name: String,
    pub shape: Vec<usize>,
    pub mean: f32,
    pub std: f32,
}

const CHUNK: usize = 1 << 20;

/// Writes `specs` as a bf16 safetensors file at `path`; `seed` picks the values.
pub(super) fn write_bf16(specs: &[Spec], seed: u64, path: &Path) -> Result<(), EngineError> {
    let io = |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut order: Vec<&Spec> = specs.iter().collect();
    order.sort_by(|a, b| a.name.cmp(&b.name));
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for s in &order {
        let bytes = s.shape.iter().product::<usize>() * 2;
        header.insert(
            s.name.clone(),
            serde_json::json!({"dtype": "BF16", "shape": s.shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut text = serde_json::Value::Object(header).to_string();
    // The data must start 8-byte aligned; the format allows trailing spaces.
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut out =
        std::io::BufWriter::with_capacity(1 << 24, std::fs::File::create(path).map_err(io)?);
    out.write_all(&(text.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(text.as_bytes()).map_err(io)?;
    for (t, s) in order.iter().enumerate() {
        let n: usize = s.shape.iter().product();
        let half_width = s.std * 3f32.sqrt();
        let chunks: Vec<Vec<u8>> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let mut state = seed ^ ((t as u64) << 40) ^ (c as u64).wrapping_mul(0x9e37_79b9);
                let len = CHUNK.min(n - c * CHUNK);
                let mut bytes = Vec::with_capacity(len * 2);
                for _ in 0..len {
                    let u = (splitmix(&mut state) >> 40) as f32 / (1u64 << 24) as f32;
                    let x = s.mean + half_width * (2.0 * u - 1.0);
                    bytes.extend_from_slice(&bf16_bits(x).to_le_bytes());
                }
                bytes
            })
            .collect();
        for c in chunks {
            out.write_all(&c).map_err(io)?;
        }
    }
    out.flush().map_err(io)
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// f32 to bf16, rounding to nearest even (the values are finite).
fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn the_file_loads_with_the_shapes_and_scale_asked_for() {
        let dir = std::env::temp_dir().join(format!("fixture-weights-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.safetensors");
        let specs = vec![
            Spec {
                name: "b".into(),
                shape: vec![3, 1000, 700],
                mean: 0.0,
                std: 0.05,
            },
            Spec {
                name: "a".into(),
                shape: vec![5],
                mean: 1.0,
                std: 0.1,
            },
        ];
        write_bf16(&specs, 7, &path).unwrap();
        let tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
        let b = &tensors["b"];
        assert_eq!(b.dims(), &[3, 1000, 700]);
        assert_eq!(b.dtype(), DType::BF16);
        let v: Vec<f32> = b
            .to_dtype(DType::F32)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / v.len() as f32).sqrt();
        assert!(mean.abs() < 1e-3, "{mean}");
        assert!((std - 0.05).abs() < 1e-3, "{std}");
        let a: Vec<f32> = tensors["a"]
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec1()
            .unwrap();
        assert!(a.iter().all(|x| (x - 1.0).abs() <= 0.18), "{a:?}");
        // Chunks of one tensor draw different values.
        assert_ne!(v[..100], v[CHUNK..CHUNK + 100]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
