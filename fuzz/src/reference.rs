//! Plain decoders written straight from the specifications (RFC 8017 §7.1.2, §7.2.2,
//! §9.2; ANSI X9.31 as OpenSSL applies it; RFC 5246 §7.4.7.1). They branch freely: they
//! only tell the targets what kae's constant-time decoders must answer.

use kae::rsa::padding::Hasher;

/// PKCS#1 v1.5 block type 1: 00 01 FF{≥8} 00 M.
pub fn type1(em: &[u8]) -> Option<&[u8]> {
    if em.len() < 11 || em[0] != 0 || em[1] != 1 {
        return None;
    }
    let mut i = 2;
    while i < em.len() && em[i] == 0xFF {
        i += 1;
    }
    if i == em.len() || em[i] != 0 || i - 2 < 8 {
        return None;
    }
    Some(&em[i + 1..])
}

/// PKCS#1 v1.5 block type 2: 00 02 PS(nonzero, ≥8) 00 M.
pub fn type2(em: &[u8]) -> Option<&[u8]> {
    if em.len() < 11 || em[0] != 0 || em[1] != 2 {
        return None;
    }
    let sep = em[2..].iter().position(|&b| b == 0)? + 2;
    if sep - 2 < 8 {
        return None;
    }
    Some(&em[sep + 1..])
}

/// MGF1 with a 4-byte big-endian counter.
pub fn mgf1(h: &dyn Hasher, seed: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut c: u32 = 0;
    while out.len() < len {
        let mut block = vec![0u8; h.output_len()];
        h.hash(&[seed, &c.to_be_bytes()], &mut block).expect("hash");
        out.extend_from_slice(&block);
        c += 1;
    }
    out.truncate(len);
    out
}

/// EME-OAEP decoding.
pub fn oaep(h: &dyn Hasher, mgf: &dyn Hasher, label: &[u8], em: &[u8]) -> Option<Vec<u8>> {
    let hlen = h.output_len();
    let k = em.len();
    if k < 2 * hlen + 2 {
        return None;
    }
    let (masked_seed, masked_db) = em[1..].split_at(hlen);
    let seed: Vec<u8> = masked_seed
        .iter()
        .zip(mgf1(mgf, masked_db, hlen))
        .map(|(a, b)| a ^ b)
        .collect();
    let db: Vec<u8> = masked_db
        .iter()
        .zip(mgf1(mgf, &seed, masked_db.len()))
        .map(|(a, b)| a ^ b)
        .collect();
    let mut lhash = vec![0u8; hlen];
    h.hash(&[label], &mut lhash).expect("hash");
    if em[0] != 0 || db[..hlen] != lhash[..] {
        return None;
    }
    let rest = &db[hlen..];
    let one = rest.iter().position(|&b| b != 0)?;
    if rest[one] != 1 {
        return None;
    }
    Some(rest[one + 1..].to_vec())
}

/// X9.31: 6A D CC, or 6B BB{≥1} BA D CC.
pub fn x931(em: &[u8]) -> Option<&[u8]> {
    let k = em.len();
    if k < 2 || em[k - 1] != 0xCC {
        return None;
    }
    match em[0] {
        0x6A => Some(&em[1..k - 1]),
        0x6B => {
            let mut i = 1;
            while i < k - 1 && em[i] == 0xBB {
                i += 1;
            }
            if i == 1 || i >= k - 1 || em[i] != 0xBA {
                return None;
            }
            Some(&em[i + 1..k - 1])
        }
        _ => None,
    }
}

/// TLS premaster: a type-2 block whose message is 48 bytes starting with an accepted version.
pub fn tls_premaster(em: &[u8], client: u16, negotiated: Option<u16>) -> Option<&[u8]> {
    let m = type2(em)?;
    if m.len() != 48 {
        return None;
    }
    let v = u16::from_be_bytes([m[0], m[1]]);
    if v == client || negotiated.is_some_and(|n| n != 0 && v == n) {
        Some(m)
    } else {
        None
    }
}

/// EMSA-PSS-VERIFY (RFC 8017 §9.1.2) on a k-byte block for a `mod_bits`-bit modulus;
/// `salt_len` None accepts any salt length. Returns the salt length.
pub fn pss(
    h: &dyn Hasher,
    mgf: &dyn Hasher,
    m_hash: &[u8],
    mod_bits: usize,
    salt_len: Option<usize>,
    em: &[u8],
) -> Option<usize> {
    let hlen = h.output_len();
    let em_bits = mod_bits.checked_sub(1)?;
    let em_len = em_bits.div_ceil(8);
    if em.len() != mod_bits.div_ceil(8) {
        return None;
    }
    let em = if em.len() > em_len {
        if em[0] != 0 {
            return None;
        }
        &em[1..]
    } else {
        em
    };
    if em_len < hlen + salt_len.unwrap_or(0) + 2 || em[em_len - 1] != 0xBC {
        return None;
    }
    let db_len = em_len - hlen - 1;
    let (masked_db, rest) = em.split_at(db_len);
    let hh = &rest[..hlen];
    let unused = 8 * em_len - em_bits; // leftmost bits of EM that must be zero
    if unused > 0 && masked_db[0] >> (8 - unused) != 0 {
        return None;
    }
    let mut db: Vec<u8> = masked_db
        .iter()
        .zip(mgf1(mgf, hh, db_len))
        .map(|(a, b)| a ^ b)
        .collect();
    if unused > 0 {
        db[0] &= 0xFF >> unused;
    }
    let one = db.iter().position(|&b| b != 0)?;
    if db[one] != 1 {
        return None;
    }
    let salt = &db[one + 1..];
    if salt_len.is_some_and(|s| s != salt.len()) {
        return None;
    }
    let mut h2 = vec![0u8; hlen];
    h.hash(&[&[0u8; 8], m_hash, salt], &mut h2).expect("hash");
    (h2 == hh).then_some(salt.len())
}
