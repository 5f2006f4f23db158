use super::*;
use crate::candle::cpu::isa::available_isas;

fn random(n: usize, seed: u64) -> Vec<f32> {
    // A small LCG: the values only need to be varied and reproducible.
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn weight(n: usize, k: usize, packing: Packing) -> (Tensor, PackedWeight) {
    let w = Tensor::from_vec(
        random(n * k, n as u64 * 31 + k as u64),
        (n, k),
        &Device::Cpu,
    )
    .unwrap();
    let packed = PackedWeight::pack(&[&w], packing).unwrap();
    (w, packed)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Shapes: a depth inside one block and over several (with a partial last block), a
/// width that fills whole panel groups and ones that end in a partial group or panel.
const SHAPES: [(usize, usize); 5] = [(64, 48), (128, 1100), (200, 96), (17, 530), (1024, 64)];

/// Shapes for q8_0, whose depths are whole blocks of 32: inside one depth block, over
/// several with a partial last one, and partial panel groups and panels.
const Q8_SHAPES: [(usize, usize); 4] = [(64, 64), (128, 1120), (200, 96), (17, 544)];

#[test]
fn a_row_has_the_same_bits_alone_as_among_any_other_rows_for_every_isa_and_packing() {
    let rows = 37;
    for packing in [Packing::F32, Packing::Bf16, Packing::Q8_0] {
        let shapes: &[(usize, usize)] = if packing == Packing::Q8_0 {
            &Q8_SHAPES
        } else {
            &SHAPES
        };
        for &(n, k) in shapes {
            let (_, w) = weight(n, k, packing);
            let x = random(rows * k, 7);
            let mut reference = vec![0f32; rows * n];
            w.matmul(&x, rows, &mut reference, Isa::Scalar);
            for isa in available_isas() {
                let mut all = vec![0f32; rows * n];
                w.matmul(&x, rows, &mut all, isa);
                assert_eq!(
                    bits(&all),
                    bits(&reference),
                    "{isa:?} {packing:?} n {n} k {k}"
                );
                for (start, len) in [(0, 1), (36, 1), (5, 2), (3, 5), (6, 7), (0, 32), (1, 36)] {
                    let mut part = vec![0f32; len * n];
                    w.matmul(&x[start * k..(start + len) * k], len, &mut part, isa);
                    assert_eq!(
                        bits(&part),
                        bits(&reference[start * n..(start + len) * n]),
                        "{isa:?} {packing:?} n {n} k {k} rows {start}+{len}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_product_is_x_times_w_transposed() {
    for (n, k) in SHAPES {
        let (w, packed) = weight(n, k, Packing::F32);
        let x = Tensor::from_vec(random(3 * k, 9), (3, k), &Device::Cpu).unwrap();
        let want: Vec<f32> = x
            .matmul(&w.t().unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let got: Vec<f32> = packed
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-4 * (k as f32).sqrt(),
                "n {n} k {k}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn bf16_packing_computes_exactly_on_the_bf16_rounded_weights() {
    let (n, k) = (96, 700);
    let w = Tensor::from_vec(random(n * k, 3), (n, k), &Device::Cpu).unwrap();
    let rounded = w
        .to_dtype(DType::BF16)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    let as_bf16 = PackedWeight::pack(&[&w], Packing::Bf16).unwrap();
    let as_f32 = PackedWeight::pack(&[&rounded], Packing::F32).unwrap();
    assert!(
        matches!((&as_bf16.store, &as_f32.store), (Store::Bf16(a), Store::F32(b)) if a.len() == b.len())
    );
    let x = random(4 * k, 5);
    let (mut a, mut b) = (vec![0f32; 4 * n], vec![0f32; 4 * n]);
    as_bf16.matmul(&x, 4, &mut a, best_isa());
    as_f32.matmul(&x, 4, &mut b, best_isa());
    assert_eq!(bits(&a), bits(&b));
}

#[test]
fn stacked_parts_give_the_products_of_each_part_side_by_side() {
    let k = 80;
    let parts: Vec<Tensor> = [24, 8, 40]
        .iter()
        .enumerate()
        .map(|(i, &n)| Tensor::from_vec(random(n * k, i as u64), (n, k), &Device::Cpu).unwrap())
        .collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    let stacked = PackedWeight::pack(&refs, Packing::F32).unwrap();
    let x = Tensor::from_vec(random(2 * k, 11), (2, k), &Device::Cpu).unwrap();
    let whole = stacked.forward(&x).unwrap();
    let mut first = 0;
    for p in &parts {
        let alone = PackedWeight::pack(&[p], Packing::F32)
            .unwrap()
            .forward(&x)
            .unwrap();
        let n = p.dim(0).unwrap();
        let slice = whole.narrow(1, first, n).unwrap();
        let (a, b): (Vec<f32>, Vec<f32>) = (
            alone.flatten_all().unwrap().to_vec1().unwrap(),
            slice.flatten_all().unwrap().to_vec1().unwrap(),
        );
        assert_eq!(bits(&a), bits(&b));
        first += n;
    }
}

/// int8 times an f16 scale is exact in f32, so q8_0 panels compute the f32 product of
/// the weights candle's q8_0 dequantizes to, bit for bit, on every instruction set.
#[test]
fn q8_0_panels_compute_exactly_on_the_weights_candle_dequantizes() {
    use candle_core::quantized::{GgmlDType, QTensor};
    for (n, k) in Q8_SHAPES {
        // Rows of very different magnitudes, so that the scales differ per block.
        let w = Tensor::from_vec(random(n * k, 13), (n, k), &Device::Cpu)
            .unwrap()
            .broadcast_mul(
                &Tensor::from_vec(random(n, 17), (n, 1), &Device::Cpu)
                    .unwrap()
                    .affine(100.0, 0.0)
                    .unwrap(),
            )
            .unwrap();
        let dequantized = QTensor::quantize(&w, GgmlDType::Q8_0)
            .unwrap()
            .dequantize(&Device::Cpu)
            .unwrap();
        let q8 = PackedWeight::pack(&[&w], Packing::Q8_0).unwrap();
        let f32 = PackedWeight::pack(&[&dequantized], Packing::F32).unwrap();
        // A few rows widen the int8 values in registers, many widen each block ahead.
        for rows in [7, 40] {
            let x = random(rows * k, 19);
            let mut want = vec![0f32; rows * n];
            f32.matmul(&x, rows, &mut want, Isa::Scalar);
            for isa in available_isas() {
                let mut got = vec![0f32; rows * n];
                q8.matmul(&x, rows, &mut got, isa);
                assert_eq!(bits(&got), bits(&want), "{isa:?} n {n} k {k} rows {rows}");
            }
        }
    }
}

#[test]
fn q8_0_panels_take_stacked_parts_from_bf16_in_place() {
    let k = 96;
    let parts: Vec<Tensor> = [24, 8, 40]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            Tensor::from_vec(random(n * k, 40 + i as u64), (n, k), &Device::Cpu)
                .unwrap()
                .to_dtype(DType::BF16)
                .unwrap()
        })
        .collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    let stacked = PackedWeight::pack(&refs, Packing::Q8_0).unwrap();
    let whole = Tensor::cat(&refs, 0).unwrap();
    let one = PackedWeight::pack(&[&whole], Packing::Q8_0).unwrap();
    let x = random(3 * k, 23);
    let (mut a, mut b) = (vec![0f32; 3 * 72], vec![0f32; 3 * 72]);
    stacked.matmul(&x, 3, &mut a, best_isa());
    one.matmul(&x, 3, &mut b, best_isa());
    assert_eq!(bits(&a), bits(&b));
    assert!(PackedWeight::pack(&[&whole.narrow(1, 0, 48).unwrap()], Packing::Q8_0).is_err());
}
