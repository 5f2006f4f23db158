//! Element-wise CPU kernels for f32, written so that the compiler vectorises them: the
//! exponentials of attention's softmax and the gated activations of the MLP. candle's
//! CPU ops call the scalar library `exp` once per element, which made `exp` the
//! largest single cost of a prefill after the matrix products.
//!
//! Each public function picks, once per call, an AVX2+FMA build of the same code when
//! the CPU has those features (a binary built for the x86-64 baseline would otherwise
//! use 4-wide SSE and no fused multiply-add); `exp_shifted` also has an AVX-512 build,
//! which gives the AVX2 build's bits.

use std::mem::MaybeUninit;

/// In place: x becomes e^(scale * (x - max x)); returns the sum, by which the
/// caller divides the (fewer) output values instead of every probability. The bits
/// depend on the values of `x` only (and on FMA being there at all), not on which
/// vector width computed them.
pub fn exp_shifted(x: &mut [f32], scale: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
    {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { x86::exp_shifted_avx512(x, scale) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { exp_shifted_avx2(x, scale) };
    }
    exp_shifted_portable::<NATIVE_FMA>(x, scale)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_avx2(x: &mut [f32], scale: f32) -> f32 {
    exp_shifted_portable::<true>(x, scale)
}

/// Partial sums of the exponentials: lane `j` adds the elements at `j`, `j + 32`, ..
/// in order (a partial last chunk into its first lanes), and the lanes are then added
/// as a tree (`j + 16` into `j`, then `j + 8`, ..). 32 lanes are two AVX-512 vectors or
/// four AVX2 ones, so that the adds of one lane, which depend on each other, do not
/// hold back the exponentials (with 8 lanes they took as long as the exponentials).
pub(crate) const SUM_LANES: usize = 32;

/// Written as independent lanes so that the compiler vectorises the max, the
/// exponentials and the sum (a single running sum or max is a serial dependency).
#[inline(always)]
fn exp_shifted_portable<const FMA: bool>(x: &mut [f32], scale: f32) -> f32 {
    const L: usize = SUM_LANES;
    let mut lanes = [f32::NEG_INFINITY; L];
    let mut chunks = x.chunks_exact(L);
    for c in &mut chunks {
        for j in 0..L {
            lanes[j] = if c[j] > lanes[j] { c[j] } else { lanes[j] };
        }
    }
    let mut max = lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for &r in chunks.remainder() {
        max = max.max(r);
    }
    let shift = max * scale;
    let mut sums = [0f32; L];
    let mut chunks = x.chunks_exact_mut(L);
    for c in &mut chunks {
        for j in 0..L {
            let e = exp_nonpositive::<FMA>(madd::<FMA>(c[j], scale, -shift));
            c[j] = e;
            sums[j] += e;
        }
    }
    for (j, r) in chunks.into_remainder().iter_mut().enumerate() {
        *r = exp_nonpositive::<FMA>(madd::<FMA>(*r, scale, -shift));
        sums[j] += *r;
    }
    let mut width = L / 2;
    while width > 0 {
        for j in 0..width {
            sums[j] += sums[j + width];
        }
        width /= 2;
    }
    sums[0]
}

/// e^x for x <= 0, within about 2 ulp of `f32::exp`; below -87 (near the end of f32's
/// normal range) it returns e^-87, about 1.6e-38, which no softmax or sigmoid notices.
/// Branch-free (range reduction to 2^n e^r with |r| <= ln2/2, a degree-6 polynomial
/// for e^r, and 2^n built from its exponent bits), so a loop over it vectorises.
#[inline(always)]
fn exp_nonpositive<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 * 2^23 rounds to an integer and leaves it in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let t = madd::<FMA>(x, LOG2E, ROUND);
    let n = t - ROUND;
    let r = madd::<FMA>(-n, LN2_LO, madd::<FMA>(-n, LN2_HI, x));
    let mut p = 1.987_569_1e-4;
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = madd::<FMA>(p, r, c);
    }
    let e_r = madd::<FMA>(p, r * r, r + 1.0);
    // The low bits of t hold n (two's complement, offset by 2^22); adding the exponent
    // bias and shifting them into the exponent field gives 2^n, for n in -126..=0.
    let two_n = f32::from_bits(t.to_bits().wrapping_add(127) << 23);
    e_r * two_n
}

/// Whether the portable builds may use `mul_add`: without the instruction it is a
/// slow library call, so they multiply and add instead.
const NATIVE_FMA: bool = cfg!(any(target_feature = "fma", target_arch = "aarch64"));

/// a * b + c, fused into one instruction (and one rounding) when `FMA`.
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Rows of `2 * inner` values (gate, then up) into rows of `inner` values:
/// `out[j] = act(gate[j]) * up[j]`. Every element of `out` (as many as the input has
/// rows of `2 * inner`, times `inner`) is written, so it need not be initialised.
pub fn gated(gate_up: &[f32], inner: usize, act: GatedAct, out: &mut [MaybeUninit<f32>]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
    {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { x86::gated_avx512(gate_up, inner, act, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { gated_avx2(gate_up, inner, act, out) };
    }
    gated_portable::<NATIVE_FMA>(gate_up, inner, act, out)
}

/// RMSNorm over rows of `weight.len()` values: `x / sqrt(mean(x^2) + eps) * weight`.
/// Writes every element of `out` that has one of `x` (need not be initialised).
/// candle's CPU kernel sums the squares one after another, which the compiler cannot
/// vectorise; this one keeps eight partial sums.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [MaybeUninit<f32>]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { rms_norm_avx2(x, weight, eps, out) };
    }
    rms_norm_portable::<NATIVE_FMA>(x, weight, eps, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rms_norm_avx2(x: &[f32], weight: &[f32], eps: f32, out: &mut [MaybeUninit<f32>]) {
    rms_norm_portable::<true>(x, weight, eps, out)
}

#[inline(always)]
fn rms_norm_portable<const FMA: bool>(
    x: &[f32],
    weight: &[f32],
    eps: f32,
    out: &mut [MaybeUninit<f32>],
) {
    const L: usize = 8;
    let dim = weight.len();
    for (o, row) in out.chunks_mut(dim).zip(x.chunks(dim)) {
        let mut lanes = [0f32; L];
        let mut chunks = row.chunks_exact(L);
        for c in &mut chunks {
            for j in 0..L {
                lanes[j] = madd::<FMA>(c[j], c[j], lanes[j]);
            }
        }
        let mut squares: f32 = lanes.iter().sum();
        for &r in chunks.remainder() {
            squares = madd::<FMA>(r, r, squares);
        }
        let inv = 1.0 / (squares / dim as f32 + eps).sqrt();
        for ((o, &v), &w) in o.iter_mut().zip(row).zip(weight) {
            o.write(v * inv * w);
        }
    }
}

/// The activations of the gated MLPs the engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatedAct {
    /// x * sigmoid(x) (Qwen2, Llama)
    Silu,
    /// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Gemma 3)
    GeluTanh,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gated_avx2(gate_up: &[f32], inner: usize, act: GatedAct, out: &mut [MaybeUninit<f32>]) {
    gated_portable::<true>(gate_up, inner, act, out)
}

#[inline(always)]
fn gated_portable<const FMA: bool>(
    gate_up: &[f32],
    inner: usize,
    act: GatedAct,
    out: &mut [MaybeUninit<f32>],
) {
    for (o, gu) in out.chunks_mut(inner).zip(gate_up.chunks(2 * inner)) {
        let (gate, up) = gu.split_at(inner);
        match act {
            GatedAct::Silu => {
                for ((o, &g), &u) in o.iter_mut().zip(gate).zip(up) {
                    o.write(silu::<FMA>(g) * u);
                }
            }
            GatedAct::GeluTanh => {
                for ((o, &g), &u) in o.iter_mut().zip(gate).zip(up) {
                    o.write(gelu_tanh::<FMA>(g) * u);
                }
            }
        }
    }
}

/// x * sigmoid(x), with sigmoid from e^-|x| so the exponential never overflows.
#[inline(always)]
fn silu<const FMA: bool>(x: f32) -> f32 {
    let e = exp_nonpositive::<FMA>(-x.abs());
    let sigmoid_abs = 1.0 / (1.0 + e);
    let sigmoid = if x >= 0.0 {
        sigmoid_abs
    } else {
        e * sigmoid_abs
    };
    x * sigmoid
}

/// GELU with the tanh approximation; tanh(|y|) = (1 - e^-2|y|) / (1 + e^-2|y|).
#[inline(always)]
fn gelu_tanh<const FMA: bool>(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let y = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    let e = exp_nonpositive::<FMA>(-2.0 * y.abs());
    let t = (1.0 - e) / (1.0 + e);
    let tanh = if y >= 0.0 { t } else { -t };
    0.5 * x * (1.0 + tanh)
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 and AVX2 builds of `exp_shifted` give the same bits for every
    /// length (whole 32-lane chunks, partial ones of more and fewer than 16 lanes),
    /// wide value ranges and the clamp at -87.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn shifted_exponentials_have_the_same_bits_on_every_instruction_set() {
        use std::arch::is_x86_feature_detected as has;
        if !(has!("avx512f") && has!("avx2") && has!("fma")) {
            eprintln!("skipped: this CPU lacks AVX-512");
            return;
        }
        let mut seed = 0x9e37_79b9_u32;
        for len in (0..100).chain([127, 128, 129, 1000, 1503]) {
            for spread in [0.5f32, 8.0, 300.0] {
                let x: Vec<f32> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        (seed as f32 / u32::MAX as f32 - 0.5) * spread
                    })
                    .collect();
                let (mut a, mut b, mut c) = (x.clone(), x.clone(), x.clone());
                // SAFETY: the features were checked above.
                let sa = unsafe { exp_shifted_avx2(&mut a, 0.37) };
                let sb = unsafe { x86::exp_shifted_avx512(&mut b, 0.37) };
                let sc = exp_shifted_portable::<true>(&mut c, 0.37);
                assert_eq!(sa.to_bits(), sb.to_bits(), "len {len} spread {spread}");
                assert_eq!(sa.to_bits(), sc.to_bits(), "len {len} spread {spread}");
                for i in 0..len {
                    assert_eq!(a[i].to_bits(), b[i].to_bits(), "len {len}: {i}");
                    assert_eq!(a[i].to_bits(), c[i].to_bits(), "len {len}: {i}");
                }
            }
        }
    }

    /// The gated activations' AVX-512 build (the portable code, compiled for 16 lanes)
    /// gives the AVX2 build's bits.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn gated_activations_have_the_same_bits_on_every_instruction_set() {
        use std::arch::is_x86_feature_detected as has;
        if !(has!("avx512f") && has!("avx2") && has!("fma")) {
            eprintln!("skipped: this CPU lacks AVX-512");
            return;
        }
        let inner = 77;
        let gate_up: Vec<f32> = (0..5 * 2 * inner)
            .map(|i| ((i * 7919) % 2003) as f32 / 50.0 - 20.0)
            .collect();
        for act in [GatedAct::Silu, GatedAct::GeluTanh] {
            // SAFETY: the features were checked above.
            let a = written(5 * inner, |o| unsafe {
                gated_avx2(&gate_up, inner, act, o)
            });
            let b = written(5 * inner, |o| unsafe {
                x86::gated_avx512(&gate_up, inner, act, o)
            });
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "{act:?} {i}");
            }
        }
    }

    /// Runs `f` on an output of `len` floats and returns it.
    fn written(len: usize, f: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
        let mut out = vec![MaybeUninit::new(f32::NAN); len];
        f(&mut out);
        // SAFETY: every element was initialised (to NaN, then by `f`).
        out.into_iter()
            .map(|v| unsafe { v.assume_init() })
            .collect()
    }

    #[test]
    fn exp_matches_the_library_exp_on_the_range_softmax_uses() {
        for (name, exp) in [
            ("fused", exp_nonpositive::<true> as fn(f32) -> f32),
            ("unfused", exp_nonpositive::<false>),
        ] {
            let mut worst = 0f32;
            for i in 0..=200_000 {
                let x = -88.0 * i as f32 / 200_000.0;
                let (got, want) = (exp(x), x.exp());
                if x >= -87.0 {
                    worst = worst.max(((got - want) / want).abs());
                } else {
                    assert!(got < 2e-38, "{name} {x}: {got}");
                }
            }
            assert!(worst < 3e-7, "{name}: worst relative error {worst}");
            assert_eq!(exp(0.0), 1.0, "{name}");
        }
    }

    #[test]
    fn shifted_exponentials_of_every_length_match_the_library_exp() {
        for len in 1..40 {
            let mut x: Vec<f32> = (0..len).map(|i| ((i * 7) % 11) as f32 - 3.0).collect();
            let orig = x.clone();
            let sum = exp_shifted(&mut x, 0.7);
            let m = orig.iter().copied().fold(f32::MIN, f32::max);
            for (e, o) in x.iter().zip(&orig) {
                assert!((e - ((o - m) * 0.7).exp()).abs() < 1e-6, "len {len}");
            }
            let want: f32 = x.iter().sum();
            assert!((sum - want).abs() < 1e-5, "len {len}: sum {sum}");
        }
    }

    #[test]
    fn rms_norm_matches_its_definition() {
        for dim in [1, 7, 8, 19, 64] {
            let x: Vec<f32> = (0..3 * dim).map(|i| ((i * 13) % 17) as f32 - 8.0).collect();
            let w: Vec<f32> = (0..dim).map(|i| 0.5 + i as f32 / 10.0).collect();
            let out = written(x.len(), |o| rms_norm(&x, &w, 1e-6, o));
            for r in 0..3 {
                let row = &x[r * dim..][..dim];
                let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / dim as f64;
                for j in 0..dim {
                    let want = row[j] as f64 / (ms + 1e-6).sqrt() * w[j] as f64;
                    let got = out[r * dim + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                        "dim {dim}"
                    );
                }
            }
        }
    }

    #[test]
    fn gated_activations_match_their_definitions() {
        let inner = 37;
        let gate_up: Vec<f32> = (0..3 * 2 * inner)
            .map(|i| ((i * 37) % 101) as f32 / 5.0 - 10.0)
            .collect();
        for act in [GatedAct::Silu, GatedAct::GeluTanh] {
            let out = written(3 * inner, |o| gated(&gate_up, inner, act, o));
            for r in 0..3 {
                for j in 0..inner {
                    let g = gate_up[r * 2 * inner + j] as f64;
                    let u = gate_up[r * 2 * inner + inner + j] as f64;
                    let a = match act {
                        GatedAct::Silu => g / (1.0 + (-g).exp()),
                        GatedAct::GeluTanh => {
                            let c = (2.0 / std::f64::consts::PI).sqrt();
                            0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
                        }
                    };
                    let want = a * u;
                    let got = out[r * inner + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                        "{act:?} g={g} u={u}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
