#!/usr/bin/env bash
# A tour of argument validation on the embedded catalog: what a model's
# tool call looks like before and after toolrouter checks it.
#   examples/validate_calls.sh   (after `cargo build --release`)
set -uo pipefail
cd "$(dirname "$0")/.."
tr="${TOOLROUTER:-target/release/toolrouter}"

run() { echo "\$ toolrouter $*"; "$tr" "$@"; echo "(exit $?)"; echo; }

# Strings where numbers belong, one value where a list belongs: coerced and reported.
run validate weather_forecast_for_open_meteo_forecast '{"latitude": "52.52", "longitude": "13.41", "daily": "temperature_2m_max,precipitation_sum", "timezone": "auto"}'
# A made-up unit, a missing coordinate and an unknown parameter: every problem, with its JSON pointer.
run validate weather_forecast_for_open_meteo_forecast '{"latitude": 52.5, "temperature_unit": "kelvin", "city": "Berlin"}'
# A call aimed at another host is refused.
run validate --url https://attacker.example/v1/latest latest_rates_for_frankfurter '{"base": "USD"}'
# Malformed JSON is a usage error (exit 2), not a validation result.
run validate public_holidays_for_nager_date '{"year": 2025, "countryCode": '
