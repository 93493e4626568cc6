//! DER writers for the AlgorithmIdentifiers RSA signatures and keys are described with,
//! byte-identical to what OpenSSL's provider encoders emit.

use super::DigestId;

const TAG_SEQUENCE: u8 = 0x30;
const TAG_INTEGER: u8 = 0x02;
const TAG_OID: u8 = 0x06;
const DER_NULL: &[u8] = &[0x05, 0x00];

/// rsaEncryption 1.2.840.113549.1.1.1
pub const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// id-RSAES-OAEP 1.2.840.113549.1.1.7
pub const OID_RSAES_OAEP: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x07];
/// id-mgf1 1.2.840.113549.1.1.8
pub const OID_MGF1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08];
/// id-RSASSA-PSS 1.2.840.113549.1.1.10
pub const OID_RSASSA_PSS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];

/// PSS defaults (RFC 8017 A.2.3): SHA-1, MGF1-SHA-1, 20, trailer 1.
pub const PSS_DEFAULT_SALT_LEN: usize = 20;

/// Appends a DER length.
fn push_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// Tag-length-value.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    push_len(&mut out, content.len());
    out.extend_from_slice(content);
    out
}

fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    tlv(TAG_SEQUENCE, &parts.concat())
}

/// Explicit context-specific tag `[n]` (constructed).
fn explicit(n: u8, content: &[u8]) -> Vec<u8> {
    tlv(0xA0 | n, content)
}

/// DER INTEGER of a non-negative value.
fn integer(v: usize) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let skip = bytes
        .iter()
        .take_while(|&&b| b == 0)
        .count()
        .min(bytes.len() - 1);
    let mut content = Vec::with_capacity(bytes.len() + 1);
    if bytes[skip] & 0x80 != 0 {
        content.push(0);
    }
    content.extend_from_slice(&bytes[skip..]);
    tlv(TAG_INTEGER, &content)
}

/// AlgorithmIdentifier { rsaEncryption, NULL }.
pub fn rsa_encryption() -> Vec<u8> {
    sequence(&[&tlv(TAG_OID, OID_RSA_ENCRYPTION), DER_NULL])
}

/// OID content (without tag and length) of `<digest>WithRSAEncryption`, for the digests
/// OpenSSL's encoder knows.
fn pkcs1_signature_oid(id: DigestId) -> Option<&'static [u8]> {
    const P: [u8; 8] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const S: [u8; 8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03];
    macro_rules! oid {
        ($base:expr, $last:expr) => {{
            const O: [u8; 9] = [
                $base[0], $base[1], $base[2], $base[3], $base[4], $base[5], $base[6], $base[7],
                $last,
            ];
            &O
        }};
    }
    Some(match id {
        DigestId::Md5 => oid!(P, 0x04),
        DigestId::Sha1 => oid!(P, 0x05),
        DigestId::Sha256 => oid!(P, 0x0b),
        DigestId::Sha384 => oid!(P, 0x0c),
        DigestId::Sha512 => oid!(P, 0x0d),
        DigestId::Sha224 => oid!(P, 0x0e),
        DigestId::Sha512_224 => oid!(P, 0x0f),
        DigestId::Sha512_256 => oid!(P, 0x10),
        DigestId::Sha3_224 => oid!(S, 0x0d),
        DigestId::Sha3_256 => oid!(S, 0x0e),
        DigestId::Sha3_384 => oid!(S, 0x0f),
        DigestId::Sha3_512 => oid!(S, 0x10),
        // ripemd160WithRSA 1.3.36.3.3.1.2
        DigestId::Ripemd160 => &[0x2b, 0x24, 0x03, 0x03, 0x01, 0x02],
        DigestId::Md5Sha1 | DigestId::Sm3 => return None,
    })
}

/// AlgorithmIdentifier { <digest>WithRSAEncryption, NULL } for PKCS#1 v1.5 signatures.
/// `None` where OpenSSL has no such identifier (MD5-SHA1, SM3).
pub fn pkcs1_signature_alg_id(id: DigestId) -> Option<Vec<u8>> {
    let oid = pkcs1_signature_oid(id)?;
    Some(sequence(&[&tlv(TAG_OID, oid), DER_NULL]))
}

/// Whether `id` may appear in RSASSA-PSS / RSAES-OAEP parameters as OpenSSL encodes them
/// (OAEP-PSSDigestAlgorithms: SHA-1 and the SHA-2 family).
pub fn is_oaep_pss_digest(id: DigestId) -> bool {
    matches!(
        id,
        DigestId::Sha1
            | DigestId::Sha224
            | DigestId::Sha256
            | DigestId::Sha384
            | DigestId::Sha512
            | DigestId::Sha512_224
            | DigestId::Sha512_256
    )
}

/// HashAlgorithm AlgorithmIdentifier { id-shaX, NULL }.
pub fn hash_alg_id(id: DigestId) -> Option<Vec<u8>> {
    let oid = id.oid_der()?;
    Some(sequence(&[oid, DER_NULL]))
}

/// MaskGenAlgorithm AlgorithmIdentifier { id-mgf1, { id-shaX, NULL } }.
pub fn mgf1_alg_id(id: DigestId) -> Option<Vec<u8>> {
    Some(sequence(&[&tlv(TAG_OID, OID_MGF1), &hash_alg_id(id)?]))
}

/// RSASSA-PSS-params with fields equal to their DEFAULT omitted.
/// `None` for digests outside SHA-1/SHA-2 (OpenSSL's encoder refuses those too).
pub fn pss_params(hash: DigestId, mgf1_hash: DigestId, salt_len: usize) -> Option<Vec<u8>> {
    if !is_oaep_pss_digest(hash) || !is_oaep_pss_digest(mgf1_hash) {
        return None;
    }
    let mut content = Vec::new();
    if hash != DigestId::Sha1 {
        content.extend(explicit(0, &hash_alg_id(hash)?));
    }
    if mgf1_hash != DigestId::Sha1 {
        content.extend(explicit(1, &mgf1_alg_id(mgf1_hash)?));
    }
    if salt_len != PSS_DEFAULT_SALT_LEN {
        content.extend(explicit(2, &integer(salt_len)));
    }
    // trailerField is always 1 (trailerFieldBC), the default: omitted.
    Some(tlv(TAG_SEQUENCE, &content))
}

/// AlgorithmIdentifier { id-RSASSA-PSS, RSASSA-PSS-params }, exactly as OpenSSL encodes it.
/// `None` for digests outside SHA-1/SHA-2, which OpenSSL's encoder refuses.
pub fn try_pss_alg_id(hash: DigestId, mgf1_hash: DigestId, salt_len: usize) -> Option<Vec<u8>> {
    let params = pss_params(hash, mgf1_hash, salt_len)?;
    Some(sequence(&[&tlv(TAG_OID, OID_RSASSA_PSS), &params]))
}

/// AlgorithmIdentifier { id-RSASSA-PSS, RSASSA-PSS-params }.
///
/// For SHA-1/SHA-2 this is [`try_pss_alg_id`] (OpenSSL's bytes). Other digests, which
/// OpenSSL refuses to describe, get the same structure with `{ OID, NULL }` hash
/// identifiers; a digest without an OID (MD5-SHA1) gives the parameterless form.
pub fn pss_alg_id(hash: DigestId, mgf1_hash: DigestId, salt_len: usize) -> Vec<u8> {
    if let Some(v) = try_pss_alg_id(hash, mgf1_hash, salt_len) {
        return v;
    }
    let (Some(h), Some(m)) = (hash_alg_id(hash), mgf1_alg_id(mgf1_hash)) else {
        return pss_alg_id_unrestricted();
    };
    let mut content = Vec::new();
    if hash != DigestId::Sha1 {
        content.extend(explicit(0, &h));
    }
    if mgf1_hash != DigestId::Sha1 {
        content.extend(explicit(1, &m));
    }
    if salt_len != PSS_DEFAULT_SALT_LEN {
        content.extend(explicit(2, &integer(salt_len)));
    }
    sequence(&[&tlv(TAG_OID, OID_RSASSA_PSS), &tlv(TAG_SEQUENCE, &content)])
}

/// AlgorithmIdentifier { id-RSASSA-PSS } with no parameters (an unrestricted RSA-PSS key).
pub fn pss_alg_id_unrestricted() -> Vec<u8> {
    sequence(&[&tlv(TAG_OID, OID_RSASSA_PSS)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rsa::padding::testutil::*;

    #[test]
    fn primitives() {
        assert_eq!(integer(0), [0x02, 0x01, 0x00]);
        assert_eq!(integer(20), [0x02, 0x01, 0x14]);
        assert_eq!(integer(127), [0x02, 0x01, 0x7f]);
        assert_eq!(integer(128), [0x02, 0x02, 0x00, 0x80]);
        assert_eq!(integer(222), [0x02, 0x02, 0x00, 0xde]);
        assert_eq!(integer(256), [0x02, 0x02, 0x01, 0x00]);
        assert_eq!(integer(0x8000), [0x02, 0x03, 0x00, 0x80, 0x00]);
        let long = tlv(0x04, &[0u8; 200]);
        assert_eq!(&long[..3], &[0x04, 0x81, 200]);
        let longer = tlv(0x04, &[0u8; 300]);
        assert_eq!(&longer[..4], &[0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(rsa_encryption(), hex("300d06092a864886f70d0101010500"));
    }

    #[test]
    fn pkcs1_known_answers() {
        assert_eq!(
            pkcs1_signature_alg_id(DigestId::Sha256).unwrap(),
            hex("300d06092a864886f70d01010b0500")
        );
        assert_eq!(
            pkcs1_signature_alg_id(DigestId::Sha1).unwrap(),
            hex("300d06092a864886f70d0101050500")
        );
        assert_eq!(
            pkcs1_signature_alg_id(DigestId::Sha3_256).unwrap(),
            hex("300d060960864801650304030e0500")
        );
        assert_eq!(
            pkcs1_signature_alg_id(DigestId::Ripemd160).unwrap(),
            hex("300a06062b24030301020500")
        );
        assert_eq!(pkcs1_signature_alg_id(DigestId::Md5Sha1), None);
        assert_eq!(pkcs1_signature_alg_id(DigestId::Sm3), None);
    }

    /// Every identifier must name the right algorithm to OpenSSL's OID table.
    #[test]
    fn pkcs1_oids_resolve_in_openssl() {
        use openssl::nid::Nid;
        let expect = [
            (DigestId::Md5, Nid::MD5WITHRSAENCRYPTION),
            (DigestId::Sha1, Nid::SHA1WITHRSAENCRYPTION),
            (DigestId::Sha224, Nid::SHA224WITHRSAENCRYPTION),
            (DigestId::Sha256, Nid::SHA256WITHRSAENCRYPTION),
            (DigestId::Sha384, Nid::SHA384WITHRSAENCRYPTION),
            (DigestId::Sha512, Nid::SHA512WITHRSAENCRYPTION),
        ];
        for (id, nid) in expect {
            let der = pkcs1_signature_alg_id(id).unwrap();
            let oid = &der[4..4 + der[3] as usize];
            let dotted = dotted(oid);
            let obj = openssl::asn1::Asn1Object::from_str(&dotted).unwrap();
            assert_eq!(obj.nid(), nid, "{id:?}");
        }
        for (id, name) in [
            (DigestId::Sha512_224, "sha512-224WithRSAEncryption"),
            (DigestId::Sha512_256, "sha512-256WithRSAEncryption"),
            (DigestId::Sha3_224, "id-rsassa-pkcs1-v1_5-with-sha3-224"),
            (DigestId::Sha3_512, "id-rsassa-pkcs1-v1_5-with-sha3-512"),
            (DigestId::Ripemd160, "ripemd160WithRSA"),
        ] {
            let der = pkcs1_signature_alg_id(id).unwrap();
            let oid = &der[4..4 + der[3] as usize];
            let obj = openssl::asn1::Asn1Object::from_str(&dotted(oid)).unwrap();
            let nid = obj.nid();
            assert!(
                nid.long_name().unwrap() == name || nid.short_name().unwrap() == name,
                "{id:?}"
            );
        }
    }

    fn dotted(oid: &[u8]) -> String {
        let mut arcs = vec![(oid[0] / 40) as u64, (oid[0] % 40) as u64];
        let mut v = 0u64;
        for &b in &oid[1..] {
            v = (v << 7) | u64::from(b & 0x7f);
            if b & 0x80 == 0 {
                arcs.push(v);
                v = 0;
            }
        }
        arcs.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The AlgorithmIdentifier OpenSSL 3 puts into an X.509 certificate it signs must
    /// match ours byte for byte.
    #[test]
    fn pkcs1_matches_openssl_certificate_signing() {
        use openssl::pkey::PKey;
        use openssl::x509::X509Builder;
        let pkey = PKey::from_rsa(gen_key(1024)).unwrap();
        for id in [
            DigestId::Md5,
            DigestId::Sha1,
            DigestId::Sha224,
            DigestId::Sha256,
            DigestId::Sha384,
            DigestId::Sha512,
            DigestId::Sha512_224,
            DigestId::Sha512_256,
            DigestId::Sha3_224,
            DigestId::Sha3_256,
            DigestId::Sha3_384,
            DigestId::Sha3_512,
            DigestId::Ripemd160,
        ] {
            let mut b = X509Builder::new().unwrap();
            b.set_pubkey(&pkey).unwrap();
            if let Err(e) = b.sign(&pkey, md(id)) {
                // OpenSSL 3.0's ASN1_item_sign has no signature-OID pairing for the
                // truncated SHA-512 variants; the others must work.
                assert!(
                    matches!(id, DigestId::Sha512_224 | DigestId::Sha512_256),
                    "{id:?}: {e}"
                );
                continue;
            }
            let cert = b.build().to_der().unwrap();
            let ours = pkcs1_signature_alg_id(id).unwrap();
            let count = cert.windows(ours.len()).filter(|w| *w == &ours[..]).count();
            assert_eq!(
                count, 2,
                "{id:?}: signature AlgorithmIdentifier appears in tbs and outer cert"
            );
        }
    }

    #[test]
    fn pss_known_answers() {
        // All defaults: empty params.
        assert_eq!(
            pss_alg_id(DigestId::Sha1, DigestId::Sha1, 20),
            hex("300d06092a864886f70d01010a3000")
        );
        assert_eq!(pss_alg_id_unrestricted(), hex("300b06092a864886f70d01010a"));
        // Only the salt differs.
        assert_eq!(
            pss_alg_id(DigestId::Sha1, DigestId::Sha1, 0),
            hex("301206092a864886f70d01010a3005a203020100")
        );
        assert_eq!(
            pss_alg_id(DigestId::Sha256, DigestId::Sha256, 32),
            hex(SHA256_SHA256_32)
        );
        assert_eq!(
            try_pss_alg_id(DigestId::Sha3_256, DigestId::Sha256, 32),
            None
        );
        assert_eq!(try_pss_alg_id(DigestId::Sha256, DigestId::Md5, 32), None);
        // Fallback for digests OpenSSL will not describe.
        assert_eq!(
            pss_alg_id(DigestId::Sha3_256, DigestId::Sha3_256, 32),
            hex("304106092a864886f70d01010a3034a00f300d06096086480165030402080500a11c301a06092a864886f70d010108300d06096086480165030402080500a203020120")
        );
        assert_eq!(
            pss_alg_id(DigestId::Md5Sha1, DigestId::Sha1, 20),
            pss_alg_id_unrestricted()
        );
        assert_eq!(
            mgf1_alg_id(DigestId::Sha256).unwrap(),
            hex("301a06092a864886f70d010108300d06096086480165030402010500")
        );
        assert_eq!(
            hash_alg_id(DigestId::Sha1).unwrap(),
            hex("300906052b0e03021a0500")
        );
        assert!(is_oaep_pss_digest(DigestId::Sha512_256));
        assert!(!is_oaep_pss_digest(DigestId::Sha3_256));
    }

    // Produced by OpenSSL 3.0.19: the outer signatureAlgorithm of certificates made with
    // `openssl req -x509 -<md> -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:<n>
    // -sigopt rsa_mgf1_md:<mgf1>`.
    const SHA256_SHA256_32: &str = "304106092a864886f70d01010a3034a00f300d06096086480165030402010500a11c301a06092a864886f70d010108300d06096086480165030402010500a203020120";

    #[test]
    fn pss_matches_openssl_cli_output() {
        let cases: &[(DigestId, DigestId, usize, &str)] = &[
            (DigestId::Sha256, DigestId::Sha256, 32, SHA256_SHA256_32),
            (DigestId::Sha1, DigestId::Sha1, 20, "300d06092a864886f70d01010a3000"),
            (DigestId::Sha1, DigestId::Sha1, 0, "301206092a864886f70d01010a3005a203020100"),
            (DigestId::Sha384, DigestId::Sha1, 48, "302306092a864886f70d01010a3016a00f300d06096086480165030402020500a203020130"),
            (DigestId::Sha512, DigestId::Sha256, 190, "304206092a864886f70d01010a3035a00f300d06096086480165030402030500a11c301a06092a864886f70d010108300d06096086480165030402010500a204020200be"),
            (DigestId::Sha224, DigestId::Sha512, 20, "303c06092a864886f70d01010a302fa00f300d06096086480165030402040500a11c301a06092a864886f70d010108300d06096086480165030402030500"),
            (DigestId::Sha512_256, DigestId::Sha512_224, 5, "304106092a864886f70d01010a3034a00f300d06096086480165030402060500a11c301a06092a864886f70d010108300d06096086480165030402050500a203020105"),
            (DigestId::Sha1, DigestId::Sha256, 20, "302b06092a864886f70d01010a301ea11c301a06092a864886f70d010108300d06096086480165030402010500"),
            (DigestId::Sha256, DigestId::Sha1, 128, "302406092a864886f70d01010a3017a00f300d06096086480165030402010500a20402020080"),
        ];
        for &(h, m, s, expect) in cases {
            assert_eq!(pss_alg_id(h, m, s), hex(expect), "{h:?} {m:?} {s}");
            assert_eq!(try_pss_alg_id(h, m, s).unwrap(), hex(expect));
        }
    }
}
