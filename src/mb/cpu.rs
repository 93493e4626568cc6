//! The capability token for the IFMA kernel (ring's `cpu::Features` pattern): an
//! [`IfmaToken`] exists only after this CPU was found to run AVX-512F and AVX-512 IFMA, and the
//! kernel's IFMA entry points take one, so calling them without detection does not compile.
//! Its field is private to this module: no other module, the kernel included, can make one.
//! The token also carries the one tuning fact the kernel takes from the CPU: how squarings
//! form their columns ([`Squaring`]).

use super::lanes::ifma_available;

/// Proof that the CPU has AVX-512F and AVX-512 IFMA.
///
/// ```compile_fail
/// let forged = kae::mb::IfmaToken(kae::mb::Squaring::Karatsuba);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfmaToken(Squaring);

/// How the kernel's squarings of up to 20 limbs (moduli up to 1040 bits: RSA-2048's primes)
/// form their columns; the reduction and the result, bit for bit, are the same either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Squaring {
    /// Three squarings of half the limbs (Karatsuba's identity): fewer products, more vector
    /// additions. Faster where additions run beside the products (AMD Zen 4).
    Karatsuba,
    /// Every product of the schoolbook square: more products, few additions. Faster where
    /// 512-bit additions take the two ports the products use (Intel Xeon).
    Columns,
}

impl Squaring {
    /// The method measured faster on this CPU's maker: [`Squaring::Columns`] on Intel,
    /// [`Squaring::Karatsuba`] elsewhere. CPUID is asked once per process (in a virtual
    /// machine it traps to the hypervisor).
    pub fn for_this_cpu() -> Squaring {
        static CHOSEN: std::sync::OnceLock<Squaring> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            if cpu_vendor() == *b"GenuineIntel" {
                Squaring::Columns
            } else {
                Squaring::Karatsuba
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Squaring::Karatsuba => "karatsuba",
            Squaring::Columns => "columns",
        }
    }
}

/// The CPU's vendor string (CPUID leaf 0), or zeros off x86_64.
fn cpu_vendor() -> [u8; 12] {
    let mut v = [0u8; 12];
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID leaf 0 exists on every x86_64 CPU.
        #[allow(unused_unsafe, unsafe_code)]
        let r = unsafe { std::arch::x86_64::__cpuid(0) };
        v[..4].copy_from_slice(&r.ebx.to_le_bytes());
        v[4..8].copy_from_slice(&r.edx.to_le_bytes());
        v[8..].copy_from_slice(&r.ecx.to_le_bytes());
    }
    v
}

impl IfmaToken {
    /// A token when this CPU (and OS) runs AVX-512F and AVX-512 IFMA, with the squaring
    /// measured faster on it.
    pub fn detect() -> Option<IfmaToken> {
        ifma_available().then(|| IfmaToken(Squaring::for_this_cpu()))
    }

    /// A token without detection, with [`Squaring::for_this_cpu`].
    ///
    /// # Safety
    /// The CPU that runs the kernel with it (real or emulated) executes AVX-512F and AVX-512
    /// IFMA instructions.
    #[allow(unsafe_code)]
    pub unsafe fn assume() -> IfmaToken {
        IfmaToken(Squaring::for_this_cpu())
    }

    /// The same proof with another squaring (benchmarks and tests compare the two).
    pub fn with_squaring(self, squaring: Squaring) -> IfmaToken {
        IfmaToken(squaring)
    }

    pub fn squaring(self) -> Squaring {
        self.0
    }
}
