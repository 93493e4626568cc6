//! libcrypto's digests and random generators as the padding code's [`Hasher`] and
//! [`RandomSource`]: `ffi` makes the calls, this says what they are to RSA (which digests it
//! accepts, under which identity).

use crate::error::{KaeError, KaeResult};
use crate::ffi::digest::{Md, Rng};
use crate::rsa::padding::{DigestId, Hasher, RandomSource};

/// A fetched libcrypto digest that RSA padding knows. Cloning takes another reference.
#[derive(Clone)]
pub struct Digest {
    md: Md,
    id: DigestId,
}

impl Digest {
    /// Fetches `name` (any OpenSSL alias of a digest RSA padding knows) by its canonical
    /// name through `fetch`, which is given that name and `props`. Any other digest, or one
    /// whose output length is not the one RSA expects, is refused.
    pub fn fetch_with(
        name: &str,
        props: Option<&str>,
        fetch: impl FnOnce(&str, Option<&str>) -> KaeResult<Md>,
    ) -> KaeResult<Digest> {
        let id = DigestId::from_name(name).ok_or(KaeError::InvalidDigest)?;
        let md = fetch(id.name(), props)?;
        if md.size() != id.output_len() {
            return Err(KaeError::InvalidDigest);
        }
        Ok(Digest { md, id })
    }

    /// [`Digest::fetch_with`] from libcrypto's default library context.
    pub fn fetch_default(name: &str, props: Option<&str>) -> KaeResult<Digest> {
        Digest::fetch_with(name, props, Md::fetch_default)
    }

    pub fn id(&self) -> DigestId {
        self.id
    }

    pub fn size(&self) -> usize {
        self.md.size()
    }

    /// The libcrypto digest, for a digest context or its parameter lists.
    pub fn md(&self) -> &Md {
        &self.md
    }
}

impl Hasher for Digest {
    fn id(&self) -> DigestId {
        self.id
    }
    fn output_len(&self) -> usize {
        self.md.size()
    }
    fn block_len(&self) -> usize {
        self.md.block_size()
    }
    fn hash(&self, parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()> {
        self.md.digest(parts, out)
    }
}

impl RandomSource for Rng<'_> {
    fn fill(&self, buf: &mut [u8]) -> KaeResult<()> {
        Rng::fill(self, buf)
    }
}
