//! Server certificate handling of the rustls client: any chain, but a checked handshake
//! signature.

use crate::der::cert_public_key;

/// Certificate "verification" that accepts any chain (self-signed test
/// certificates) but still checks the handshake signature with the server's
/// public key, as a real client would. The key is taken from the certificate
/// with a small DER walk rather than webpki's certificate parser, which
/// rejects X.509 v1 certificates (what `openssl req -x509` makes without a
/// config file).
#[derive(Debug)]
pub struct AcceptAnyCert {
    pub algs: rustls::crypto::WebPkiSupportedAlgorithms,
}

/// Signature schemes that TLS 1.3 allows in CertificateVerify.
pub fn tls13_scheme(scheme: rustls::SignatureScheme) -> bool {
    use rustls::SignatureScheme as S;
    matches!(
        scheme,
        S::RSA_PSS_SHA256
            | S::RSA_PSS_SHA384
            | S::RSA_PSS_SHA512
            | S::ECDSA_NISTP256_SHA256
            | S::ECDSA_NISTP384_SHA384
            | S::ECDSA_NISTP521_SHA512
            | S::ED25519
            | S::ED448
    )
}

impl AcceptAnyCert {
    pub fn verify(
        &self,
        message: &[u8],
        cert: &[u8],
        scheme: rustls::SignatureScheme,
        signature: &[u8],
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let key = cert_public_key(cert).ok_or(rustls::Error::InvalidCertificate(
            rustls::CertificateError::BadEncoding,
        ))?;
        let candidates = self
            .algs
            .mapping
            .iter()
            .find(|(s, _)| *s == scheme)
            .map(|(_, algs)| *algs)
            .unwrap_or(&[]);
        // Candidates of other key types fail to parse the key and are skipped.
        if candidates
            .iter()
            .any(|alg| alg.verify_signature(key, message, signature).is_ok())
        {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadSignature,
            ))
        }
    }
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verify(message, cert.as_ref(), dss.scheme, dss.signature())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        if !tls13_scheme(dss.scheme) {
            return Err(rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into());
        }
        self.verify(message, cert.as_ref(), dss.scheme, dss.signature())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verifier finds the key in v1 and v3 certificates and rejects a
    /// signature over other data.
    #[test]
    fn handshake_signature_check() {
        use openssl::{asn1::Asn1Time, hash::MessageDigest, pkey::PKey, rsa::Rsa, sign::Signer};
        use rustls::SignatureScheme as S;
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let v = AcceptAnyCert {
            algs: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        };
        let msg = b"handshake transcript";
        let mut s = Signer::new(MessageDigest::sha256(), &key).unwrap();
        s.set_rsa_padding(openssl::rsa::Padding::PKCS1_PSS).unwrap();
        s.set_rsa_pss_saltlen(openssl::sign::RsaPssSaltlen::DIGEST_LENGTH)
            .unwrap();
        s.update(msg).unwrap();
        let pss = s.sign_to_vec().unwrap();
        let mut s = Signer::new(MessageDigest::sha256(), &key).unwrap();
        s.update(msg).unwrap();
        let pkcs1 = s.sign_to_vec().unwrap();
        for version in [0, 2] {
            let mut b = openssl::x509::X509::builder().unwrap();
            b.set_version(version).unwrap();
            b.set_pubkey(&key).unwrap();
            b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
                .unwrap();
            b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
                .unwrap();
            b.sign(&key, MessageDigest::sha256()).unwrap();
            let der = b.build().to_der().unwrap();
            assert!(cert_public_key(&der).is_some(), "v{}", version + 1);
            assert!(v.verify(msg, &der, S::RSA_PSS_SHA256, &pss).is_ok());
            assert!(v.verify(b"other", &der, S::RSA_PSS_SHA256, &pss).is_err());
            assert!(v.verify(msg, &der, S::RSA_PKCS1_SHA256, &pkcs1).is_ok());
            assert!(v
                .verify(b"other", &der, S::RSA_PKCS1_SHA256, &pkcs1)
                .is_err());
            assert!(v.verify(msg, &der, S::RSA_PKCS1_SHA256, &pss).is_err());
            assert!(v
                .verify(msg, &der, S::ECDSA_NISTP256_SHA256, &pkcs1)
                .is_err());
            assert!(v
                .verify(msg, &der[..der.len() / 2], S::RSA_PSS_SHA256, &pss)
                .is_err());
        }
        assert!(tls13_scheme(S::RSA_PSS_SHA256) && !tls13_scheme(S::RSA_PKCS1_SHA256));
    }
}
