//! The digests the padding code knows: names, sizes, OIDs, DigestInfo prefixes and
//! X9.31 hash identifiers.

/// A digest algorithm usable with RSA padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestId {
    Md5,
    Sha1,
    /// The 36-byte MD5 || SHA-1 concatenation used by TLS ≤ 1.1 (no OID, no DigestInfo).
    Md5Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Sha512_224,
    Sha512_256,
    Sha3_224,
    Sha3_256,
    Sha3_384,
    Sha3_512,
    Ripemd160,
    Sm3,
}

// DER of the OBJECT IDENTIFIERs (tag, length, content).
const OID_MD5: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x05];
const OID_SHA1: &[u8] = &[0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a];
const OID_SHA224: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04,
];
const OID_SHA256: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01,
];
const OID_SHA384: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02,
];
const OID_SHA512: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03,
];
const OID_SHA512_224: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x05,
];
const OID_SHA512_256: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x06,
];
const OID_SHA3_224: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x07,
];
const OID_SHA3_256: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x08,
];
const OID_SHA3_384: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x09,
];
const OID_SHA3_512: &[u8] = &[
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x0a,
];
const OID_RIPEMD160: &[u8] = &[0x06, 0x05, 0x2b, 0x24, 0x03, 0x02, 0x01];
const OID_SM3: &[u8] = &[0x06, 0x08, 0x2a, 0x81, 0x1c, 0xcf, 0x55, 0x01, 0x83, 0x11];

// DigestInfo prefixes: SEQUENCE { SEQUENCE { OID, NULL }, OCTET STRING (hlen) } up to and
// including the OCTET STRING header; the digest value follows.
const DI_MD5: &[u8] = &[
    0x30, 0x20, 0x30, 0x0c, 0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x05, 0x05, 0x00,
    0x04, 0x10,
];
const DI_SHA1: &[u8] = &[
    0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14,
];
const DI_SHA224: &[u8] = &[
    0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04, 0x05,
    0x00, 0x04, 0x1c,
];
const DI_SHA256: &[u8] = &[
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05,
    0x00, 0x04, 0x20,
];
const DI_SHA384: &[u8] = &[
    0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05,
    0x00, 0x04, 0x30,
];
const DI_SHA512: &[u8] = &[
    0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05,
    0x00, 0x04, 0x40,
];
const DI_SHA512_224: &[u8] = &[
    0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x05, 0x05,
    0x00, 0x04, 0x1c,
];
const DI_SHA512_256: &[u8] = &[
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x06, 0x05,
    0x00, 0x04, 0x20,
];
const DI_SHA3_224: &[u8] = &[
    0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x07, 0x05,
    0x00, 0x04, 0x1c,
];
const DI_SHA3_256: &[u8] = &[
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x08, 0x05,
    0x00, 0x04, 0x20,
];
const DI_SHA3_384: &[u8] = &[
    0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x09, 0x05,
    0x00, 0x04, 0x30,
];
const DI_SHA3_512: &[u8] = &[
    0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x0a, 0x05,
    0x00, 0x04, 0x40,
];
const DI_RIPEMD160: &[u8] = &[
    0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x24, 0x03, 0x02, 0x01, 0x05, 0x00, 0x04, 0x14,
];
/// SM3 as OpenSSL writes and expects it (crypto/rsa/rsa_sign.c, 3.x): the OID inside is
/// 1.2.156.10197.1.504 (sm3WithRSAEncryption, last arc 0x83 0x78), not the SM3 hash OID
/// 1.2.156.10197.1.401 a DigestInfo would normally carry. Signatures must be the default
/// provider's bytes (RSA-SM3 on 3.4+ cores), so kae uses OpenSSL's encoding.
const DI_SM3: &[u8] = &[
    0x30, 0x30, 0x30, 0x0c, 0x06, 0x08, 0x2a, 0x81, 0x1c, 0xcf, 0x55, 0x01, 0x83, 0x78, 0x05, 0x00,
    0x04, 0x20,
];

impl DigestId {
    /// Every digest, in declaration order.
    pub const ALL: &'static [DigestId] = &[
        DigestId::Md5,
        DigestId::Sha1,
        DigestId::Md5Sha1,
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
        DigestId::Sm3,
    ];

    /// Names OpenSSL 3 accepts for the digest (first = canonical fetch name), then the
    /// dotted OID, which OpenSSL also accepts as a name.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            DigestId::Md5 => &["MD5", "SSL3-MD5", "1.2.840.113549.2.5"],
            DigestId::Sha1 => &["SHA1", "SHA-1", "SSL3-SHA1", "1.3.14.3.2.26"],
            DigestId::Md5Sha1 => &["MD5-SHA1"],
            DigestId::Sha224 => &["SHA2-224", "SHA-224", "SHA224", "2.16.840.1.101.3.4.2.4"],
            DigestId::Sha256 => &["SHA2-256", "SHA-256", "SHA256", "2.16.840.1.101.3.4.2.1"],
            DigestId::Sha384 => &["SHA2-384", "SHA-384", "SHA384", "2.16.840.1.101.3.4.2.2"],
            DigestId::Sha512 => &["SHA2-512", "SHA-512", "SHA512", "2.16.840.1.101.3.4.2.3"],
            DigestId::Sha512_224 => &[
                "SHA2-512/224",
                "SHA-512/224",
                "SHA512-224",
                "2.16.840.1.101.3.4.2.5",
            ],
            DigestId::Sha512_256 => &[
                "SHA2-512/256",
                "SHA-512/256",
                "SHA512-256",
                "2.16.840.1.101.3.4.2.6",
            ],
            DigestId::Sha3_224 => &["SHA3-224", "2.16.840.1.101.3.4.2.7"],
            DigestId::Sha3_256 => &["SHA3-256", "2.16.840.1.101.3.4.2.8"],
            DigestId::Sha3_384 => &["SHA3-384", "2.16.840.1.101.3.4.2.9"],
            DigestId::Sha3_512 => &["SHA3-512", "2.16.840.1.101.3.4.2.10"],
            DigestId::Ripemd160 => &[
                "RIPEMD-160",
                "RIPEMD160",
                "RIPEMD",
                "RMD160",
                "1.3.36.3.2.1",
            ],
            DigestId::Sm3 => &["SM3", "1.2.156.10197.1.401"],
        }
    }

    /// Looks a digest up by any OpenSSL name or alias, case-insensitively
    /// (surrounding whitespace ignored).
    pub fn from_name(name: &str) -> Option<DigestId> {
        let name = name.trim();
        DigestId::ALL
            .iter()
            .copied()
            .find(|id| id.names().iter().any(|n| n.eq_ignore_ascii_case(name)))
    }

    /// The canonical OpenSSL fetch name, e.g. "SHA2-256", "MD5-SHA1".
    pub fn name(self) -> &'static str {
        self.names()[0]
    }

    /// Digest output length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            DigestId::Md5 => 16,
            DigestId::Sha1 | DigestId::Ripemd160 => 20,
            DigestId::Md5Sha1 => 36,
            DigestId::Sha224 | DigestId::Sha512_224 | DigestId::Sha3_224 => 28,
            DigestId::Sha256 | DigestId::Sha512_256 | DigestId::Sha3_256 | DigestId::Sm3 => 32,
            DigestId::Sha384 | DigestId::Sha3_384 => 48,
            DigestId::Sha512 | DigestId::Sha3_512 => 64,
        }
    }

    /// Input block length in bytes (the HMAC block size).
    pub fn block_len(self) -> usize {
        match self {
            DigestId::Md5
            | DigestId::Sha1
            | DigestId::Md5Sha1
            | DigestId::Sha224
            | DigestId::Sha256
            | DigestId::Ripemd160
            | DigestId::Sm3 => 64,
            DigestId::Sha384 | DigestId::Sha512 | DigestId::Sha512_224 | DigestId::Sha512_256 => {
                128
            }
            DigestId::Sha3_224 => 144,
            DigestId::Sha3_256 => 136,
            DigestId::Sha3_384 => 104,
            DigestId::Sha3_512 => 72,
        }
    }

    /// DER DigestInfo prefix for EMSA-PKCS1-v1_5 (the digest value follows it).
    /// `None` for MD5-SHA1, which is signed bare.
    pub fn digest_info_prefix(self) -> Option<&'static [u8]> {
        Some(match self {
            DigestId::Md5 => DI_MD5,
            DigestId::Sha1 => DI_SHA1,
            DigestId::Md5Sha1 => return None,
            DigestId::Sha224 => DI_SHA224,
            DigestId::Sha256 => DI_SHA256,
            DigestId::Sha384 => DI_SHA384,
            DigestId::Sha512 => DI_SHA512,
            DigestId::Sha512_224 => DI_SHA512_224,
            DigestId::Sha512_256 => DI_SHA512_256,
            DigestId::Sha3_224 => DI_SHA3_224,
            DigestId::Sha3_256 => DI_SHA3_256,
            DigestId::Sha3_384 => DI_SHA3_384,
            DigestId::Sha3_512 => DI_SHA3_512,
            DigestId::Ripemd160 => DI_RIPEMD160,
            DigestId::Sm3 => DI_SM3,
        })
    }

    /// ANSI X9.31 hash identifier byte, for the digests X9.31 defines.
    pub fn x931_hash_id(self) -> Option<u8> {
        match self {
            DigestId::Sha1 => Some(0x33),
            DigestId::Ripemd160 => Some(0x31),
            DigestId::Sha256 => Some(0x34),
            DigestId::Sha384 => Some(0x36),
            DigestId::Sha512 => Some(0x35),
            _ => None,
        }
    }

    /// Inverse of [`x931_hash_id`](Self::x931_hash_id).
    pub fn from_x931_hash_id(id: u8) -> Option<DigestId> {
        DigestId::ALL
            .iter()
            .copied()
            .find(|d| d.x931_hash_id() == Some(id))
    }

    /// DER encoding (tag 0x06, length, value) of the digest's OBJECT IDENTIFIER.
    /// `None` for MD5-SHA1, which has none.
    pub fn oid_der(self) -> Option<&'static [u8]> {
        Some(match self {
            DigestId::Md5 => OID_MD5,
            DigestId::Sha1 => OID_SHA1,
            DigestId::Md5Sha1 => return None,
            DigestId::Sha224 => OID_SHA224,
            DigestId::Sha256 => OID_SHA256,
            DigestId::Sha384 => OID_SHA384,
            DigestId::Sha512 => OID_SHA512,
            DigestId::Sha512_224 => OID_SHA512_224,
            DigestId::Sha512_256 => OID_SHA512_256,
            DigestId::Sha3_224 => OID_SHA3_224,
            DigestId::Sha3_256 => OID_SHA3_256,
            DigestId::Sha3_384 => OID_SHA3_384,
            DigestId::Sha3_512 => OID_SHA3_512,
            DigestId::Ripemd160 => OID_RIPEMD160,
            DigestId::Sm3 => OID_SM3,
        })
    }
}

impl core::fmt::Display for DigestId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rsa::padding::testutil::*;

    /// Encodes a dotted OID string as DER, independently of the tables.
    fn oid_from_dotted(s: &str) -> Vec<u8> {
        let arcs: Vec<u64> = s.split('.').map(|a| a.parse().unwrap()).collect();
        let mut body = vec![(arcs[0] * 40 + arcs[1]) as u8];
        for &arc in &arcs[2..] {
            let mut tmp = vec![(arc & 0x7f) as u8];
            let mut v = arc >> 7;
            while v > 0 {
                tmp.push(((v & 0x7f) as u8) | 0x80);
                v >>= 7;
            }
            tmp.reverse();
            body.extend(tmp);
        }
        let mut out = vec![0x06, body.len() as u8];
        out.extend(body);
        out
    }

    #[test]
    fn names_and_aliases() {
        let cases = [
            ("SHA256", DigestId::Sha256),
            ("SHA2-256", DigestId::Sha256),
            ("sha-256", DigestId::Sha256),
            ("sha256", DigestId::Sha256),
            ("SHA512-224", DigestId::Sha512_224),
            ("SHA2-512/224", DigestId::Sha512_224),
            ("sha-512/256", DigestId::Sha512_256),
            ("MD5-SHA1", DigestId::Md5Sha1),
            ("md5-sha1", DigestId::Md5Sha1),
            ("RIPEMD160", DigestId::Ripemd160),
            ("RIPEMD-160", DigestId::Ripemd160),
            ("rmd160", DigestId::Ripemd160),
            ("SM3", DigestId::Sm3),
            ("SHA3-256", DigestId::Sha3_256),
            ("sha1", DigestId::Sha1),
            ("SHA-1", DigestId::Sha1),
            ("md5", DigestId::Md5),
            ("SHA384", DigestId::Sha384),
            ("SHA2-224", DigestId::Sha224),
            (" SHA2-512 ", DigestId::Sha512),
            ("2.16.840.1.101.3.4.2.1", DigestId::Sha256),
        ];
        for (name, id) in cases {
            assert_eq!(DigestId::from_name(name), Some(id), "{name}");
        }
        for bad in [
            "",
            "SHA",
            "SHA-2",
            "SHA2-1024",
            "MD4",
            "SHAKE128",
            "sha256x",
            "BLAKE2B-512",
        ] {
            assert_eq!(DigestId::from_name(bad), None, "{bad}");
        }
        for &id in DigestId::ALL {
            assert_eq!(DigestId::from_name(id.name()), Some(id));
            assert_eq!(id.to_string(), id.name());
            // Names are unique across digests.
            for n in id.names() {
                assert_eq!(DigestId::from_name(n), Some(id), "{n}");
            }
        }
        assert_eq!(DigestId::Sha256.name(), "SHA2-256");
        assert_eq!(DigestId::Md5Sha1.name(), "MD5-SHA1");
        assert_eq!(DigestId::Sha512_224.name(), "SHA2-512/224");
        assert_eq!(DigestId::Ripemd160.name(), "RIPEMD-160");
    }

    #[test]
    fn canonical_names_fetchable_by_openssl() {
        // Every canonical name must be a name OpenSSL knows, with the size we claim.
        for &id in DigestId::ALL {
            if let Some(m) = openssl::hash::MessageDigest::from_name(id.name()) {
                assert_eq!(m.size(), id.output_len(), "{id:?}");
            }
            assert_eq!(digest(id, b"abc").len(), id.output_len(), "{id:?}");
        }
    }

    #[test]
    fn oids_match_dotted_names() {
        for &id in DigestId::ALL {
            match id.oid_der() {
                None => assert_eq!(id, DigestId::Md5Sha1),
                Some(der) => {
                    let dotted = id.names().last().unwrap();
                    assert_eq!(der, &oid_from_dotted(dotted)[..], "{id:?}");
                    let obj = openssl::asn1::Asn1Object::from_str(dotted).unwrap();
                    assert_eq!(obj.as_slice(), &der[2..], "{id:?}");
                }
            }
        }
    }

    #[test]
    fn digest_info_prefixes_are_well_formed() {
        for &id in DigestId::ALL {
            let Some(prefix) = id.digest_info_prefix() else {
                assert_eq!(id, DigestId::Md5Sha1);
                continue;
            };
            // OpenSSL's SM3 DigestInfo carries the sm3WithRSAEncryption OID (see DI_SM3).
            const SM3_WITH_RSA: &[u8] =
                &[0x06, 0x08, 0x2a, 0x81, 0x1c, 0xcf, 0x55, 0x01, 0x83, 0x78];
            let oid = if id == DigestId::Sm3 {
                SM3_WITH_RSA
            } else {
                id.oid_der().unwrap()
            };
            let hlen = id.output_len();
            let alg_len = oid.len() + 2;
            let mut expect = vec![0x30, (alg_len + 2 + 2 + hlen) as u8, 0x30, alg_len as u8];
            expect.extend_from_slice(oid);
            expect.extend_from_slice(&[0x05, 0x00, 0x04, hlen as u8]);
            assert_eq!(prefix, &expect[..], "{id:?}");
        }
    }

    #[test]
    fn x931_ids() {
        assert_eq!(DigestId::Sha1.x931_hash_id(), Some(0x33));
        assert_eq!(DigestId::Ripemd160.x931_hash_id(), Some(0x31));
        assert_eq!(DigestId::Sha256.x931_hash_id(), Some(0x34));
        assert_eq!(DigestId::Sha384.x931_hash_id(), Some(0x36));
        assert_eq!(DigestId::Sha512.x931_hash_id(), Some(0x35));
        assert_eq!(DigestId::Sha224.x931_hash_id(), None);
        assert_eq!(DigestId::Md5.x931_hash_id(), None);
        assert_eq!(DigestId::from_x931_hash_id(0x34), Some(DigestId::Sha256));
        assert_eq!(DigestId::from_x931_hash_id(0x00), None);
    }

    #[test]
    fn block_lengths() {
        assert_eq!(DigestId::Sha256.block_len(), 64);
        assert_eq!(DigestId::Sha512.block_len(), 128);
        assert_eq!(DigestId::Sha3_256.block_len(), 136);
        for &id in DigestId::ALL {
            assert!(id.block_len() >= id.output_len());
        }
    }
}
