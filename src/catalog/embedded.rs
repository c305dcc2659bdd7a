//! The catalog built into the binary: OpenAPI specs of a few free public
//! APIs that need no key (`openapi/examples/`). It is the catalog when no
//! source is configured, so `toolrouter` works out of the box; on a machine
//! without internet, calls to these APIs fail later as "unreachable".

/// `(file name, YAML text)` of each embedded spec.
pub(crate) const SPECS: [(&str, &str); 4] = [
    ("open-meteo-forecast.yaml", include_str!("../../openapi/examples/open-meteo-forecast.yaml")),
    ("open-meteo-geocoding.yaml", include_str!("../../openapi/examples/open-meteo-geocoding.yaml")),
    ("frankfurter.yaml", include_str!("../../openapi/examples/frankfurter.yaml")),
    ("nager-date.yaml", include_str!("../../openapi/examples/nager-date.yaml")),
];

#[cfg(test)]
mod tests {
    use crate::catalog::{Catalog, Origin, Sources};

    #[test]
    fn embedded_specs_load_cleanly() {
        let catalog = Catalog::load(&Sources::default()).unwrap();
        let report = catalog.report();
        assert!(report.skipped_files.is_empty() && report.skipped_apis.is_empty(), "{report:?}");
        assert_eq!(catalog.tools().len(), super::SPECS.len());
        assert!(catalog.tools().iter().all(|t| t.origin == Origin::Embedded && t.host.is_some()));
        assert_eq!(catalog.apis().len(), 11);
        let api = catalog.api(catalog.resolve("weather_forecast_for_open_meteo_forecast").first().unwrap());
        assert_eq!(api.url_template.as_deref(), Some("https://api.open-meteo.com/v1/forecast"));
        let series = catalog.api(catalog.resolve("rates_time_series_for_frankfurter").first().unwrap());
        assert_eq!(series.url_template.as_deref(), Some("https://api.frankfurter.dev/v1/{start_date}..{end_date}"));
    }
}
