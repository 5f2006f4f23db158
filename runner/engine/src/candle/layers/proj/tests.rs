use super::*;
use crate::candle::cpu::quantized::Q4K_BLOCK;
use crate::candle::layers::kernels::CpuKernels;
use crate::candle::weights::WeightFormat;
use candle_core::{DType, Device};

fn bits(t: &Tensor) -> Vec<u32> {
    t.flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// q4_K products quantize each input row on its own and take one dot product per
/// output, and q8_0 panels run one chain per output in a fixed order, so a row's bits
/// cannot depend on its neighbours, whichever kernel (a matrix-vector one for a single
/// row, tiled ones for more) runs.
#[test]
fn a_quantized_row_has_the_same_bits_alone_as_among_other_rows() {
    let dev = Device::Cpu;
    // Widths and depths of Qwen2.5-0.5B's layers and of the fixtures', with depths that
    // fill q4_K's blocks and one that falls back to q8_0.
    for (n, k) in [(896, 896), (4864, 896), (256, 1024), (96, 704)] {
        let w = Tensor::randn(0f32, 0.05, (n, k), &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (37, k), &dev).unwrap();
        for format in [WeightFormat::Q8_0, WeightFormat::Q4K] {
            let layer = Proj::from_weight(
                &w,
                &Weights {
                    format,
                    stored: DType::F32,
                    checkpoint: None,
                    gguf: None,
                    kernels: &CpuKernels,
                },
            )
            .unwrap();
            // q4_K takes candle's blocks where the depth fills them; q8_0, and q4_K's
            // fallback for a depth that does not, take q8_0 panels.
            let q4k = format == WeightFormat::Q4K && k % Q4K_BLOCK == 0;
            assert_eq!(
                matches!(layer, Proj::Quantized { .. }),
                q4k,
                "{format} k {k}"
            );
            let all = bits(&layer.forward(&x).unwrap());
            for (start, len) in [(0, 1), (36, 1), (3, 4), (5, 8), (0, 32), (1, 36)] {
                let part = bits(&layer.forward(&x.narrow(0, start, len).unwrap()).unwrap());
                assert_eq!(
                    part,
                    all[start * n..(start + len) * n],
                    "{format} n {n} k {k} rows {start}+{len}"
                );
            }
        }
    }
}

#[test]
fn quantized_products_are_close_to_the_f32_product() {
    let dev = Device::Cpu;
    let (n, k) = (512, 1024);
    let w = Tensor::randn(0f32, 0.05, (n, k), &dev).unwrap();
    let x = Tensor::randn(0f32, 1.0, (4, k), &dev).unwrap();
    let exact = x.matmul(&w.t().unwrap()).unwrap();
    let scale = exact
        .abs()
        .unwrap()
        .mean_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    for (format, tolerance) in [(WeightFormat::Q8_0, 0.02), (WeightFormat::Q4K, 0.15)] {
        let got = Proj::from_weight(
            &w,
            &Weights {
                format,
                stored: DType::F32,
                checkpoint: None,
                gguf: None,
                kernels: &CpuKernels,
            },
        )
        .unwrap()
        .forward(&x)
        .unwrap();
        let err = (got - &exact)
            .unwrap()
            .abs()
            .unwrap()
            .mean_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(
            err / scale < tolerance,
            "{format}: mean error {err} against mean {scale}"
        );
    }
}

#[test]
fn a_layer_too_narrow_for_any_block_is_refused_with_the_way_out() {
    let w = Tensor::zeros((8, 48), DType::F32, &Device::Cpu).unwrap();
    let err = Proj::from_weight(
        &w,
        &Weights {
            format: WeightFormat::Q8_0,
            stored: DType::F32,
            checkpoint: None,
            gguf: None,
            kernels: &CpuKernels,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("48") && err.contains("bf16 or f32"), "{err}");
}
