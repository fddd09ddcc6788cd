//! Steps 1 and 3 remembered: the plan of each attribute text, per manifest,
//! across the sites of one rustc process.
//!
//! A crate with 500 sites over 10 kernels writes a few dozen distinct
//! attributes; parsing each with syn and running the tuner per arch at
//! opt-level 0 was most of the macro's own time. A site whose attribute has
//! the same text as an earlier site's, read against the same parsed
//! manifest, gets that site's plan without either step. Only plans of sites
//! without any error are kept, so every error is still computed (and
//! spanned) at its own site.
//!
//! What the key assumes: a plan depends on nothing but the attribute's
//! tokens and the manifest (no span, no environment; `validate::plan` reads
//! only those two). The tokens' text stands for the tokens, except around a
//! group without delimiters (what a `macro_rules!` fragment becomes), which
//! prints as its contents: such an attribute is never memoized. The
//! manifest is compared by identity: `manifest::cached` hands out the same
//! `Arc` for the same file version and a new one when the file changes, and
//! a new manifest empties the memo (a long-lived proc-macro server sees a
//! rebuilt manifest).

use crate::validate::Plan;
use occ_model::schema::manifest::Manifest;
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

struct Memo {
    manifest: Arc<Manifest>,
    plans: HashMap<String, Plan>,
}

static MEMO: Mutex<Option<Memo>> = Mutex::new(None);

/// The memo key of an attribute's tokens: their text, or `None` when a
/// group without delimiters makes the text ambiguous.
pub fn key(attr: &TokenStream) -> Option<String> {
    fn plain(tokens: &TokenStream) -> bool {
        tokens.clone().into_iter().all(|t| match t {
            TokenTree::Group(g) => g.delimiter() != Delimiter::None && plain(&g.stream()),
            _ => true,
        })
    }
    plain(attr).then(|| attr.to_string())
}

/// The plan remembered for `key` against this very manifest, if any.
pub fn get(manifest: &Arc<Manifest>, key: &str) -> Option<Plan> {
    let memo = MEMO.lock().ok()?;
    let memo = memo.as_ref()?;
    Arc::ptr_eq(&memo.manifest, manifest)
        .then(|| memo.plans.get(key).cloned())
        .flatten()
}

/// Remembers the plan of a site that gave no error.
pub fn put(manifest: &Arc<Manifest>, key: String, plan: &Plan) {
    // A poisoned lock: remember nothing, compute every site.
    let Ok(mut memo) = MEMO.lock() else {
        return;
    };
    let memo = match &mut *memo {
        Some(m) if Arc::ptr_eq(&m.manifest, manifest) => m,
        other => other.insert(Memo {
            manifest: manifest.clone(),
            plans: HashMap::new(),
        }),
    };
    memo.plans.insert(key, plan.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{args, validate};
    use quote::quote;

    /// A manifest of one kernel `k` on sm_80 with `registers` registers,
    /// as a build assembles it.
    fn manifest(registers: u32) -> Arc<Manifest> {
        Arc::new(validate::tests::manifest(
            registers,
            Default::default(),
            &[],
        ))
    }

    /// What expand does: the memo's plan, else a computed one, remembered.
    fn plan(attr: TokenStream, m: &Arc<Manifest>) -> (Option<Plan>, bool) {
        let key = key(&attr);
        if let Some(plan) = key.as_deref().and_then(|k| get(m, k)) {
            return (Some(plan), true);
        }
        let (a, mut errors) = args::parse(attr);
        let plan = validate::plan(&a, m, &mut errors);
        if let (Some(plan), Some(key), true) = (&plan, key, errors.is_empty()) {
            put(m, key, plan);
        }
        (plan, false)
    }

    // One test: the memo is process-wide.
    #[test]
    fn plans_are_remembered_per_attribute_and_manifest() {
        let m = manifest(32);
        let (wide, hit) = plan(quote!(kernel = "k"), &m);
        assert!(!hit);
        let (again, hit) = plan(quote!(kernel = "k"), &m);
        assert!(hit, "the same options are remembered");
        assert_eq!(wide, again);
        let (narrow, hit) = plan(quote!(kernel = "k", max_block_size = 128), &m);
        assert!(!hit);
        let size = |p: &Option<Plan>| p.as_ref().map(|p| p.rows[0].block_size);
        assert_eq!(size(&narrow), Some(128));
        assert_ne!(wide, narrow, "other options, another plan");
        assert_eq!(
            plan(quote!(kernel = "k", max_block_size = 128), &m),
            (narrow, true)
        );
        assert_eq!(plan(quote!(kernel = "k"), &m).0, wide);

        // A rebuilt manifest (a new Arc, more registers) is seen.
        let heavy = manifest(128);
        let (rebuilt, hit) = plan(quote!(kernel = "k"), &heavy);
        assert!(!hit, "a new manifest empties the memo");
        assert_ne!(rebuilt, wide);
        assert_eq!(size(&rebuilt), Some(512));
        assert_eq!(plan(quote!(kernel = "k"), &heavy), (rebuilt, true));

        // A site with an error is never remembered: its error comes back.
        let (bad, _) = plan(quote!(kernel = "k", min_occupancy = 0.9), &heavy);
        assert!(bad.is_none());
        let attr = quote!(kernel = "k", min_occupancy = 0.9);
        assert!(get(&heavy, &key(&attr).unwrap_or_default()).is_none());
    }

    #[test]
    fn groups_without_delimiters_are_not_keyed() {
        use proc_macro2::Group;
        let inner = Group::new(Delimiter::None, quote!(1 + 2));
        assert_eq!(key(&quote!(kernel = "k", dynamic_smem = #inner)), None);
        assert!(key(&quote!(kernel = "k", block = (32, _))).is_some());
    }
}
