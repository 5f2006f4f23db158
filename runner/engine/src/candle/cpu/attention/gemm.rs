//! Attention's two products (QK^T and PV) through the `gemm` crate, for a head
//! dimension that is not a whole number of 16-float vectors: the fused kernels of
//! `products` take every other head dimension, in prefill and decode alike. Here a
//! decode step and a prefill block each call these with shapes of their own, so a
//! decoded token need not get its prefill's bits; but each product's shapes do not
//! depend on what else is in the batch, so the crate's reduction order is fixed per row.

/// scores (m x n, dense) = queries (m x d, rows `q_rs` apart) . keys (n x d, rows
/// `k_rs` apart)^T.
///
/// # Safety
/// Every pointer must be valid for the extents described.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product_qk(
    m: usize,
    n: usize,
    d: usize,
    q: *const f32,
    q_rs: isize,
    k: *const f32,
    k_rs: isize,
    scores: *mut f32,
) {
    gemm::gemm(
        m,
        n,
        d,
        scores,
        1,
        n as isize,
        false,
        q,
        1,
        q_rs,
        k,
        k_rs,
        1,
        0.0,
        1.0,
        false,
        false,
        false,
        gemm::Parallelism::None,
    )
}

/// out (m x d, rows `o_rs` apart) = probs (m x n, dense) . values (n x d, rows `v_rs`
/// apart).
///
/// # Safety
/// Every pointer must be valid for the extents described.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product_pv(
    m: usize,
    n: usize,
    d: usize,
    probs: *const f32,
    v: *const f32,
    v_rs: isize,
    out: *mut f32,
    o_rs: isize,
) {
    gemm::gemm(
        m,
        d,
        n,
        out,
        1,
        o_rs,
        false,
        probs,
        1,
        n as isize,
        v,
        1,
        v_rs,
        0.0,
        1.0,
        false,
        false,
        false,
        gemm::Parallelism::None,
    )
}
