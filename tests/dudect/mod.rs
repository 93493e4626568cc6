//! The dudect method (Reparaz, Balasch, Verbauwhede, "Dude, is my code constant time?",
//! DATE 2017): measure an operation on inputs of two classes, chosen at random for each
//! measurement, and compare the two timing distributions with Welch's t-test; a leak shows
//! as a large |t|. Because a leak can hide in the tail of a noisy distribution, the test is
//! repeated on the measurements below a series of percentiles ("cropping"), and the largest
//! |t| over all of them is reported. |t| > 4.5 is the method's usual evidence of a leak.

/// Running mean and variance (Welford).
#[derive(Clone, Copy, Default, Debug)]
pub struct Moments {
    pub n: u64,
    pub mean: f64,
    m2: f64,
}

impl Moments {
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }
    /// Sample variance (n − 1).
    pub fn var(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            self.m2 / (self.n - 1) as f64
        }
    }
}

/// Welch's t statistic of two samples (0 when either is too small or both are constant).
pub fn welch_t(a: &Moments, b: &Moments) -> f64 {
    if a.n < 2 || b.n < 2 {
        return 0.0;
    }
    let se = (a.var() / a.n as f64 + b.var() / b.n as f64).sqrt();
    if se == 0.0 {
        return 0.0;
    }
    (a.mean - b.mean) / se
}

/// Number of cropped tests (dudect's DUDECT_NUMBER_PERCENTILES).
pub const CROPS: usize = 100;
/// Fewer measurements than this in either class: the test is not counted.
pub const MIN_PER_CLASS: u64 = 1000;
/// The usual threshold of the method.
pub const T_THRESHOLD: f64 = 4.5;

/// Result of one analysis.
#[derive(Debug, Clone)]
pub struct Report {
    /// Measurements per class (uncropped).
    pub n: [u64; 2],
    /// Mean time per class (uncropped), in the measurement's unit.
    pub mean: [f64; 2],
    /// |t| without cropping.
    pub t_all: f64,
    /// Largest |t| over the uncropped and all cropped tests.
    pub max_t: f64,
    /// The crop that gave `max_t` (None: uncropped) as a fraction of the measurements kept.
    pub max_at: Option<f64>,
}

/// dudect's percentile series: keep the fastest 1 − 0.5^(10(i+1)/CROPS) of the measurements.
pub fn crop_fractions() -> Vec<f64> {
    (0..CROPS)
        .map(|i| 1.0 - 0.5f64.powf(10.0 * (i + 1) as f64 / CROPS as f64))
        .collect()
}

/// Analyses `(class, time)` measurements (class 0 or 1).
pub fn analyse(samples: &[(u8, u64)]) -> Report {
    let mut sorted: Vec<u64> = samples.iter().map(|s| s.1).collect();
    sorted.sort_unstable();
    let thresholds: Vec<(f64, u64)> = crop_fractions()
        .into_iter()
        .map(|f| {
            let idx = ((sorted.len() as f64 * f) as usize).min(sorted.len().saturating_sub(1));
            (f, sorted.get(idx).copied().unwrap_or(0))
        })
        .collect();
    let mut all = [Moments::default(); 2];
    let mut cropped = vec![[Moments::default(); 2]; thresholds.len()];
    for &(class, t) in samples {
        let c = usize::from(class & 1);
        let x = t as f64;
        all[c].push(x);
        for (m, &(_, th)) in cropped.iter_mut().zip(&thresholds) {
            if t < th {
                m[c].push(x);
            }
        }
    }
    let t_all = welch_t(&all[0], &all[1]).abs();
    let mut max_t = t_all;
    let mut max_at = None;
    for (m, &(f, _)) in cropped.iter().zip(&thresholds) {
        if m[0].n < MIN_PER_CLASS || m[1].n < MIN_PER_CLASS {
            continue;
        }
        let t = welch_t(&m[0], &m[1]).abs();
        if t > max_t {
            max_t = t;
            max_at = Some(f);
        }
    }
    Report {
        n: [all[0].n, all[1].n],
        mean: [all[0].mean, all[1].mean],
        t_all,
        max_t,
        max_at,
    }
}

/// A small fast generator for class choices and synthetic data (not for cryptography).
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic "timings": a noisy base with a long right tail, plus `shift` for class 1.
    fn synthetic(n: usize, shift: u64, seed: u64) -> Vec<(u8, u64)> {
        let mut r = XorShift(seed);
        (0..n)
            .map(|_| {
                let class = (r.next() & 1) as u8;
                let noise = r.next() % 200
                    + if r.next() % 50 == 0 {
                        r.next() % 20_000
                    } else {
                        0
                    };
                (class, 1000 + noise + u64::from(class) * shift)
            })
            .collect()
    }

    #[test]
    fn welch_t_known_value() {
        let mut a = Moments::default();
        let mut b = Moments::default();
        for x in [1.0, 2.0, 3.0, 4.0] {
            a.push(x);
        }
        for x in [2.0, 4.0, 6.0, 8.0] {
            b.push(x);
        }
        // means 2.5 and 5, variances 5/3 and 20/3: t = -2.5 / sqrt(5/12 + 20/12) = -1.732…
        assert!((a.var() - 5.0 / 3.0).abs() < 1e-12);
        assert!((welch_t(&a, &b) + 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(welch_t(&a, &Moments::default()), 0.0);
    }

    #[test]
    fn identical_distributions_give_small_t() {
        for seed in [1, 2, 3, 0x9e37_79b9] {
            let r = analyse(&synthetic(200_000, 0, seed));
            assert!(r.max_t < T_THRESHOLD, "seed {seed}: {r:?}");
            assert!(r.n[0] > 90_000 && r.n[1] > 90_000);
        }
    }

    #[test]
    fn shifted_distribution_gives_large_t() {
        // A 3-unit shift under 200 units of noise and a heavy tail: the uncropped test
        // hardly sees it, the cropped ones must.
        let r = analyse(&synthetic(200_000, 3, 7));
        assert!(r.max_t > 10.0, "{r:?}");
        assert!(r.max_t > r.t_all, "cropping must help here: {r:?}");
    }

    #[test]
    fn crop_series_is_increasing_and_below_one() {
        let f = crop_fractions();
        assert_eq!(f.len(), CROPS);
        assert!(f.windows(2).all(|w| w[0] < w[1]));
        assert!(f[0] > 0.0 && f[CROPS - 1] < 1.0);
    }
}
