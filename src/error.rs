//! Error reasons kae reports through the OpenSSL core (`core_new_error` / `core_vset_error`).
//!
//! Every failure inside the provider is a `KaeError`; the FFI layer turns it into an OpenSSL
//! error record with our reason code and string, so `openssl` prints `kae` plus the reason.

use core::fmt;

macro_rules! reasons {
    ($( $variant:ident = $code:expr, $text:expr; )*) => {
        /// A reason code and its fixed text, as listed by `provider_get_reason_strings`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum KaeError { $( $variant = $code, )* }

        impl KaeError {
            /// All reasons, for the provider's reason-string table.
            pub const ALL: &'static [KaeError] = &[ $( KaeError::$variant, )* ];

            /// The reason code reported to OpenSSL (lower 23 bits of the packed error code).
            pub const fn code(self) -> u32 { self as u32 }

            /// The reason text OpenSSL prints.
            pub const fn text(self) -> &'static str {
                match self { $( KaeError::$variant => $text, )* }
            }

            /// NUL-terminated text for C.
            pub const fn c_text(self) -> &'static core::ffi::CStr {
                match self { $( KaeError::$variant => {
                    match core::ffi::CStr::from_bytes_with_nul(concat!($text, "\0").as_bytes()) {
                        Ok(s) => s,
                        Err(_) => panic!("reason text contains NUL"),
                    }
                } )* }
            }
        }
    };
}

reasons! {
    Internal = 1, "internal error";
    Panic = 2, "internal error: panic caught at the provider boundary";
    OutOfMemory = 3, "out of memory";
    InvalidArgument = 4, "invalid argument";
    NullParameter = 5, "missing required parameter";
    InvalidParam = 6, "invalid parameter value";
    UnsupportedParam = 7, "unsupported parameter";
    BufferTooSmall = 8, "output buffer too small";
    // Keys
    MissingKey = 20, "no key set";
    MissingPublicKey = 21, "key has no public components (n, e)";
    MissingPrivateKey = 22, "key has no private exponent";
    InvalidKey = 23, "invalid RSA key";
    KeyTooSmall = 24, "RSA key too small";
    KeyTooLarge = 25, "RSA key too large";
    BadPublicExponent = 26, "bad RSA public exponent";
    InconsistentKey = 27, "RSA key components are inconsistent";
    PairwiseCheckFailed = 28, "RSA pairwise consistency check failed";
    KeyGenFailed = 29, "RSA key generation failed";
    UnsupportedPrimeCount = 30, "unsupported number of primes";
    InvalidModulus = 31, "invalid RSA modulus";
    // Sizes
    DataTooLargeForKeySize = 40, "data too large for key size";
    DataTooLargeForModulus = 41, "data too large for modulus";
    DataTooSmall = 42, "data too small";
    InvalidLength = 43, "invalid input length";
    WrongSignatureLength = 44, "wrong signature length";
    DigestTooBigForKey = 45, "digest too big for RSA key";
    InvalidDigestLength = 46, "invalid digest length";
    // Padding
    InvalidPaddingMode = 50, "invalid padding mode";
    IllegalForPaddingMode = 51, "operation not allowed in this padding mode";
    PaddingCheckFailed = 52, "padding check failed";
    OaepDecodingError = 53, "OAEP decoding error";
    BadSignature = 54, "bad signature";
    InvalidSaltLength = 55, "invalid salt length";
    SaltLengthCheckFailed = 56, "salt length check failed";
    LastOctetInvalid = 57, "last octet invalid";
    FirstOctetInvalid = 58, "first octet invalid";
    InvalidTrailer = 59, "invalid trailer";
    InvalidHeader = 60, "invalid header";
    PssRestricted = 61, "operation not allowed by RSA-PSS key restrictions";
    // Digests
    InvalidDigest = 70, "invalid or unsupported digest";
    DigestNotAllowed = 71, "digest not allowed for this padding";
    DigestMismatch = 72, "digest does not match key restriction";
    MgfDigestMismatch = 73, "MGF1 digest does not match key restriction";
    FetchFailed = 74, "could not fetch algorithm";
    // TLS
    InvalidTlsVersion = 80, "invalid TLS protocol version";
    // Arithmetic / backend
    BignumFailure = 90, "big number operation failed";
    FaultDetected = 91, "RSA CRT result failed verification; recomputed without CRT";
    RandomFailure = 92, "random number generation failed";
    BackendFailure = 93, "backend failure";
    OperationNotInitialized = 94, "operation not initialized";
    DefaultProviderUnavailable = 95, "could not load the default provider for fallback algorithms";
    WrongOpenSslVersion = 96, "kae was built for another OpenSSL major version than the running one";
}

impl fmt::Display for KaeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl std::error::Error for KaeError {}

pub type KaeResult<T> = Result<T, KaeError>;
