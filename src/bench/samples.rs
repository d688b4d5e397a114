//! What every figure is made of: the exec request it times, and its samples' percentiles.

use std::time::Instant;

use crate::tools::ExecRequest;

/// A foreground `command` with every other field at its default.
pub(super) fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        ..Default::default()
    }
}

/// The `p` quantile (0 to 1) of `samples`, nearest rank; 0 for none. Sorts `samples`.
pub(super) fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    if samples.is_empty() {
        return 0.0;
    }
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

/// Milliseconds since `t`.
pub(super) fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let mut xs = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&mut xs, 0.5), 3.0);
        assert_eq!(percentile(&mut xs, 0.0), 1.0);
        assert_eq!(percentile(&mut xs, 1.0), 5.0);
        assert_eq!(percentile(&mut xs, 0.9), 5.0);
        assert_eq!(percentile(&mut [], 0.5), 0.0);
    }
}
