//! The bytes of a published page. `kae-stat` reads them from other processes' pages: keep
//! the page `repr(C)`, little endian, and bump [`VERSION`] on any change.

use core::sync::atomic::AtomicU64;

/// Counter slots, in the order they are stored in the page and listed by `kae-stat`.
pub mod idx {
    pub const PRIVATE_INLINE: usize = 0;
    pub const PRIVATE_OFFLOADED: usize = 1;
    pub const PUBLIC_INLINE: usize = 2;
    pub const PUBLIC_OFFLOADED: usize = 3;
    pub const PRIVATE_ERRORS: usize = 4;
    pub const PUBLIC_ERRORS: usize = 5;
    pub const ASYNC_PAUSES: usize = 6;
    pub const SPURIOUS_RESUMES: usize = 7;
    pub const QUEUE_FULL_RETRIES: usize = 8;
    pub const FALLBACKS: usize = 9;
    pub const CRT_FAULTS: usize = 10;
    pub const QUEUE_HIGH_WATER: usize = 11;
    pub const IN_FLIGHT: usize = 12;
    /// Accelerator requests that failed (error status, timeout, refused submit) and were
    /// redone on the CPU.
    pub const HW_FAULTS: usize = 13;
    pub const COUNT: usize = 14;
}

/// Names of the slots (also the provider parameter names, with '-'; `kae-stat --json` uses
/// them with '_').
pub const NAMES: [&str; idx::COUNT] = [
    "ops-private-inline",
    "ops-private-offloaded",
    "ops-public-inline",
    "ops-public-offloaded",
    "errors-private",
    "errors-public",
    "async-pauses",
    "spurious-resumes",
    "queue-full-retries",
    "fallbacks",
    "crt-faults",
    "queue-high-water",
    "in-flight",
    "hw-faults",
];

/// The counters of a page: relaxed atomics, bumped by the process that owns the page.
#[repr(C)]
pub struct Counters {
    pub values: [AtomicU64; idx::COUNT],
}

impl Counters {
    pub const fn new() -> Counters {
        Counters {
            values: [const { AtomicU64::new(0) }; idx::COUNT],
        }
    }
}

impl Default for Counters {
    fn default() -> Counters {
        Counters::new()
    }
}

/// Layout of a published page.
#[repr(C)]
pub struct Page {
    pub magic: [u8; 8],
    pub version: u32,
    pub pid: u32,
    /// Process start time in clock ticks since boot (/proc/PID/stat field 22): tells a live
    /// process from a recycled pid.
    pub start_ticks: u64,
    pub backend: [u8; 16],
    pub device: [u8; 32],
    pub counters: Counters,
}

/// Size of a page file in bytes.
pub const PAGE_SIZE: usize = core::mem::size_of::<Page>();

pub const MAGIC: [u8; 8] = *b"KAESTAT\0";
/// Magic of a page its process no longer uses (it moved to another uid's directory, or could
/// not remove it at exit): skipped by readers, removed by `kae-stat`.
pub const MOVED: [u8; 8] = *b"KAEMOVD\0";
pub const VERSION: u32 = 2;

// The on-disk format: offsets readers rely on (a change here is a VERSION bump).
const _: () = {
    assert!(core::mem::offset_of!(Page, magic) == 0);
    assert!(core::mem::offset_of!(Page, version) == 8);
    assert!(core::mem::offset_of!(Page, pid) == 12);
    assert!(core::mem::offset_of!(Page, start_ticks) == 16);
    assert!(core::mem::offset_of!(Page, backend) == 24);
    assert!(core::mem::offset_of!(Page, device) == 40);
    assert!(core::mem::offset_of!(Page, counters) == 72);
    assert!(PAGE_SIZE == 72 + 8 * idx::COUNT);
};

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot(pub [u64; idx::COUNT]);

impl Snapshot {
    pub fn get(&self, i: usize) -> u64 {
        self.0[i]
    }
    pub fn errors(&self) -> u64 {
        self.0[idx::PRIVATE_ERRORS] + self.0[idx::PUBLIC_ERRORS]
    }
    pub fn private_ok(&self) -> u64 {
        self.0[idx::PRIVATE_INLINE] + self.0[idx::PRIVATE_OFFLOADED]
    }
    pub fn public_ok(&self) -> u64 {
        self.0[idx::PUBLIC_INLINE] + self.0[idx::PUBLIC_OFFLOADED]
    }
}

/// Reads a page from its bytes: (pid, start ticks, backend label, counters). None unless
/// the magic is [`MAGIC`] and the version [`VERSION`].
pub fn parse_page(bytes: &[u8]) -> Option<(u32, u64, String, Snapshot)> {
    if bytes.len() < PAGE_SIZE || bytes[..8] != MAGIC {
        return None;
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    if u32_at(core::mem::offset_of!(Page, version)) != VERSION {
        return None;
    }
    let pid = u32_at(core::mem::offset_of!(Page, pid));
    let start = u64_at(core::mem::offset_of!(Page, start_ticks));
    let b = core::mem::offset_of!(Page, backend);
    let backend_raw = &bytes[b..b + 16];
    let end = backend_raw
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(backend_raw.len());
    let backend = String::from_utf8_lossy(&backend_raw[..end]).into_owned();
    let base = core::mem::offset_of!(Page, counters);
    let mut s = [0u64; idx::COUNT];
    for (i, v) in s.iter_mut().enumerate() {
        *v = u64_at(base + 8 * i);
    }
    Some((pid, start, backend, Snapshot(s)))
}

/// Sum over processes (the queue high-water mark is the largest, not a sum).
pub fn total<'a>(snapshots: impl IntoIterator<Item = &'a Snapshot>) -> Snapshot {
    let mut t = [0u64; idx::COUNT];
    for s in snapshots {
        for (i, v) in t.iter_mut().enumerate() {
            if i == idx::QUEUE_HIGH_WATER {
                *v = (*v).max(s.get(i));
            } else {
                *v += s.get(i);
            }
        }
    }
    Snapshot(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::Ordering;

    #[test]
    fn page_layout_round_trips() {
        let page = Page {
            magic: MAGIC,
            version: VERSION,
            pid: 42,
            start_ticks: 777,
            backend: *b"cpu\0\0\0\0\0\0\0\0\0\0\0\0\0",
            device: [0; 32],
            counters: Counters::new(),
        };
        page.counters.values[idx::PRIVATE_OFFLOADED].store(9, Ordering::Relaxed);
        page.counters.values[idx::IN_FLIGHT].store(3, Ordering::Relaxed);
        // SAFETY: reading the bytes of a repr(C) value we own.
        let bytes =
            unsafe { core::slice::from_raw_parts((&page as *const Page).cast::<u8>(), PAGE_SIZE) };
        let (pid, start, backend, s) = parse_page(bytes).unwrap();
        assert_eq!((pid, start, backend.as_str()), (42, 777, "cpu"));
        assert_eq!(s.get(idx::PRIVATE_OFFLOADED), 9);
        assert_eq!(s.get(idx::IN_FLIGHT), 3);
        let mut bad = bytes.to_vec();
        bad[0] = b'X';
        assert!(parse_page(&bad).is_none(), "wrong magic is rejected");
        let mut bad = bytes.to_vec();
        bad[8] = 1;
        assert!(parse_page(&bad).is_none(), "another version is rejected");
        assert!(parse_page(&bytes[..PAGE_SIZE - 1]).is_none(), "short");
    }

    /// The format as bytes, written by hand: what kae-stat of an earlier build reads.
    #[test]
    fn page_bytes_are_the_documented_format() {
        assert_eq!(PAGE_SIZE, 184);
        let mut b = vec![0u8; PAGE_SIZE];
        b[..8].copy_from_slice(b"KAESTAT\0");
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        b[12..16].copy_from_slice(&4321u32.to_le_bytes());
        b[16..24].copy_from_slice(&99u64.to_le_bytes());
        b[24..28].copy_from_slice(b"hpre");
        b[72 + 8 * idx::ASYNC_PAUSES..][..8].copy_from_slice(&5u64.to_le_bytes());
        b[176..184].copy_from_slice(&6u64.to_le_bytes()); // hw-faults, added in format 2
        let (pid, start, backend, s) = parse_page(&b).unwrap();
        assert_eq!((pid, start, backend.as_str()), (4321, 99, "hpre"));
        assert_eq!(s.get(idx::ASYNC_PAUSES), 5);
        assert_eq!(s.get(idx::HW_FAULTS), 6);
        assert_eq!(s.errors() + s.private_ok() + s.public_ok(), 0);
    }

    #[test]
    fn total_sums_but_takes_the_largest_high_water() {
        let mut a = Snapshot::default();
        let mut b = Snapshot::default();
        a.0[idx::PRIVATE_INLINE] = 2;
        b.0[idx::PRIVATE_INLINE] = 3;
        a.0[idx::QUEUE_HIGH_WATER] = 7;
        b.0[idx::QUEUE_HIGH_WATER] = 4;
        let t = total([&a, &b]);
        assert_eq!(t.get(idx::PRIVATE_INLINE), 5);
        assert_eq!(t.get(idx::QUEUE_HIGH_WATER), 7);
    }

    #[test]
    fn names_are_unique_and_json_friendly() {
        for (i, n) in NAMES.iter().enumerate() {
            assert!(
                n.bytes().all(|c| c.is_ascii_lowercase() || c == b'-'),
                "{n}"
            );
            assert!(!NAMES[..i].contains(n), "{n} twice");
        }
    }
}
