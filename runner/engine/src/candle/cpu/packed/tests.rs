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

/// A weight's q8_0 blocks as candle quantizes it, one row at a time: per output, per
/// block, the scale and the 32 int8 values.
fn q8_blocks(w: &[f32], n: usize, k: usize) -> Vec<Vec<(f32, [i8; 32])>> {
    use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
    (0..n)
        .map(|o| {
            let mut blocks = vec![BlockQ8_0::zeros(); k / 32];
            BlockQ8_0::from_float(&w[o * k..(o + 1) * k], &mut blocks);
            blocks
                .iter()
                .map(|b| {
                    // Safety: BlockQ8_0 is GGML's repr(C) { d: f16, qs: [i8; 32] }.
                    let bytes: &[u8; 34] = unsafe { &*(b as *const BlockQ8_0).cast() };
                    let d = half::f16::from_bits(u16::from_ne_bytes([bytes[0], bytes[1]]));
                    (d.to_f32(), std::array::from_fn(|i| bytes[2 + i] as i8))
                })
                .collect()
        })
        .collect()
}

/// One activation row quantized as documented in `q8_rows`: per block of 32, the
/// scale max|x| / 127 in f32 and x * (1 / scale) rounded to the nearest, ties to even.
fn q8_row(x: &[f32]) -> Vec<(f32, [i8; 32])> {
    x.chunks(32)
        .map(|b| {
            let d = b.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
            let id = if d == 0.0 { 0.0 } else { 1.0 / d };
            let q: Vec<i8> = b.iter().map(|v| (v * id).round_ties_even() as i8).collect();
            (d, q.try_into().unwrap())
        })
        .collect()
}

/// The integer q8_0 product written plainly: per output, exact integer dots of the
/// blocks, each times (weight scale x row scale) fused into the sum, blocks in order.
fn q8_reference(x: &[f32], rows: usize, w: &[f32], n: usize, k: usize) -> Vec<f32> {
    let wq = q8_blocks(w, n, k);
    let mut out = vec![0f32; rows * n];
    for r in 0..rows {
        let xq = q8_row(&x[r * k..(r + 1) * k]);
        for o in 0..n {
            let mut y = 0f32;
            for ((wd, wv), (xd, xv)) in wq[o].iter().zip(&xq) {
                let dot: i32 = wv.iter().zip(xv).map(|(&a, &b)| a as i32 * b as i32).sum();
                y = (dot as f32).mul_add(wd * xd, y);
            }
            out[r * n + o] = y;
        }
    }
    out
}

/// Weights whose rows differ widely in magnitude, so that the scales differ per block.
fn q8_weight(n: usize, k: usize, seed: u64) -> Vec<f32> {
    let mags = random(n, seed + 1);
    random(n * k, seed)
        .chunks(k)
        .zip(mags)
        .flat_map(|(row, m)| row.iter().map(move |v| v * m * 100.0))
        .collect()
}

#[test]
fn q8_0_products_are_the_plain_integer_product_bit_for_bit_on_every_isa() {
    for (n, k) in [(16, 32), (17, 96), (40, 544), (64, 2048), (33, 128)] {
        let w = q8_weight(n, k, 13);
        let packed = PackedWeight::pack(
            &[&Tensor::from_vec(w.clone(), (n, k), &Device::Cpu).unwrap()],
            Packing::Q8_0,
        )
        .unwrap();
        for rows in [1, 2, 3, 4, 5, 7, 9, 16, 33] {
            let mut x = random(rows * k, 19 + rows as u64);
            // A block of zeros (a zero scale), and one whose step is 1 with ties to round.
            x[..32].fill(0.0);
            if rows > 1 {
                for (i, v) in x[k..k + 32].iter_mut().enumerate() {
                    *v = if i == 0 { 127.0 } else { i as f32 * 3.0 - 47.5 };
                }
            }
            let want = q8_reference(&x, rows, &w, n, k);
            for isa in available_isas() {
                let mut got = vec![0f32; rows * n];
                packed.matmul(&x, rows, &mut got, isa);
                assert_eq!(bits(&got), bits(&want), "{isa:?} n {n} k {k} rows {rows}");
            }
        }
    }
}

/// Rounding the activations to int8 moves each by at most half its block's step, so
/// the product is within sum |w| x step / 2 of the f32 product on the weights candle's
/// q8_0 dequantizes to (plus f32 rounding).
#[test]
fn q8_0_products_are_close_to_the_f32_product_on_the_dequantized_weights() {
    use candle_core::quantized::{GgmlDType, QTensor};
    let (n, k, rows) = (48, 1024, 5);
    let w = Tensor::from_vec(q8_weight(n, k, 29), (n, k), &Device::Cpu).unwrap();
    let dequantized = QTensor::quantize(&w, GgmlDType::Q8_0)
        .unwrap()
        .dequantize(&Device::Cpu)
        .unwrap();
    let dw: Vec<f32> = dequantized.flatten_all().unwrap().to_vec1().unwrap();
    let x = random(rows * k, 31);
    let mut got = vec![0f32; rows * n];
    PackedWeight::pack(&[&w], Packing::Q8_0)
        .unwrap()
        .matmul(&x, rows, &mut got, best_isa());
    let mut worst = 0f64;
    for r in 0..rows {
        let xr = &x[r * k..(r + 1) * k];
        for o in 0..n {
            let wr = &dw[o * k..(o + 1) * k];
            let (mut exact, mut bound, mut size) = (0f64, 0f64, 0f64);
            for (xb, wb) in xr.chunks(32).zip(wr.chunks(32)) {
                let step = xb.iter().fold(0f32, |m, v| m.max(v.abs())) as f64 / 127.0;
                for (&a, &b) in xb.iter().zip(wb) {
                    exact += a as f64 * b as f64;
                    bound += (b as f64).abs() * step / 2.0;
                    size += (a as f64 * b as f64).abs();
                }
            }
            let err = (got[r * n + o] as f64 - exact).abs();
            assert!(
                err <= bound * 1.001 + size * 1e-5,
                "row {r} out {o}: {err} > {bound}"
            );
            worst = worst.max(err / size);
        }
    }
    // Not a vacuous bound: int8 activations do move the products.
    assert!(worst > 0.0);
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
