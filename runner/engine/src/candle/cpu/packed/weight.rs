//! How a float panel holds its weights (f32 or bf16 bit patterns), and how a kernel
//! reads one depth step of it as 16 f32 lanes. (q8_0 panels have a product of their
//! own, [`super::q8_dot`].)

use super::PANEL;
use crate::candle::cpu::lanes::Lanes;

/// How a panel holds its weights: the unit of its store.
pub(super) trait Weight: Copy {
    /// Units of one panel of depth `k`.
    fn panel_len(k: usize) -> usize;
    /// Depth `d` of the panel at `panel`, as f32.
    unsafe fn load<L: Lanes>(panel: *const Self, d: usize) -> L;
}

impl Weight for f32 {
    fn panel_len(k: usize) -> usize {
        k * PANEL
    }
    #[inline(always)]
    unsafe fn load<L: Lanes>(panel: *const f32, d: usize) -> L {
        L::load(panel.add(d * PANEL))
    }
}

/// bf16 bit patterns.
impl Weight for u16 {
    fn panel_len(k: usize) -> usize {
        k * PANEL
    }
    #[inline(always)]
    unsafe fn load<L: Lanes>(panel: *const u16, d: usize) -> L {
        L::load_bf16(panel.add(d * PANEL))
    }
}
