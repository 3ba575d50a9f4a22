//! A small deterministic generator (xorshift64*) for the fuzzing tests: a seed reproduces a
//! failing mutant. Included by path (`#[path = "common/rng.rs"] mod rng;`), so a test that
//! needs nothing else of `common` links nothing else.

/// xorshift64* state (never 0).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
