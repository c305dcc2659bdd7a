//! `[telemetry]`: OpenTelemetry traces sent over OTLP (HTTP, protobuf) to
//! a collector, with the section's defaults and checks.

use serde::{Deserialize, Serialize};

/// `telemetry.service_name`: the `service.name` of the spans' resource.
pub const DEFAULT_SERVICE_NAME: &str = "toolrouter";

/// `[telemetry]`: where traces go and what they may carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP endpoint: its traces URL
    /// (`http://collector:4318/v1/traces`), or its base URL, to which
    /// `/v1/traces` is added. Empty: no traces are made.
    pub otlp_endpoint: String,
    /// The `service.name` of the spans.
    pub service_name: String,
    /// Whether spans carry messages, tool arguments and tool results
    /// (`gen_ai.input.messages` and the like). Off: only names, ids,
    /// models, counts, times and statuses.
    pub capture_content: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: String::new(),
            service_name: DEFAULT_SERVICE_NAME.to_string(),
            capture_content: false,
        }
    }
}

impl TelemetryConfig {
    /// The traces URL in effect (`None`: telemetry is off).
    pub fn traces_url(&self) -> Option<String> {
        if self.otlp_endpoint.is_empty() {
            return None;
        }
        let url = url::Url::parse(&self.otlp_endpoint).ok()?;
        Some(if url.path() == "/" || url.path().is_empty() {
            format!("{}/v1/traces", self.otlp_endpoint.trim_end_matches('/'))
        } else {
            self.otlp_endpoint.clone()
        })
    }

    /// The endpoint is an http(s) URL without credentials, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if self.otlp_endpoint.is_empty() {
            return Ok(());
        }
        let key = "telemetry.otlp_endpoint".to_string();
        match url::Url::parse(&self.otlp_endpoint) {
            Ok(url) if !matches!(url.scheme(), "http" | "https") => {
                Err((key, "must be an http:// or https:// URL (OTLP over HTTP; gRPC is not supported)".into()))
            }
            Ok(url) if !url.username().is_empty() || url.password().is_some() => {
                Err((key, "must not hold credentials".into()))
            }
            Ok(_) if self.service_name.trim().is_empty() => {
                Err(("telemetry.service_name".into(), "must not be empty".into()))
            }
            Ok(_) => Ok(()),
            Err(e) => Err((key, format!("{:?} is not a URL: {e}", self.otlp_endpoint))),
        }
    }
}
