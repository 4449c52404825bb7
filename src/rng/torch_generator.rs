//! PyTorch's CPU random generator (ATen's mt19937) and `torch.randperm`, reproduced exactly so
//! that samplers give the same indices as PyTorch for the same seed.
//!
//! ATen seeds a standard MT19937 with the low 32 bits of the 64-bit seed; `random()` is one
//! tempered 32-bit output and `random64()` is two of them, the first in the high half.
//! `randperm(n)` for n < 2^32/20 is a forward Fisher-Yates with `random() % (n - i)`; above
//! that it is an inside-out shuffle with `random64() % (i + 1)`.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// `torch.Generator()` on the CPU after `manual_seed(seed)`.
#[derive(Clone)]
pub struct TorchGenerator {
    state: [u32; N],
    left: usize,
    next: usize,
}

impl TorchGenerator {
    /// A generator in the state of `torch.Generator().manual_seed(seed)`; only the low 32 bits
    /// of `seed` count, as in ATen.
    pub fn new(seed: u64) -> Self {
        let mut state = [0u32; N];
        state[0] = seed as u32; // ATen keeps only the low 32 bits
        for j in 1..N {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(j as u32);
        }
        TorchGenerator { state, left: 1, next: 0 }
    }

    fn twist(&mut self) {
        for k in 0..N {
            let y = (self.state[k] & UPPER_MASK) | (self.state[(k + 1) % N] & LOWER_MASK);
            let mag = if self.state[(k + 1) % N] & 1 == 1 { MATRIX_A } else { 0 };
            self.state[k] = self.state[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.left = N;
        self.next = 0;
    }

    /// One 32-bit draw (`CPUGeneratorImpl::random`).
    pub fn random(&mut self) -> u32 {
        self.left -= 1;
        if self.left == 0 {
            self.twist();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// One 64-bit draw (`CPUGeneratorImpl::random64`): first 32-bit draw in the high half.
    pub fn random64(&mut self) -> u64 {
        let hi = self.random() as u64;
        let lo = self.random() as u64;
        (hi << 32) | lo
    }
}

/// `torch.randperm(n, generator=g)` on the CPU.
pub fn randperm(n: usize, g: &mut TorchGenerator) -> Vec<usize> {
    if (n as u64) < u64::from(u32::MAX) / 20 {
        let mut r: Vec<usize> = (0..n).collect();
        for i in 0..n.saturating_sub(1) {
            let z = (u64::from(g.random()) % (n - i) as u64) as usize;
            r.swap(i, i + z);
        }
        r
    } else {
        let mut r = vec![0usize; n];
        for i in 0..n {
            let z = (g.random64() % (i as u64 + 1)) as usize;
            r[i] = r[z];
            r[z] = i;
        }
        r
    }
}

/// Advances `g` exactly as `randperm(n, g)` would, without building the permutation (a sampler
/// that reuses one generator over epochs skips the epochs before the one it needs).
pub(crate) fn skip_randperm(n: usize, g: &mut TorchGenerator) {
    if (n as u64) < u64::from(u32::MAX) / 20 {
        for _ in 0..n.saturating_sub(1) {
            g.random();
        }
    } else {
        for _ in 0..n {
            g.random64();
        }
    }
}

/// A sampler's own generator, `torch.Generator().manual_seed(seed)`, as it stands at the start
/// of iteration `epoch` (torch's samplers draw each iteration from where the last one left it):
/// set an epoch and it replays from the seed, or goes on from where it stands.
#[derive(Clone)]
pub(crate) struct EpochGenerator {
    seed: u64,
    epoch: u64,
    /// Boxed: its state is 2.5 KB.
    generator: Box<TorchGenerator>,
}

impl EpochGenerator {
    pub(crate) fn new(seed: u64) -> Self {
        EpochGenerator { seed, epoch: 0, generator: Box::new(TorchGenerator::new(seed)) }
    }
    /// Advances (or replays) to `epoch`, `skip` consuming one iteration's draws.
    pub(crate) fn set_epoch(&mut self, epoch: u64, mut skip: impl FnMut(&mut TorchGenerator)) {
        if epoch < self.epoch {
            *self = EpochGenerator::new(self.seed);
        }
        while self.epoch < epoch {
            skip(&mut self.generator);
            self.epoch += 1;
        }
    }
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }
    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }
    /// A copy of the generator at the start of the epoch, to draw that epoch from.
    pub(crate) fn at_epoch(&self) -> TorchGenerator {
        (*self.generator).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_std_mt19937_reference_values() {
        // The 10000th output of std::mt19937 seeded with 5489 is 4123659995 (C++ standard).
        let mut g = TorchGenerator::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = g.random();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn seed_keeps_low_32_bits_only() {
        let a = randperm(50, &mut TorchGenerator::new(5));
        let b = randperm(50, &mut TorchGenerator::new((1u64 << 32) + 5));
        assert_eq!(a, b);
    }

    #[test]
    fn randperm_is_a_permutation() {
        let mut p = randperm(1000, &mut TorchGenerator::new(42));
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
        assert!(randperm(0, &mut TorchGenerator::new(0)).is_empty());
        assert_eq!(randperm(1, &mut TorchGenerator::new(0)), vec![0]);
    }

    #[test]
    fn skip_randperm_consumes_what_randperm_does() {
        for n in [0, 1, 2, 17] {
            let (mut a, mut b) = (TorchGenerator::new(3), TorchGenerator::new(3));
            randperm(n, &mut a);
            skip_randperm(n, &mut b);
            assert_eq!(a.random(), b.random(), "n = {n}");
        }
    }
}
