//! The results file `occ::tune` writes is the one occ-model reads (and
//! `cargo occ tune import` merges): written from recorded timings, read
//! back with every field, names with quotes and backslashes intact.

use occ::tune::{results_json, tune, Device, Measurement, Recorded};
use occ_model::schema::measured::Results;
use std::path::Path;

#[test]
fn the_runtime_writes_the_results_schema_occ_model_reads() {
    let timer = Recorded::new([(128, 4.5), (256, 3.25), (512, 3.5)]);
    let tuned = tune(&timer, &[128, 256, 512], |_| Ok(()), || Ok(())).expect("tunes");
    let device = Device {
        name: "GPU \"x\" \\ 1".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        clock_khz: Some(1_980_000),
    };
    let m = Measurement {
        kernel: "_Z4axpyfPKfPfi".into(),
        source: "kernels/axpy.cu".into(),
        arch: "sm_90".into(),
        bucket: "n=1M".into(),
        cubin_hash: "fnv1a64:0123456789abcdef".into(),
        candidates_hash: occ_model::schema::measured::candidates_hash(&[128, 256, 512]),
        max_occupancy: Some(512),
        tuned,
    };
    let text = results_json(
        "app",
        &device,
        "V13.5.37",
        &[
            m.clone(),
            Measurement {
                bucket: "n=1K".into(),
                ..m
            },
        ],
    );
    let r = Results::from_json(&text, Path::new("occ-tune.json"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(r.package, "app");
    assert_eq!(r.device.name, "GPU \"x\" \\ 1");
    assert_eq!(
        (r.device.compute_capability.as_str(), r.device.sm_count),
        ("9.0", 132)
    );
    assert_eq!(r.device.clock_khz, Some(1_980_000));
    assert_eq!(r.measurements.len(), 2);
    let back = r.to_measured();
    assert_eq!(back[0].best, 256);
    assert_eq!(back[0].time_at(512), Some(3.5));
    assert_eq!(back[1].bucket, "n=1M");
    assert_eq!(back[0].max_occupancy, Some(512));
    assert_eq!(back[0].speedup_over(512), Some(3.5 / 3.25));
}
