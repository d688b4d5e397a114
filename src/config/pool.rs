//! `[pool]`: warm sandbox containers kept ready by the daemon, so a new session is a claim
//! rather than a container start (docs/pool.md). Pure over the parsed file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The most containers one shape may keep warm: each is a running container with its limits
/// reserved on the host (docs/pool.md, "Bounds and ownership").
pub const MAX_SIZE: usize = 32;

/// See the module docs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Containers kept warm for the configured sandbox (`[sandbox]` as it is). 0, the
    /// default, keeps none: the daemon starts on demand, so the command that starts it could
    /// never claim, and a single agent's one session would pay for a container it never uses
    /// (docs/pool.md, "The default").
    pub size: usize,
    /// Per-image overrides: containers kept warm for the configured sandbox with this image
    /// instead (what `moat sessions create --image` asks for). The configured image's own
    /// entry here replaces `size`.
    pub images: BTreeMap<String, usize>,
}

impl PoolConfig {
    /// Each warm shape: an image (`None`: the configured one) and how many to keep.
    pub fn shapes(&self, configured_image: &str) -> Vec<(Option<String>, usize)> {
        let mut out = Vec::new();
        let own = self
            .images
            .get(configured_image)
            .copied()
            .unwrap_or(self.size);
        if own > 0 {
            out.push((None, own));
        }
        for (image, &n) in &self.images {
            if image != configured_image && n > 0 {
                out.push((Some(image.clone()), n));
            }
        }
        out
    }

    /// Refuses sizes past [`MAX_SIZE`] and empty image names, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid { key, message };
        if self.size > MAX_SIZE {
            return Err(invalid(
                "pool.size".into(),
                format!(
                    "{} is more than the {MAX_SIZE} warm containers a shape may keep",
                    self.size
                ),
            ));
        }
        for (image, &n) in &self.images {
            if image.trim().is_empty() {
                return Err(invalid(
                    "pool.images".into(),
                    "an image name is empty".into(),
                ));
            }
            if n > MAX_SIZE {
                return Err(invalid(
                    format!("pool.images.\"{image}\""),
                    format!("{n} is more than the {MAX_SIZE} warm containers a shape may keep"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_overrides_by_image() {
        assert!(PoolConfig::default().shapes("img").is_empty());
        let p: PoolConfig =
            toml::from_str("size = 2\nimages = { other = 1, img = 3, gone = 0 }").unwrap();
        assert_eq!(
            p.shapes("img"),
            vec![(None, 3), (Some("other".to_string()), 1)]
        );
        let p: PoolConfig = toml::from_str("size = 2").unwrap();
        assert_eq!(p.shapes("img"), vec![(None, 2)]);
    }

    #[test]
    fn bounds_are_refused_by_key() {
        let p = PoolConfig {
            size: MAX_SIZE + 1,
            ..Default::default()
        };
        assert!(p.validate().unwrap_err().to_string().contains("pool.size"));
        let p: PoolConfig = toml::from_str("images = { \"x\" = 99 }").unwrap();
        assert!(p
            .validate()
            .unwrap_err()
            .to_string()
            .contains("pool.images.\"x\""));
        assert!(toml::from_str::<PoolConfig>("sise = 1").is_err());
    }
}
