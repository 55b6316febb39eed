//! `[telemetry]`, and the standard `OTEL_*` variables over it.

use std::collections::BTreeMap;

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::Sampler;
use serde::Deserialize;

use crate::error::Error;

/// `[telemetry]`: traces and metrics over OTLP/HTTP. Off unless an
/// endpoint is set, here or by `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). Every standard variable
/// (`OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`,
/// `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_SDK_DISABLED`) wins over the
/// setting here that says the same.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://localhost:4318`):
    /// traces go to `/v1/traces`, metrics to `/v1/metrics`.
    pub endpoint: Option<String>,
    /// `http/protobuf` (default) or `http/json`. (`grpc` is not built in:
    /// every collector and backend named in docs/OBSERVABILITY.md takes
    /// OTLP/HTTP, and gRPC would add tonic and HTTP/2 to every build.)
    pub protocol: Option<String>,
    /// Headers sent with each export (a backend's credentials).
    pub headers: BTreeMap<String, String>,
    /// `service.name` (default `agwire`).
    pub service_name: Option<String>,
    /// More resource attributes (`deployment.environment.name`, …).
    pub resource: BTreeMap<String, String>,
    /// The sampler, as `OTEL_TRACES_SAMPLER` names them (default
    /// `parentbased_always_on`: a caller's decision is kept).
    pub sampler: Option<String>,
    /// The ratio of the `traceidratio` samplers (0 to 1).
    pub sampler_ratio: Option<f64>,
    /// Prompts, completions and tool arguments and results on the model
    /// and tool spans. Off: they hold whatever users typed.
    pub capture_content: bool,
    /// The run's user on its span: `hashed` (default, `enduser.pseudo.id`,
    /// the SHA-256 of the id: an id you know can be looked up, the others
    /// not read), `plain` (`enduser.id`) or `omitted`.
    pub user: UserAttribute,
    /// A store write that takes this long or longer gets a span of its
    /// own, under the request's or the run's.
    pub slow_store_write_ms: u64,
    /// Metrics over OTLP beside `/metrics`.
    pub metrics: bool,
    /// Seconds between metric exports (`OTEL_METRIC_EXPORT_INTERVAL`, in
    /// ms, wins).
    pub metrics_interval_seconds: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            protocol: None,
            headers: BTreeMap::new(),
            service_name: None,
            resource: BTreeMap::new(),
            sampler: None,
            sampler_ratio: None,
            capture_content: false,
            user: UserAttribute::Hashed,
            slow_store_write_ms: 100,
            metrics: true,
            metrics_interval_seconds: 60,
        }
    }
}

/// How a run's span names its user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserAttribute {
    /// `enduser.pseudo.id`: the SHA-256 of the user id, hex.
    #[default]
    Hashed,
    /// `enduser.id`: the user id.
    Plain,
    /// Not at all.
    Omitted,
}

impl UserAttribute {
    pub(super) fn attribute(self, user: &str) -> Option<(&'static str, String)> {
        use sha2::Digest as _;
        match self {
            Self::Hashed => Some((
                "enduser.pseudo.id",
                hex::encode(sha2::Sha256::digest(user.as_bytes())),
            )),
            Self::Plain => Some(("enduser.id", user.to_owned())),
            Self::Omitted => None,
        }
    }
}

/// The wire format of the exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    Protobuf,
    Json,
}

/// What the exporters are built from: the file's settings with the
/// environment's over them.
#[derive(Debug)]
pub(super) struct Settings {
    /// The file's endpoint, when no variable names one (the exporter reads
    /// the variables itself).
    pub(super) endpoint: Option<String>,
    pub(super) protocol: Protocol,
    pub(super) headers: BTreeMap<String, String>,
    service_name: String,
    resource: BTreeMap<String, String>,
    sampler: Option<String>,
    sampler_ratio: Option<f64>,
    pub(super) capture_content: bool,
    pub(super) metrics: bool,
    /// `None`: `OTEL_METRIC_EXPORT_INTERVAL` is set (the reader reads it).
    pub(super) metrics_interval: Option<std::time::Duration>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Settings {
    /// `None` when telemetry is off.
    pub(super) fn resolve(config: &TelemetryConfig) -> Result<Option<Self>, Error> {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none")
        {
            return Ok(None);
        }
        let from_env = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        let endpoint = match (&config.endpoint, from_env) {
            (_, true) => None,
            (Some(endpoint), false) if !endpoint.trim().is_empty() => {
                Some(endpoint.trim().trim_end_matches('/').to_owned())
            }
            _ => return Ok(None),
        };
        if let Some(endpoint) = &endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(Error::Config(format!(
                "telemetry.endpoint must be an http:// or https:// URL, not {endpoint:?}"
            )));
        }
        let protocol = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .or_else(|| config.protocol.clone())
            .as_deref()
            .map(str::trim)
        {
            None | Some("http/protobuf") => Protocol::Protobuf,
            Some("http/json") => Protocol::Json,
            Some("grpc") => {
                return Err(Error::Config(
                    "OTLP over gRPC is not built into agwire: use http/protobuf (a collector's port 4318)".into(),
                ));
            }
            Some(other) => {
                return Err(Error::Config(format!(
                    "unknown OTLP protocol {other:?}: http/protobuf or http/json"
                )));
            }
        };
        if let Some(ratio) = config.sampler_ratio
            && !(0.0..=1.0).contains(&ratio)
        {
            return Err(Error::Config(
                "telemetry.sampler_ratio must be between 0 and 1".into(),
            ));
        }
        const SAMPLERS: [&str; 6] = [
            "always_on",
            "always_off",
            "traceidratio",
            "parentbased_always_on",
            "parentbased_always_off",
            "parentbased_traceidratio",
        ];
        if let Some(sampler) = &config.sampler
            && !SAMPLERS.contains(&sampler.as_str())
        {
            return Err(Error::Config(format!(
                "unknown telemetry.sampler {sampler:?}: one of {}",
                SAMPLERS.join(", ")
            )));
        }
        let metrics_interval = match var("OTEL_METRIC_EXPORT_INTERVAL") {
            Some(_) => None,
            None => Some(std::time::Duration::from_secs(
                config.metrics_interval_seconds.max(1),
            )),
        };
        Ok(Some(Self {
            endpoint,
            protocol,
            headers: config.headers.clone(),
            service_name: config
                .service_name
                .clone()
                .unwrap_or_else(|| "agwire".into()),
            resource: config.resource.clone(),
            sampler: config.sampler.clone(),
            sampler_ratio: config.sampler_ratio,
            capture_content: config.capture_content
                || var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            metrics: config.metrics,
            metrics_interval,
        }))
    }

    /// The file's sampler, unless `OTEL_TRACES_SAMPLER` is set (the SDK
    /// reads it itself).
    pub(super) fn sampler(&self) -> Option<Sampler> {
        if var("OTEL_TRACES_SAMPLER").is_some() {
            return None;
        }
        let ratio = self.sampler_ratio.unwrap_or(1.0);
        Some(match self.sampler.as_deref()? {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::TraceIdRatioBased(ratio),
            "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
            "parentbased_traceidratio" => {
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
            }
            _ => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        })
    }

    /// This process: `service.name` (`OTEL_SERVICE_NAME`, else
    /// `OTEL_RESOURCE_ATTRIBUTES`', else the file's), `service.version`, a
    /// `service.instance.id` of its own (replicas tell apart), the file's
    /// attributes, then `OTEL_RESOURCE_ATTRIBUTES` over them.
    pub(super) fn resource(&self) -> Resource {
        let mut attributes = vec![
            KeyValue::new("service.name", self.service_name.clone()),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("service.instance.id", uuid::Uuid::new_v4().to_string()),
        ];
        attributes.extend(
            self.resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        );
        let resource = Resource::builder_empty()
            .with_attributes(attributes)
            .with_detectors(&[Box::new(
                opentelemetry_sdk::resource::EnvResourceDetector::new(),
            )]);
        // OTEL_SERVICE_NAME wins over OTEL_RESOURCE_ATTRIBUTES' (the spec).
        match var("OTEL_SERVICE_NAME") {
            Some(name) => resource.with_service_name(name).build(),
            None => resource.build(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn config(toml: &str) -> TelemetryConfig {
        crate::config::Config::parse(&format!("[telemetry]\n{toml}\n"))
            .unwrap()
            .telemetry
    }

    /// Whether the environment names an endpoint (then the file's is not
    /// the one that decides, and these cases do not apply).
    fn endpoint_in_env() -> bool {
        var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || var("OTEL_SDK_DISABLED").is_some()
            || var("OTEL_EXPORTER_OTLP_PROTOCOL").is_some()
            || var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").is_some()
    }

    #[test]
    fn without_an_endpoint_telemetry_is_off() {
        if endpoint_in_env() {
            return;
        }
        assert!(Settings::resolve(&config("")).unwrap().is_none());
        assert!(
            Settings::resolve(&config("endpoint = \" \""))
                .unwrap()
                .is_none()
        );
        let on = Settings::resolve(&config("endpoint = \"http://collector:4318/\""))
            .unwrap()
            .unwrap();
        assert_eq!(on.endpoint.as_deref(), Some("http://collector:4318"));
        assert_eq!(on.protocol, Protocol::Protobuf);
    }

    #[test]
    fn a_setting_the_exporter_cannot_honour_is_refused_by_name() {
        if endpoint_in_env() {
            return;
        }
        for (bad, why) in [
            ("protocol = \"grpc\"", "not built into agwire"),
            ("protocol = \"thrift\"", "unknown OTLP protocol"),
            ("sampler = \"sometimes\"", "unknown telemetry.sampler"),
            ("sampler_ratio = 1.5", "between 0 and 1"),
        ] {
            let with = config(&format!("endpoint = \"http://localhost:4318\"\n{bad}"));
            let error = Settings::resolve(&with).unwrap_err().to_string();
            assert!(error.contains(why), "{bad}: {error}");
        }
        let error = Settings::resolve(&config("endpoint = \"localhost:4318\""))
            .unwrap_err()
            .to_string();
        assert!(error.contains("http:// or https://"), "{error}");
        let refused =
            crate::config::Config::parse("[telemetry]\nusers = \"hashed\"\n").unwrap_err();
        assert!(refused.to_string().contains("users"), "{refused}");
        let refused = crate::config::Config::parse("[telemetry]\nuser = \"masked\"\n").unwrap_err();
        assert!(refused.to_string().contains("masked"), "{refused}");
    }

    #[test]
    fn the_user_is_hashed_unless_told_otherwise() {
        let hashed = UserAttribute::Hashed.attribute("alice").unwrap();
        assert_eq!(hashed.0, "enduser.pseudo.id");
        // sha256("alice")
        assert_eq!(
            hashed.1,
            "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90"
        );
        assert_eq!(
            UserAttribute::Plain.attribute("alice"),
            Some(("enduser.id", "alice".to_owned()))
        );
        assert_eq!(UserAttribute::Omitted.attribute("alice"), None);
        assert_eq!(config("user = \"omitted\"").user, UserAttribute::Omitted);
    }
}
