use super::*;
use crate::trajectory::{Call, Format, Trajectory};

fn traj(calls: &[(&str, Option<bool>)], solved: Option<bool>) -> Trajectory {
    Trajectory {
        source: "test".into(),
        format: Format::StepToolEval,
        query_id: None,
        query: String::new(),
        offered: calls.iter().map(|(n, _)| n.to_string()).collect(),
        calls: calls
            .iter()
            .map(|(n, failed)| Call { name: n.to_string(), arguments: "{}".into(), response: None, failed: *failed })
            .collect(),
        abandoned: Vec::new(),
        finish: Some(crate::trajectory::Finish::GiveAnswer),
        finish_call: None,
        solved,
    }
}

fn catalog() -> Catalog {
    Catalog::load(&crate::catalog::Sources::default()).unwrap()
}

const GEO: &str = "search_locations_for_open_meteo_geocoding";
const FORECAST: &str = "weather_forecast_for_open_meteo_forecast";
const RATES: &str = "latest_rates_for_frankfurter";

fn key(name: &str) -> NodeKey {
    NodeKey::Api(name.to_string())
}

#[test]
fn clean_path_drops_failures_and_keeps_the_last_repeat() {
    let calls = [("a", true), ("b", false), ("a", true), ("c", true), ("b", true)];
    assert_eq!(build::clean_path(calls.into_iter()), ["a", "c", "b"]);
    assert!(build::clean_path([("x", false)].into_iter()).is_empty());
}

#[test]
fn static_weights_and_availability_by_hand() {
    let c = catalog();
    let ok = Some(false);
    let trajectories = vec![
        // GEO -> FORECAST -> Finish, twice; GEO -> RATES -> Finish once.
        traj(&[(GEO, ok), (FORECAST, ok)], Some(true)),
        traj(&[(GEO, ok), (FORECAST, ok)], Some(true)),
        traj(&[(GEO, ok), (RATES, ok)], Some(true)),
        // A failed GEO call then a good one: the path is GEO -> Finish.
        traj(&[(GEO, Some(true)), (GEO, ok)], Some(true)),
        // Unsuccessful: no transitions, but its calls count for availability.
        traj(&[(RATES, Some(true)), (FORECAST, ok)], Some(false)),
        // Too long (9 calls): no transitions.
        traj(&[(GEO, ok); 9], Some(true)),
        // A name no API has.
        traj(&[("made_up_for_nothing", ok)], Some(true)),
    ];
    let g = build(&c, &trajectories, crate::config::DEFAULT_GRAPH_MAX_CALLS, Params::default());
    let report = g.meta.build.clone().unwrap();
    assert_eq!((report.trajectories, report.successful, report.too_long, report.paths), (7, 6, 1, 4));
    assert_eq!(report.empty_after_cleaning, 1, "the made-up name leaves nothing");
    assert_eq!(report.unmapped.values().sum::<usize>(), 1);

    // Out of GEO: FORECAST 2, RATES 1, Finish 1 -> w = 2/4, 1/4, 1/4.
    let out = g.successors(&key(GEO));
    let w = |k: &NodeKey| out.iter().find(|s| &s.key == k).unwrap().w;
    assert_eq!(w(&key(FORECAST)), 0.5);
    assert_eq!(w(&key(RATES)), 0.25);
    assert_eq!(w(&NodeKey::Finish), 0.25);
    assert_eq!(g.weight(&key(FORECAST), &NodeKey::Finish), 1.0);
    assert_eq!(out[0].key, key(FORECAST), "heaviest first");

    // Availability over all calls with a known outcome:
    // GEO 3 + (1 failed, 1 ok) + 9 = 14 calls, 13 ok; RATES: 1 ok, 1 failed.
    assert_eq!(g.alpha(&key(GEO)), Some(13.0 / 14.0));
    assert_eq!(g.alpha(&key(RATES)), Some(0.5));
    assert_eq!(g.alpha(&key(FORECAST)), Some(1.0));
}

#[test]
fn f_is_linear_above_zero_and_exponential_below() {
    let g = ToolGraph::new(Params { a: 0.5, beta: 0.8 });
    assert_eq!(g.f(0.0), 1.0);
    assert_eq!(g.f(2.0), 2.0);
    assert!((g.f(-2.0) - (-1.0f64).exp()).abs() < 1e-12);
}

#[test]
fn online_updates_by_hand() {
    let c = catalog();
    let ok = Some(false);
    let trajectories = vec![
        traj(&[(GEO, ok), (FORECAST, ok)], Some(true)),
        traj(&[(GEO, ok), (FORECAST, ok)], Some(true)),
        traj(&[(GEO, ok), (RATES, ok)], Some(true)),
        traj(&[(GEO, ok)], Some(true)),
    ];
    let mut g = build(&c, &trajectories, 8, Params { a: 0.5, beta: 0.8 });
    // Static: GEO -> FORECAST 0.5, RATES 0.25, Finish 0.25.
    // A run GEO -> FORECAST where FORECAST fails and the run fails:
    // s(GEO) = 0 (ok call, failed run), s(FORECAST) = -1.
    let run = RunRecord {
        id: "r1".into(),
        task: "weather".into(),
        calls: vec![RunCall { function: GEO.into(), ok: true }, RunCall { function: FORECAST.into(), ok: false }],
        success: false,
        standalone: false,
        at_unix_ms: 0,
    };
    g.apply(&run, Some(&c));
    assert_eq!(g.node(&key(FORECAST)).unwrap().score, -1.0);
    assert_eq!(g.node(&key(GEO)).unwrap().score, 0.0);
    // f(s): FORECAST e^-0.5, RATES 1, Finish 1 (untouched scores are 0).
    let fs = (-0.5f64).exp();
    let total = fs + 1.0 + 1.0;
    let expect = |w0: f64, f: f64| 0.8 * w0 + 0.2 * f / total;
    let w = |k: &NodeKey| g.weight(&key(GEO), k);
    assert!((w(&key(FORECAST)) - expect(0.5, fs)).abs() < 1e-12);
    assert!((w(&key(RATES)) - expect(0.25, 1.0)).abs() < 1e-12);
    assert!((w(&NodeKey::Finish) - expect(0.25, 1.0)).abs() < 1e-12);
    // The failed run adds no transitions.
    assert_eq!(g.edge_count(), 5);
    // α(FORECAST): static 1.0 (2 of 2), online 0 of 1 -> Laplace 1/3.
    assert!((g.alpha(&key(FORECAST)).unwrap() - (0.8 * 1.0 + 0.2 * (1.0 / 3.0))).abs() < 1e-12);

    // A successful run RATES -> FORECAST creates the new edge RATES -> FORECAST (w0 = 0).
    let run = RunRecord {
        id: "r2".into(),
        task: "rates then weather".into(),
        calls: vec![RunCall { function: RATES.into(), ok: true }, RunCall { function: FORECAST.into(), ok: true }],
        success: true,
        standalone: false,
        at_unix_ms: 0,
    };
    g.apply(&run, Some(&c));
    // s: RATES +1, FORECAST -1 + 1 = 0, Finish +1.
    let out = g.successors(&key(RATES));
    let to_forecast = out.iter().find(|s| s.key == key(FORECAST)).unwrap();
    assert_eq!((to_forecast.w0, to_forecast.count), (0.0, 0));
    // out(RATES) = {Finish (w0 1), FORECAST (w0 0)}: f(s_Finish) = 1.5, f(s_FORECAST) = 1.
    assert!((to_forecast.w - 0.2 * 1.0 / 2.5).abs() < 1e-12);
    assert!((g.weight(&key(RATES), &NodeKey::Finish) - (0.8 + 0.2 * 1.5 / 2.5)).abs() < 1e-12);
    assert_eq!(g.meta.online_runs, 2);
}

#[test]
fn replacing_the_static_part_keeps_online_learning() {
    let c = catalog();
    let ok = Some(false);
    let mut g = build(&c, &[traj(&[(GEO, ok), (FORECAST, ok)], Some(true))], 8, Params::default());
    g.apply(
        &RunRecord {
            id: "r".into(),
            task: String::new(),
            calls: vec![RunCall { function: RATES.into(), ok: true }],
            success: true,
            standalone: false,
            at_unix_ms: 0,
        },
        Some(&c),
    );
    let rebuilt = build(&c, &[traj(&[(GEO, ok), (RATES, ok)], Some(true))], 8, Params::default());
    g.replace_static(&rebuilt);
    assert_eq!(g.successors(&key(GEO)).iter().find(|s| s.key == key(FORECAST)), None, "the old static edge is gone");
    assert!(g.weight(&key(GEO), &key(RATES)) > 0.0);
    assert_eq!(g.node(&key(RATES)).unwrap().online_calls, 1, "online counts survive");
    assert!(g.weight(&key(RATES), &NodeKey::Finish) > 0.0, "the online edge survives");
}

#[test]
fn standalone_calls_teach_availability_only() {
    let c = catalog();
    let mut g = ToolGraph::new(Params::default());
    let call = |ok| RunRecord {
        id: "c".into(),
        task: String::new(),
        calls: vec![RunCall { function: RATES.into(), ok }],
        success: ok,
        standalone: true,
        at_unix_ms: 0,
    };
    g.apply(&call(true), Some(&c));
    g.apply(&call(false), Some(&c));
    g.apply(&call(false), Some(&c));
    let node = g.node(&key(RATES)).unwrap();
    assert_eq!((node.online_calls, node.online_successes, node.score), (3, 1, 0.0));
    assert_eq!(g.edge_count(), 0, "no transition, not even to Finish");
    // α = β·prior + (1−β)·(1 + 1)/(3 + 2), the embedded tools' prior being 0.5.
    let alpha = g.alpha(&key(RATES)).unwrap();
    assert!((alpha - (0.8 * 0.5 + 0.2 * 2.0 / 5.0)).abs() < 1e-9, "{alpha}");
}

#[test]
fn calls_seen_not_the_prior_give_the_success_rate() {
    let mut g = ToolGraph::new(Params::default());
    let api = key("low_prior_api");
    g.node_or_insert(api.clone(), 0.0);
    assert_eq!(g.call_success_rate(&api), None, "no call seen yet");
    let run = |ok: bool| RunRecord {
        id: "r".into(),
        task: "t".into(),
        calls: vec![RunCall { function: "low_prior_api".into(), ok }],
        success: ok,
        standalone: false,
        at_unix_ms: 0,
    };
    g.apply(&run(true), None);
    // α blends the prior in: 0.8 · 0 + 0.2 · 2/3, under the default α_min of
    // 0.2 after a successful call; the rate of the calls seen does not.
    assert!((g.alpha(&api).unwrap() - 0.2 * 2.0 / 3.0).abs() < 1e-9);
    assert!((g.call_success_rate(&api).unwrap() - 2.0 / 3.0).abs() < 1e-9);
    for _ in 0..4 {
        g.apply(&run(false), None);
    }
    assert!((g.call_success_rate(&api).unwrap() - 2.0 / 7.0).abs() < 1e-9);
    assert_eq!(g.call_success_rate(&NodeKey::Finish), None);
}
