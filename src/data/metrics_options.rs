//! The metrics options a [`Builder`](crate::Builder) collects (`metrics`, `prometheus`,
//! `metric_labels`, `metric_region_limit`) and their checks at `build()`: label names must be
//! valid Prometheus names and must not take a name the profiler sets itself.

use std::net::SocketAddr;

use crate::Error;

/// Default [`Builder::metric_region_limit`](crate::Builder::metric_region_limit).
pub(crate) const DEFAULT_REGION_LIMIT: usize = 1000;

/// Label names the profiler sets itself (`le` is the histogram's).
const RESERVED: [&str; 3] = ["region", "rank", "le"];

/// What the user asked for.
#[derive(Clone, Debug)]
pub(crate) struct MetricsConfig {
    /// The flusher keeps the metrics (`Builder::metrics`, implied by `Builder::prometheus`).
    pub enabled: bool,
    /// Where to serve them (`Builder::prometheus`).
    pub endpoint: Option<Endpoint>,
    /// Constant labels of every series, in the order given.
    pub labels: Vec<(String, String)>,
    /// Regions exported by name; the others fold into `region="other"`.
    pub region_limit: usize,
    /// `POST /dump` writes a flight-recorder dump (`Builder::metrics_dump`).
    pub dump: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: false,
            endpoint: None,
            labels: Vec::new(),
            region_limit: DEFAULT_REGION_LIMIT,
            dump: false,
        }
    }
}

/// The address given to `Builder::prometheus`, resolved when it was given.
#[derive(Clone, Debug)]
pub(crate) enum Endpoint {
    /// Every address it resolved to (the first that binds is used).
    Resolved(Vec<SocketAddr>),
    /// It did not resolve: the error's kind and message (kept for `build()`).
    Unresolved(std::io::ErrorKind, String),
}

impl Endpoint {
    /// Resolves `addr` now, keeping a failure for `build()`.
    pub(crate) fn resolve(addr: impl std::net::ToSocketAddrs) -> Endpoint {
        match addr.to_socket_addrs() {
            Ok(addrs) => {
                let addrs: Vec<SocketAddr> = addrs.collect();
                if addrs.is_empty() {
                    Endpoint::Unresolved(
                        std::io::ErrorKind::InvalidInput,
                        "the address resolved to no socket address".into(),
                    )
                } else {
                    Endpoint::Resolved(addrs)
                }
            }
            Err(e) => Endpoint::Unresolved(e.kind(), e.to_string()),
        }
    }
}

impl MetricsConfig {
    /// Checks the labels and the region limit.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming `metric_labels` (an invalid, reserved or repeated
    /// name) or `metric_region_limit` (zero).
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.region_limit == 0 {
            return Err(Error::InvalidOption {
                option: "metric_region_limit",
                reason: "must export at least one region".into(),
            });
        }
        for (k, (name, _)) in self.labels.iter().enumerate() {
            let reason = if !valid_name(name) {
                format!(
                    "label name `{name}` is not a valid Prometheus label name \
                     ([a-zA-Z_][a-zA-Z0-9_]*)"
                )
            } else if RESERVED.contains(&name.as_str()) || name.starts_with("__") {
                format!(
                    "label name `{name}` is reserved (region, rank, le and names starting \
                     with `__` are set by the profiler or by Prometheus)"
                )
            } else if self.labels[..k].iter().any(|(n, _)| n == name) {
                format!("label name `{name}` is given twice")
            } else {
                continue;
            };
            return Err(Error::InvalidOption {
                option: "metric_labels",
                reason,
            });
        }
        Ok(())
    }
}

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_labels(labels: &[(&str, &str)]) -> MetricsConfig {
        MetricsConfig {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..MetricsConfig::default()
        }
    }

    fn reason(labels: &[(&str, &str)]) -> String {
        with_labels(labels).check().unwrap_err().to_string()
    }

    #[test]
    fn reserved_invalid_and_repeated_names_are_errors() {
        for name in ["region", "rank", "le", "__name__", "__x"] {
            let e = reason(&[(name, "v")]);
            assert!(e.contains("metric_labels") && e.contains("reserved"), "{e}");
        }
        for name in ["", "1x", "a-b", "a b", "é", "a.b"] {
            let e = reason(&[(name, "v")]);
            assert!(
                e.contains("not a valid Prometheus label name"),
                "{name}: {e}"
            );
        }
        let e = reason(&[("env", "a"), ("env", "b")]);
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn good_names_and_any_value_pass() {
        with_labels(&[("env", "prod \"eu\"\n\\"), ("_x9", ""), ("Region", "r")])
            .check()
            .unwrap();
    }

    #[test]
    fn a_zero_region_limit_is_an_error() {
        let c = MetricsConfig {
            region_limit: 0,
            ..MetricsConfig::default()
        };
        assert!(c
            .check()
            .unwrap_err()
            .to_string()
            .contains("metric_region_limit"));
    }

    #[test]
    fn addresses_resolve_when_given() {
        match Endpoint::resolve("127.0.0.1:9464") {
            Endpoint::Resolved(a) => assert_eq!(a, ["127.0.0.1:9464".parse().unwrap()]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Endpoint::resolve("not an address"),
            Endpoint::Unresolved(..)
        ));
    }
}
