//! The AVX-512 IFMA instantiation of the multi-buffer kernel (`kae::mb`), callable in
//! isolation so `scripts/ifma-emulate.py` can run its compiled code under an x86-64 emulator
//! with AVX-512 IFMA (BochsCPU) on a machine without it, and compare the result with the
//! portable instantiation bit for bit.
//!
//! - [`kae_ifma_emulate_entry`]: a plain C-ABI function the emulator calls: it runs
//!   `kae::mb::exp_ifma_interleaved` on caller buffers and touches nothing else.
//! - `--write DIR`: writes the cases (`DIR/manifest.json`, one `DIR/<name>.bin` each: modulus,
//!   base, exponent and the portable engine's result, interleaved as the kernel takes them),
//!   after checking every portable result against num-bigint.
//! - `--native DIR`: runs the entry natively on those cases (a CPU with IFMA only).
//!
//! Usage: ifma_emulate --write DIR [--seed N] | --native DIR

use kae::mb::{self, Size, LANES};
use num_bigint::BigUint;
use std::fs;
use std::path::Path;
use std::process::ExitCode;

/// `out = base^exp mod m` in each of the eight lanes, on the IFMA kernel. Layout: `m`, `base`,
/// `out`: `limbs` rows of eight u64 (limb j of lane l at `[j * 8 + l]`, 52-bit limbs); `exp`:
/// `max(1, ceil(exp_bits / 64))` rows of eight 64-bit words. Returns 0.
///
/// # Safety
/// Valid buffers of those sizes; the (possibly emulated) CPU has AVX-512F and IFMA; every
/// lane's modulus is odd and above 1.
#[no_mangle]
#[inline(never)]
pub unsafe extern "C" fn kae_ifma_emulate_entry(
    m: *const u64,
    base: *const u64,
    exp: *const u64,
    exp_bits: usize,
    out: *mut u64,
    limbs: usize,
) -> u64 {
    let exp_rows = exp_bits.div_ceil(64).max(1);
    // SAFETY: the caller's promise; [u64; 8] has the alignment of u64.
    unsafe {
        let m = std::slice::from_raw_parts(m.cast::<[u64; LANES]>(), limbs);
        let base = std::slice::from_raw_parts(base.cast::<[u64; LANES]>(), limbs);
        let exp = std::slice::from_raw_parts(exp.cast::<[u64; LANES]>(), exp_rows);
        let out = std::slice::from_raw_parts_mut(out.cast::<[u64; LANES]>(), limbs);
        mb::exp_ifma_interleaved(m, base, exp, exp_bits, out);
    }
    0
}

/// One single-number Montgomery product (`mb::mont1`, the IFMA path of `ct_limbs`):
/// `t` (words + 1 words) = a·b·2^(−64·words) + (0 or m), for `m`, `a`, `b` of `words` words and
/// n0 = −m⁻¹ mod 2^64. Returns 0, or 1 when the width is not supported.
///
/// # Safety
/// Valid buffers of those sizes; the (possibly emulated) CPU has AVX-512F and IFMA; m is odd,
/// a < 2^(64·words), b < m.
#[no_mangle]
#[inline(never)]
pub unsafe extern "C" fn kae_ifma_emulate_mont1(
    m: *const u64,
    a: *const u64,
    b: *const u64,
    n0: u64,
    t: *mut u64,
    words: usize,
) -> u64 {
    // SAFETY: the caller's promise.
    unsafe {
        let m = std::slice::from_raw_parts(m, words);
        let a = std::slice::from_raw_parts(a, words);
        let b = std::slice::from_raw_parts(b, words);
        let t = std::slice::from_raw_parts_mut(t, words + 1);
        u64::from(!mb::mont1_product_assumed(m, n0, a, b, t))
    }
}

/// Widths (64-bit words) of the single-number product cases: every r = 64w mod 52 class
/// the RSA sizes use, the smallest and the largest.
const MONT1_WORDS: [usize; 11] = [1, 2, 7, 13, 16, 24, 26, 32, 48, 63, 64];

/// Products per width: random ones and the edges (a = 2^(64w) − 1, b = m − 1; a = b = m − 1).
const MONT1_PER_WIDTH: usize = 6;

/// One product case: m, n0, a, b and the expected t, as the words the entry reads and writes.
fn mont1_case(g: &mut Xs, w: usize, i: usize) -> Vec<u64> {
    let bits = 64 * w;
    let m = if i % 2 == 1 {
        g.odd_modulus(bits - 7)
    } else {
        g.odd_modulus(bits)
    };
    let r = BigUint::from(1u8) << bits;
    let (a, b) = match i {
        4 => (&r - 1u8, &m - 1u8),
        5 => (&m - 1u8, &m - 1u8),
        _ => (g.below_bits(bits), g.below_bits(bits) % &m),
    };
    // t = (a·b + Q·m)/R with Q = −a·b·m⁻¹ mod R: the one Q < R both products use.
    let minv = m.modinv(&r).expect("odd modulus");
    let q = (&r - (&a * &b * &minv) % &r) % &r;
    let t = (&a * &b + &q * &m) >> bits;
    let two64 = BigUint::from(1u8) << 64;
    let n0 = limbs_of(&((&two64 - (&minv % &two64)) % &two64), 64, 1)[0];
    let mut v = limbs_of(&m, 64, w);
    v.push(n0);
    v.extend(limbs_of(&a, 64, w));
    v.extend(limbs_of(&b, 64, w));
    v.extend(limbs_of(&t, 64, w + 1));
    v
}

/// Runs [`kae_ifma_emulate_mont1`] on one case's words; true when t is the expected one.
fn mont1_native(w: usize, case: &[u64]) -> bool {
    let (m, rest) = case.split_at(w);
    let (n0, rest) = rest.split_at(1);
    let (a, rest) = rest.split_at(w);
    let (b, want) = rest.split_at(w);
    let mut t = vec![0u64; w + 1];
    // SAFETY: buffers of the documented sizes; the caller checked ifma_available().
    let rc = unsafe {
        kae_ifma_emulate_mont1(m.as_ptr(), a.as_ptr(), b.as_ptr(), n0[0], t.as_mut_ptr(), w)
    };
    rc == 0 && t == want
}

struct Xs(u64);
impl Xs {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below_bits(&mut self, bits: usize) -> BigUint {
        let v: Vec<u32> = (0..bits.div_ceil(32)).map(|_| self.next() as u32).collect();
        BigUint::new(v) % (BigUint::from(1u8) << bits)
    }
    fn odd_modulus(&mut self, bits: usize) -> BigUint {
        let mut m = self.below_bits(bits);
        m.set_bit(bits as u64 - 1, true);
        m.set_bit(0, true);
        m
    }
}

/// `x` as `count` little-endian limbs of `width` bits.
fn limbs_of(x: &BigUint, width: u64, count: usize) -> Vec<u64> {
    assert!(x.bits() <= width * count as u64, "value too wide");
    (0..count)
        .map(|j| {
            (0..width).fold(0u64, |acc, b| {
                acc | (u64::from(x.bit(j as u64 * width + b)) << b)
            })
        })
        .collect()
}

fn from_limbs(limbs: &[u64], width: u64) -> BigUint {
    limbs
        .iter()
        .rev()
        .fold(BigUint::ZERO, |acc, &l| (acc << width) + l)
}

/// Lane-major values to the interleaved rows the kernel takes.
fn interleave(vals: &[Vec<u64>]) -> Vec<[u64; LANES]> {
    (0..vals[0].len())
        .map(|j| std::array::from_fn(|l| vals[l][j]))
        .collect()
}

struct Case {
    name: String,
    size: Size,
    exp_bits: usize,
    lanes: Vec<(BigUint, BigUint, BigUint)>, // (m, b, e)
}

fn cases(seed: u64) -> Vec<Case> {
    let mut g = Xs(seed | 1);
    let mut v = Vec::new();
    for size in Size::ALL {
        let bits = size.bits();
        // Eight different odd moduli (lanes 6 and 7 narrower than the class, lane 5's base
        // not reduced), full-size exponents.
        let lanes = (0..8)
            .map(|i| {
                let mbits = if i >= 6 { bits - 1 - 13 * i } else { bits };
                let m = g.odd_modulus(mbits);
                let b = if i == 5 {
                    g.below_bits(bits)
                } else {
                    g.below_bits(bits) % &m
                };
                (m, b, g.below_bits(bits))
            })
            .collect();
        v.push(Case {
            name: format!("random-{bits}"),
            size,
            exp_bits: bits,
            lanes,
        });
    }
    // Small public exponents (exp_bits 17), and the edge values, on the smallest and
    // largest sizes.
    for size in [Size::B512, Size::B2048] {
        let bits = size.bits();
        let lanes = (0..8)
            .map(|i| {
                let m = g.odd_modulus(bits);
                let b = g.below_bits(bits) % &m;
                (m, b, BigUint::from([65537u32, 3, 17][i % 3]))
            })
            .collect();
        v.push(Case {
            name: format!("e65537-{bits}"),
            size,
            exp_bits: 17,
            lanes,
        });
    }
    let size = Size::B512;
    let bits = size.bits();
    let one = BigUint::from(1u8);
    let all_ones = (&one << bits) - 1u8;
    let top_only = (&one << (bits - 1)) + 1u8;
    let m = g.odd_modulus(bits);
    let e = g.below_bits(bits);
    let lanes = vec![
        (m.clone(), BigUint::ZERO, e.clone()),
        (m.clone(), one.clone(), e.clone()),
        (m.clone(), &m - 1u8, e.clone()),
        (all_ones.clone(), &all_ones - 2u8, e.clone()),
        (top_only.clone(), &top_only - 1u8, e.clone()),
        (m.clone(), g.below_bits(bits) % &m, BigUint::ZERO),
        (m.clone(), g.below_bits(bits) % &m, one.clone()),
        (top_only.clone(), &all_ones >> 1, all_ones.clone()),
    ];
    v.push(Case {
        name: format!("edge-{bits}"),
        size,
        exp_bits: bits,
        lanes,
    });
    v
}

/// The interleaved inputs of a case: (m, base, exp), as the entry takes them.
fn inputs(c: &Case) -> [Vec<[u64; LANES]>; 3] {
    let n = c.size.limbs52();
    let ew = c.exp_bits.div_ceil(64).max(1);
    let col = |f: &dyn Fn(&(BigUint, BigUint, BigUint)) -> Vec<u64>| {
        interleave(&c.lanes.iter().map(f).collect::<Vec<_>>())
    };
    [
        col(&|l| limbs_of(&l.0, 52, n)),
        col(&|l| limbs_of(&l.1, 52, n)),
        col(&|l| limbs_of(&l.2, 64, ew)),
    ]
}

fn bytes(rows: &[[u64; LANES]]) -> Vec<u8> {
    rows.iter()
        .flatten()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

fn rows(bytes: &[u8]) -> Vec<[u64; LANES]> {
    bytes
        .chunks_exact(8 * LANES)
        .map(|r| {
            std::array::from_fn(|l| u64::from_le_bytes(r[8 * l..8 * l + 8].try_into().unwrap()))
        })
        .collect()
}

fn write(dir: &Path, seed: u64) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut manifest = Vec::new();
    for c in cases(seed) {
        let n = c.size.limbs52();
        let [m, b, e] = inputs(&c);
        let mut out = vec![[0u64; LANES]; n];
        mb::exp_portable_interleaved(&m, &b, &e, c.exp_bits, &mut out);
        // The reference must itself be right: each lane against num-bigint.
        for (l, (lm, lb, le)) in c.lanes.iter().enumerate() {
            let got = from_limbs(&out.iter().map(|r| r[l]).collect::<Vec<_>>(), 52);
            if got != lb.modpow(le, lm) {
                return Err(format!(
                    "{}: portable lane {l} differs from num-bigint",
                    c.name
                ));
            }
        }
        let mut blob = bytes(&m);
        blob.extend(bytes(&b));
        blob.extend(bytes(&e));
        blob.extend(bytes(&out));
        let file = format!("{}.bin", c.name);
        fs::write(dir.join(&file), blob).map_err(|e| format!("{file}: {e}"))?;
        manifest.push(serde_json::json!({
            "name": c.name,
            "bits": c.size.bits(),
            "limbs": n,
            "exp_bits": c.exp_bits,
            "exp_rows": e.len(),
            "file": file,
        }));
    }
    let mut g = Xs(seed ^ 0x006d_6f6e_7431);
    for w in MONT1_WORDS {
        let words: Vec<u64> = (0..MONT1_PER_WIDTH)
            .flat_map(|i| mont1_case(&mut g, w, i))
            .collect();
        let file = format!("mont1-{}.bin", 64 * w);
        let blob: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
        fs::write(dir.join(&file), blob).map_err(|e| format!("{file}: {e}"))?;
        manifest.push(serde_json::json!({
            "name": format!("mont1-{}", 64 * w),
            "kind": "mont1",
            "bits": 64 * w,
            "words": w,
            "count": MONT1_PER_WIDTH,
            "file": file,
        }));
    }
    let doc = serde_json::json!({ "seed": seed, "lanes": LANES, "cases": manifest });
    fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&doc).unwrap(),
    )
    .map_err(|e| format!("manifest.json: {e}"))
}

/// Runs the entry natively on the written cases (what the emulator does, on a real CPU).
fn native(dir: &Path) -> Result<bool, String> {
    if !mb::ifma_available() {
        return Err(format!(
            "--native: {}",
            mb::ifma_missing_reason().unwrap_or_default()
        ));
    }
    let text = fs::read_to_string(dir.join("manifest.json")).map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut all = true;
    for c in doc["cases"].as_array().ok_or("manifest: no cases")? {
        if c["kind"] == "mont1" {
            let w = c["words"].as_u64().unwrap() as usize;
            let blob =
                fs::read(dir.join(c["file"].as_str().unwrap())).map_err(|e| e.to_string())?;
            let words: Vec<u64> = blob
                .chunks_exact(8)
                .map(|x| u64::from_le_bytes(x.try_into().unwrap()))
                .collect();
            let ok = words
                .chunks_exact(4 * w + 2)
                .all(|case| mont1_native(w, case));
            all &= ok;
            println!(
                "{}: {}",
                c["name"].as_str().unwrap(),
                if ok { "PASS" } else { "FAIL" }
            );
            continue;
        }
        let n = c["limbs"].as_u64().unwrap() as usize;
        let er = c["exp_rows"].as_u64().unwrap() as usize;
        let exp_bits = c["exp_bits"].as_u64().unwrap() as usize;
        let blob = fs::read(dir.join(c["file"].as_str().unwrap())).map_err(|e| e.to_string())?;
        let r = rows(&blob);
        let (m, rest) = r.split_at(n);
        let (b, rest) = rest.split_at(n);
        let (e, want) = rest.split_at(er);
        let mut out = vec![[0u64; LANES]; n];
        // SAFETY: buffers of the documented sizes; ifma_available() said yes.
        unsafe {
            kae_ifma_emulate_entry(
                m.as_ptr().cast(),
                b.as_ptr().cast(),
                e.as_ptr().cast(),
                exp_bits,
                out.as_mut_ptr().cast(),
                n,
            );
        }
        let ok = out == want;
        all &= ok;
        println!(
            "{}: {}",
            c["name"].as_str().unwrap(),
            if ok { "PASS" } else { "FAIL" }
        );
    }
    Ok(all)
}

fn main() -> ExitCode {
    // Keeps the entry in the binary whatever the optimiser thinks of `native`.
    std::hint::black_box(kae_ifma_emulate_entry as unsafe extern "C" fn(_, _, _, _, _, _) -> _);
    std::hint::black_box(kae_ifma_emulate_mont1 as unsafe extern "C" fn(_, _, _, _, _, _) -> _);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ifma_emulate --write DIR [--seed N] | --native DIR\n\
                 (run by scripts/ifma-emulate.sh)";
    let r = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["-h" | "--help"] => {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        ["--write", dir] => write(Path::new(dir), 0x9E37_79B9_7F4A_7C15).map(|_| true),
        ["--write", dir, "--seed", s] => match s.parse::<u64>() {
            Ok(seed) => write(Path::new(dir), seed).map(|_| true),
            Err(_) => Err("--seed needs a number".into()),
        },
        ["--native", dir] => native(Path::new(dir)),
        _ => Err(usage.into()),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ifma_emulate: {e}");
            ExitCode::from(2)
        }
    }
}
