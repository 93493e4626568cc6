//! Just enough DER to find a certificate's public key.

/// One DER TLV at the start of `b`: (tag, contents, rest).
pub fn der_tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&l0, b) = b.split_first()?;
    let (len, b) = if l0 < 0x80 {
        (l0 as usize, b)
    } else {
        let n = (l0 & 0x7f) as usize;
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n].iter().fold(0usize, |a, &x| (a << 8) | x as usize);
        (len, &b[n..])
    };
    if b.len() < len {
        return None;
    }
    Some((tag, &b[..len], &b[len..]))
}

/// The subjectPublicKey bits (e.g. the RSAPublicKey DER) of a certificate.
pub fn cert_public_key(cert: &[u8]) -> Option<&[u8]> {
    let (0x30, certificate, _) = der_tlv(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = der_tlv(certificate)? else {
        return None;
    };
    let mut rest = tbs;
    let (tag, _, r) = der_tlv(rest)?;
    if tag == 0xa0 {
        rest = r; // [0] EXPLICIT version (absent in v1 certificates)
    }
    // serialNumber, signature, issuer, validity, subject
    for _ in 0..5 {
        rest = der_tlv(rest)?.2;
    }
    let (0x30, spki, _) = der_tlv(rest)? else {
        return None;
    };
    let (0x30, _alg, r) = der_tlv(spki)? else {
        return None;
    };
    let (0x03, bits, _) = der_tlv(r)? else {
        return None;
    };
    let (&unused, key) = bits.split_first()?;
    (unused == 0).then_some(key)
}
