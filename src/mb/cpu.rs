//! The capability token for the IFMA kernel (ring's `cpu::Features` pattern): an
//! [`IfmaToken`] exists only after this CPU was found to run AVX-512F and AVX-512 IFMA, and the
//! kernel's IFMA entry points take one, so calling them without detection does not compile.
//! Its field is private to this module: no other module, the kernel included, can make one.

use super::lanes::ifma_available;

/// Proof that the CPU has AVX-512F and AVX-512 IFMA.
///
/// ```compile_fail
/// let forged = kae::mb::IfmaToken(());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfmaToken(());

impl IfmaToken {
    /// A token when this CPU (and OS) runs AVX-512F and AVX-512 IFMA.
    pub fn detect() -> Option<IfmaToken> {
        ifma_available().then_some(IfmaToken(()))
    }

    /// A token without detection.
    ///
    /// # Safety
    /// The CPU that runs the kernel with it (real or emulated) executes AVX-512F and AVX-512
    /// IFMA instructions.
    #[allow(unsafe_code)]
    pub unsafe fn assume() -> IfmaToken {
        IfmaToken(())
    }
}
