//! Blinding pairs must not be replayed across fork(): a pair pooled in the parent would give
//! the child the same sequence of blinding factors as the parent (both square the same r).
//! The child must make fresh pairs, the parent keeps using its own.
//!
//! Its own test binary with a single test (fork() in a process running other tests' threads
//! would copy whatever locks they hold). The child reports through a pipe and leaves with
//! `_exit`, never returning into the test harness.

use kae::ffi::bn::BigNum;
use kae::rsa::ops::{generate, private_op, public_op};
use kae::rsa::KeyType;

fn message(k: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..k).map(|i| (i as u8).wrapping_mul(13) ^ 0x5a).collect();
    m[0] = 0; // below n
    m
}

#[test]
fn forked_child_makes_its_own_blinding_pair() {
    let key = generate(KeyType::Rsa, 1024, &BigNum::from_u64(65537).unwrap()).unwrap();
    let m = message(key.size());
    let mut sig = vec![0u8; key.size()];
    private_op(&key, &m, &mut sig).result.unwrap();
    // Pairs are made in batches (one inversion for several): the first operation makes one.
    let batch = key.blinding_pairs_made();
    assert!(batch >= 1, "the first operation makes a pair");
    private_op(&key, &m, &mut sig).result.unwrap();
    assert_eq!(
        key.blinding_pairs_made(),
        batch,
        "the second reuses a pooled pair"
    );

    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: this test binary runs this single test, so no other thread holds a lock the
    // child could need; the child only computes, writes to the pipe and calls _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut out = vec![0u8; key.size()];
        let ok = private_op(&key, &m, &mut out).result.is_ok() && out == sig;
        let report = [ok as u8, key.blinding_pairs_made() as u8];
        // SAFETY: writing two bytes from a live buffer to our pipe end; then leave at once.
        unsafe {
            libc::write(fds[1], report.as_ptr().cast(), 2);
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the write end.
    unsafe { libc::close(fds[1]) };
    let mut report = [0u8; 2];
    // SAFETY: reading at most two bytes into a live buffer.
    let got = unsafe { libc::read(fds[0], report.as_mut_ptr().cast(), 2) };
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
        libc::close(fds[0]);
    }
    assert_eq!(got, 2, "the child must report");
    assert_eq!(report[0], 1, "the child's signature must be right");
    assert_eq!(
        u32::from(report[1]),
        2 * batch,
        "the child must make fresh blinding pairs, not reuse the parent's"
    );

    // The parent's own pair is still pooled and still used.
    private_op(&key, &m, &mut sig).result.unwrap();
    assert_eq!(key.blinding_pairs_made(), batch);
    let mut back = vec![0u8; key.size()];
    public_op(&key, &sig, &mut back).unwrap();
    assert_eq!(back, m);
}
