//! How a panel holds its weights (f32, bf16 bit patterns or q8_0 bytes), and how a
//! kernel reads one depth step of it as 16 f32 lanes.

use super::{q8, PANEL};
use crate::candle::cpu::lanes::Lanes;

/// How a panel holds its weights: the unit of its store.
pub(super) trait Weight: Copy {
    /// Depths that share one scale; a tile loads the scales once per step.
    const STEP: usize;
    /// Whether widening to f32 costs enough to do once per block rather than per tile.
    const WIDEN_AHEAD: bool;
    /// Units of one panel of depth `k`.
    fn panel_len(k: usize) -> usize;
    /// The scales of the step holding depth `d` of the panel at `panel`.
    unsafe fn scale<L: Lanes>(panel: *const Self, d: usize) -> L;
    /// Depth `d` of the panel at `panel`, as f32, given its step's scales.
    unsafe fn load<L: Lanes>(panel: *const Self, d: usize, scale: L) -> L;
}

impl Weight for f32 {
    const STEP: usize = usize::MAX;
    const WIDEN_AHEAD: bool = false;
    fn panel_len(k: usize) -> usize {
        k * PANEL
    }
    #[inline(always)]
    unsafe fn scale<L: Lanes>(_: *const f32, _: usize) -> L {
        L::zero()
    }
    #[inline(always)]
    unsafe fn load<L: Lanes>(panel: *const f32, d: usize, _: L) -> L {
        L::load(panel.add(d * PANEL))
    }
}

/// bf16 bit patterns.
impl Weight for u16 {
    const STEP: usize = usize::MAX;
    // A shift into the high half: as cheap as the load.
    const WIDEN_AHEAD: bool = false;
    fn panel_len(k: usize) -> usize {
        k * PANEL
    }
    #[inline(always)]
    unsafe fn scale<L: Lanes>(_: *const u16, _: usize) -> L {
        L::zero()
    }
    #[inline(always)]
    unsafe fn load<L: Lanes>(panel: *const u16, d: usize, _: L) -> L {
        L::load_bf16(panel.add(d * PANEL))
    }
}

/// The bytes of q8_0 panels ([`q8`]).
impl Weight for u8 {
    const STEP: usize = q8::BLOCK;
    const WIDEN_AHEAD: bool = true;
    fn panel_len(k: usize) -> usize {
        k / q8::BLOCK * q8::BLOCK_BYTES
    }
    #[inline(always)]
    unsafe fn scale<L: Lanes>(panel: *const u8, d: usize) -> L {
        L::load_f16(panel.add(q8::scales_at(d)).cast())
    }
    #[inline(always)]
    unsafe fn load<L: Lanes>(panel: *const u8, d: usize, scale: L) -> L {
        L::load_q8(panel.add(q8::values_at(d)).cast(), scale)
    }
}
