//! The multi-buffer backend's settings (config key `multibuffer`; `KAE_MB_ENGINE` and
//! `KAE_MB_FAULT_LANE` in test builds).

/// Settings of the multi-buffer backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbConfig {
    /// `multibuffer = no` turns the backend off (`backend = auto` then skips it).
    pub enabled: bool,
    /// `KAE_MB_ENGINE=portable`, read only by a test build (feature `test-knobs`): run the
    /// kernel on the portable lanes (much slower than libcrypto; lets the batching be tested
    /// on CPUs without IFMA).
    pub portable: bool,
    /// `KAE_MB_FAULT_LANE=k`, read only by a test build: corrupt lane k of every kernel call
    /// (with the portable engine only), to test that the fault check catches a bad lane.
    pub fault_lane: Option<usize>,
}

impl Default for MbConfig {
    fn default() -> Self {
        MbConfig {
            enabled: true,
            portable: false,
            fault_lane: None,
        }
    }
}
