//! The kernel list comes from the object: a job's kernels are its PTX's
//! entries, and its ptxas log must account for every one and only those.
//! The fixtures are nvcc 13.5's output for `two-kernels.cu`, made in a
//! scratch folder by
//!
//! ```text
//! nvcc --cubin -gencode arch=compute_80,code=sm_80 -Xptxas -v -keep --keep-dir t \
//!      -o t/out.cubin two-kernels.cu 2> two-kernels.13.5.sm_80.log
//! ```
//!
//! (the PTX is `-keep`'s `t/two-kernels.ptx`).

use occ_model::assemble::{self, Assembly};
use occ_model::compiler::analyze::{contribution, JobText};
use occ_model::compiler::params::Signatures;
use occ_model::schema::manifest::Origin;
use occ_model::Error;

const LOG: &str = include_str!("../fixtures/two-kernels.13.5.sm_80.log");
const PTX: &str = include_str!("../fixtures/two-kernels.13.5.sm_80.ptx");

fn build(log: &str, ptx: &str) -> Result<Vec<String>, Error> {
    let signatures = Signatures::default();
    let job = JobText {
        source: "kernels/two.cu",
        arch: "sm_80",
        name: "two.sm_80",
        args: &[],
        log,
        ptx,
        signatures: &signatures,
        launches: &[],
    };
    let jobs = [contribution(job, None)?];
    let manifest = assemble::manifest(&Assembly {
        package: "p",
        origin: Origin::Nvcc,
        nvcc: "13.5",
        archs: &["sm_80".to_string()],
        jobs: &jobs,
        launches: &[],
        dynamic_smem: &[],
        measured: &[],
        device_code: &[],
        others: None,
    })?;
    Ok(manifest.kernels.into_iter().map(|k| k.name).collect())
}

/// `log` less every line holding `text` (what a filtering launcher leaves).
fn without(log: &str, text: &str) -> String {
    log.lines()
        .filter(|l| !l.contains(text))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_log_that_accounts_for_every_entry_gives_every_kernel() {
    assert_eq!(build(LOG, PTX).expect("builds"), ["ka", "kb"]);
}

#[test]
fn a_lost_log_is_an_error_naming_every_kernel_not_an_empty_table() {
    // What a launcher that hides nvcc's stderr leaves: nothing.
    let err = build("", PTX).expect_err("no log");
    assert!(
        matches!(&err, Error::Unaccounted(u) if u.missing == ["ka", "kb"] && u.extra.is_empty()),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("kernels/two.cu for sm_80"), "{text}");
    assert!(text.contains("OCC_NVCC_LAUNCHER"), "{text}");
}

#[test]
fn a_log_with_one_kernel_dropped_or_one_of_another_compile_is_an_error() {
    // The log less kb's five lines (a filter that dropped them).
    let start = LOG
        .find("ptxas info    : Compiling entry function 'kb'")
        .expect("kb");
    let end = LOG
        .find("ptxas info    : Compiling entry function 'ka'")
        .expect("ka");
    let filtered = format!("{}{}", &LOG[..start], &LOG[end..]);
    assert!(matches!(build(&filtered, PTX), Err(Error::Unaccounted(u)) if u.missing == ["kb"]));
    // A log naming a kernel the PTX does not define.
    let renamed = LOG.replace("'kb'", "'kc'").replace("for kb", "for kc");
    assert!(matches!(
        build(&renamed, PTX),
        Err(Error::Unaccounted(u)) if u.missing == ["kb"] && u.extra == ["kc"]
    ));
}

#[test]
fn a_log_whose_register_lines_were_filtered_out_is_an_error_not_zero_registers() {
    // What a launcher that drops the `Used` lines leaves: every kernel
    // named, none counted.
    let err = build(&without(LOG, "Used "), PTX).expect_err("no register counts");
    assert!(
        matches!(&err, Error::Unaccounted(u) if u.missing.is_empty() && u.uncounted == ["kb", "ka"]),
        "{err:?}"
    );
    assert!(err.to_string().contains("lack a resource line"), "{err}");
}

#[test]
fn a_log_whose_spill_lines_were_filtered_out_is_an_error_not_zero_spills() {
    let err = build(&without(LOG, "spill"), PTX).expect_err("no spill counts");
    assert!(
        matches!(&err, Error::Unaccounted(u) if u.uncounted == ["kb", "ka"]),
        "{err:?}"
    );
}
