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
    /// Kernel calls (8-lane batches) the multi-buffer backend ran.
    pub const MB_BATCHES: usize = 14;
    /// Lanes filled with real work, summed over those batches (a lane is one CRT half of one
    /// request): the average lanes per batch is `MB_LANES / MB_BATCHES`.
    pub const MB_LANES: usize = 15;
    /// Private requests the multi-buffer backend computed on the scalar (OpenSSL) path instead,
    /// because their batch was too small or the key did not fit a lane.
    pub const MB_SCALAR: usize = 16;
    pub const COUNT: usize = 17;
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
    "mb-batches",
    "mb-lanes",
    "mb-scalar",
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
pub const VERSION: u32 = 3;

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
    /// Average lanes per multi-buffer batch with one decimal (`"7.5"`, rounded half up);
    /// None when no batch ran.
    pub fn mb_lanes_per_batch(&self) -> Option<String> {
        let batches = self.0[idx::MB_BATCHES] as u128;
        if batches == 0 {
            return None;
        }
        let tenths = (self.0[idx::MB_LANES] as u128 * 10 + batches / 2) / batches;
        Some(format!("{}.{}", tenths / 10, tenths % 10))
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
        page.counters.values[idx::MB_SCALAR].store(11, Ordering::Relaxed);
        // SAFETY: reading the bytes of a repr(C) value we own.
        let bytes =
            unsafe { core::slice::from_raw_parts((&page as *const Page).cast::<u8>(), PAGE_SIZE) };
        let (pid, start, backend, s) = parse_page(bytes).unwrap();
        assert_eq!((pid, start, backend.as_str()), (42, 777, "cpu"));
        assert_eq!(s.get(idx::PRIVATE_OFFLOADED), 9);
        assert_eq!(s.get(idx::IN_FLIGHT), 3);
        assert_eq!(s.get(idx::MB_SCALAR), 11);
        let mut bad = bytes.to_vec();
        bad[0] = b'X';
        assert!(parse_page(&bad).is_none(), "wrong magic is rejected");
        for old in [1u8, 2] {
            let mut bad = bytes.to_vec();
            bad[8] = old;
            assert!(parse_page(&bad).is_none(), "format {old} is rejected");
        }
        let mut bad = bytes.to_vec();
        bad[8] = 4;
        assert!(parse_page(&bad).is_none(), "a newer format is rejected");
        assert!(parse_page(&bytes[..PAGE_SIZE - 1]).is_none(), "short");
    }

    /// A page of the previous format (2, before the multi-buffer slots), as that kae wrote it:
    /// 184 bytes, version 2. Refused whole (no partial reading of the slots it has).
    #[test]
    fn format_2_page_is_refused() {
        let mut b = vec![0u8; 184];
        b[..8].copy_from_slice(b"KAESTAT\0");
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        b[12..16].copy_from_slice(&4321u32.to_le_bytes());
        b[24..27].copy_from_slice(b"cpu");
        b[176..184].copy_from_slice(&6u64.to_le_bytes()); // hw-faults, the last slot of format 2
        assert!(parse_page(&b).is_none(), "too short for format 3");
        b.resize(PAGE_SIZE, 0);
        assert!(
            parse_page(&b).is_none(),
            "version 2 at the size of format 3"
        );
    }

    /// The format as bytes, written by hand: what kae-stat of an earlier build reads.
    #[test]
    fn page_bytes_are_the_documented_format() {
        assert_eq!(PAGE_SIZE, 208);
        let mut b = vec![0u8; PAGE_SIZE];
        b[..8].copy_from_slice(b"KAESTAT\0");
        b[8..12].copy_from_slice(&3u32.to_le_bytes());
        b[12..16].copy_from_slice(&4321u32.to_le_bytes());
        b[16..24].copy_from_slice(&99u64.to_le_bytes());
        b[24..28].copy_from_slice(b"hpre");
        b[72 + 8 * idx::ASYNC_PAUSES..][..8].copy_from_slice(&5u64.to_le_bytes());
        b[176..184].copy_from_slice(&6u64.to_le_bytes()); // hw-faults, added in format 2
        b[184..192].copy_from_slice(&7u64.to_le_bytes()); // mb-batches, added in format 3
        b[192..200].copy_from_slice(&8u64.to_le_bytes()); // mb-lanes, added in format 3
        b[200..208].copy_from_slice(&9u64.to_le_bytes()); // mb-scalar, added in format 3
        let (pid, start, backend, s) = parse_page(&b).unwrap();
        assert_eq!((pid, start, backend.as_str()), (4321, 99, "hpre"));
        assert_eq!(s.get(idx::ASYNC_PAUSES), 5);
        assert_eq!(s.get(idx::HW_FAULTS), 6);
        assert_eq!(s.get(idx::MB_BATCHES), 7);
        assert_eq!(s.get(idx::MB_LANES), 8);
        assert_eq!(s.get(idx::MB_SCALAR), 9);
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
        a.0[idx::MB_BATCHES] = 1;
        b.0[idx::MB_BATCHES] = 3;
        a.0[idx::MB_LANES] = 8;
        b.0[idx::MB_LANES] = 16;
        let t = total([&a, &b]);
        assert_eq!(t.get(idx::PRIVATE_INLINE), 5);
        assert_eq!(t.get(idx::MB_BATCHES), 4);
        assert_eq!(t.get(idx::MB_LANES), 24);
        assert_eq!(t.mb_lanes_per_batch().as_deref(), Some("6.0"));
        assert_eq!(t.get(idx::QUEUE_HIGH_WATER), 7);
    }

    #[test]
    fn average_lanes_per_batch_has_one_decimal() {
        let avg = |batches: u64, lanes: u64| {
            let mut s = Snapshot::default();
            s.0[idx::MB_BATCHES] = batches;
            s.0[idx::MB_LANES] = lanes;
            s.mb_lanes_per_batch()
        };
        assert_eq!(avg(0, 0), None);
        assert_eq!(avg(0, 5), None, "lanes without a batch (a torn read)");
        assert_eq!(avg(1, 8), Some("8.0".into()));
        assert_eq!(avg(2, 15), Some("7.5".into()));
        assert_eq!(avg(3, 7), Some("2.3".into()));
        assert_eq!(avg(3, 20), Some("6.7".into()));
        assert_eq!(avg(20, 1), Some("0.1".into()), "0.05 rounds up");
        assert_eq!(avg(u64::MAX, u64::MAX), Some("1.0".into()), "no overflow");
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
