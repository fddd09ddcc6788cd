//! Step 4: the expansion. The original function comes back with the consts
//! (or, on error, `compile_error!` and placeholder consts, so one mistake
//! gives one message) injected at the top of its body.

use crate::args;
use crate::manifest::{self, Loaded, Source, OVERRIDE_VAR};
use crate::validate::{self, Plan};
use occ_model::manifest::FILE_NAME;
use proc_macro2::{Delimiter, Group, Literal, Span, TokenStream, TokenTree};
use quote::quote;
use syn::spanned::Spanned;

/// Expands `#[launch_config(attr)] item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (args, mut errors) = args::parse(attr);
    // The item is not parsed: its body is spliced as tokens, which keeps
    // hundreds of sites cheap (parsing whole functions dominated the cost).
    let func = split_body(&item);
    if func.is_none() {
        errors.at(
            item.span(),
            "#[launch_config] goes on a function or method with a body",
        );
    }
    let span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
    let (plan, loaded) = match manifest::load() {
        Ok(loaded) => (
            validate::plan(&args, &loaded.manifest, &mut errors),
            Some(loaded),
        ),
        Err(message) => {
            errors.at(span, message);
            (None, None)
        }
    };
    let Some((head, body)) = func else {
        let error = errors.into_error().map(|e| e.to_compile_error());
        return quote!(#error #item);
    };
    let injected = match (errors.into_error(), plan) {
        (None, Some(plan)) => consts(&plan, &Uses::of(&body.stream())),
        (error, _) => {
            let error = error
                .unwrap_or_else(|| syn::Error::new(span, "no launch could be computed; rebuild"))
                .to_compile_error();
            let placeholders = placeholders();
            quote!(#error #placeholders)
        }
    };
    let tracking = tracking(loaded.as_ref());
    let inner = body.stream();
    let mut new_body = Group::new(Delimiter::Brace, quote!(#injected #tracking #inner));
    new_body.set_span(body.span());
    let mut out = head;
    out.extend([TokenTree::Group(new_body)]);
    out
}

/// Splits a function item into everything before its body and the body (a
/// brace group that is the last token, after an `fn` keyword); `None` for
/// anything else (a struct, a declaration without a body, ...).
fn split_body(item: &TokenStream) -> Option<(TokenStream, Group)> {
    let mut tokens: Vec<TokenTree> = item.clone().into_iter().collect();
    let body = match tokens.pop()? {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => g,
        _ => return None,
    };
    let is_fn = tokens
        .iter()
        .any(|t| matches!(t, TokenTree::Ident(i) if i == "fn"));
    if !is_fn {
        return None;
    }
    Some((tokens.into_iter().collect(), body))
}

/// Makes rustc rebuild the crate when the manifest or `OCC_MANIFEST` changes.
/// The manifest is included once per rustc process (one crate): a second
/// `include_bytes!` of it adds nothing but work (hundreds of sites each
/// hashing a large manifest dominated their compile time).
fn tracking(loaded: Option<&Loaded>) -> TokenStream {
    static TRACKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let key = match loaded.map(|l| &l.source) {
        Some(Source::OutDir) => format!("out:{}", option_env_out_dir()),
        Some(Source::Override(path)) => format!("override:{}", path.display()),
        None => String::new(),
    };
    let first = match TRACKED.lock() {
        Ok(mut seen) if !seen.contains(&key) => {
            seen.push(key);
            true
        }
        Ok(_) => false,
        // A poisoned lock: include again rather than miss the tracking.
        Err(_) => true,
    };
    if !first {
        return TokenStream::new();
    }
    let file = match loaded.map(|l| &l.source) {
        Some(Source::OutDir) => {
            let rel = format!("/occ/{FILE_NAME}");
            quote!(
                const _: &[u8] =
                    ::core::include_bytes!(::core::concat!(::core::env!("OUT_DIR"), #rel));
            )
        }
        Some(Source::Override(path)) => {
            let path = path.display().to_string();
            quote!(
                const _: &[u8] = ::core::include_bytes!(#path);
            )
        }
        None => TokenStream::new(),
    };
    quote! {
        #file
        const _: ::core::option::Option<&str> = ::core::option_env!(#OVERRIDE_VAR);
    }
}

/// The `OUT_DIR` of the crate being compiled (empty when unset).
fn option_env_out_dir() -> String {
    std::env::var("OUT_DIR").unwrap_or_default()
}

/// Which injected names a body refers to. The expansion injects only
/// those: 500 sites that each use three of the nine names would otherwise
/// cost rustc 500 × six dead items. A body that calls a macro other than
/// std's formatting and assertion macros may reach the names through it
/// (a `macro_rules!` of the user's that expands to `BLOCK_SIZE`), so then
/// every name is injected.
struct Uses {
    all: bool,
    names: Vec<String>,
}

/// std macros that only take the tokens they are given.
const PLAIN_MACROS: [&str; 22] = [
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "dbg",
    "eprint",
    "eprintln",
    "format",
    "format_args",
    "matches",
    "panic",
    "print",
    "println",
    "todo",
    "unimplemented",
    "unreachable",
    "vec",
    "write",
    "writeln",
    "concat",
];

impl Uses {
    fn of(body: &TokenStream) -> Uses {
        let mut uses = Uses {
            all: false,
            names: Vec::new(),
        };
        uses.scan(body.clone());
        uses
    }

    fn scan(&mut self, tokens: TokenStream) {
        let mut last_ident: Option<String> = None;
        for t in tokens {
            match t {
                TokenTree::Ident(i) => {
                    let name = i.to_string();
                    if INJECTED.contains(&name.as_str()) && !self.names.contains(&name) {
                        self.names.push(name.clone());
                    }
                    last_ident = Some(name);
                }
                TokenTree::Punct(p) if p.as_char() == '!' => {
                    if let Some(m) = &last_ident {
                        if !PLAIN_MACROS.contains(&m.as_str()) {
                            self.all = true;
                        }
                    }
                    last_ident = None;
                }
                TokenTree::Group(g) => {
                    self.scan(g.stream());
                    last_ident = None;
                }
                // `println!("{BLOCK_SIZE}")`: a format string captures names.
                TokenTree::Literal(l) => {
                    let text = l.to_string();
                    for name in INJECTED {
                        if text.contains(name) && !self.names.iter().any(|n| n == name) {
                            self.names.push(name.to_string());
                        }
                    }
                    last_ident = None;
                }
                _ => last_ident = None,
            }
        }
    }

    fn wants(&self, name: &str) -> bool {
        self.all
            || self.names.iter().any(|n| n == name)
            // grid_for reads BLOCK_SIZE.
            || (name == "BLOCK_SIZE" && self.names.iter().any(|n| n == "grid_for"))
    }
}

/// Every name the expansion can inject.
const INJECTED: [&str; 10] = [
    "KERNEL_NAME",
    "ARCH",
    "BLOCK_SIZE",
    "BLOCK",
    "DYNAMIC_SMEM_BYTES",
    "BLOCKS_PER_SM",
    "OCCUPANCY",
    "MEASURED",
    "LAUNCH",
    "grid_for",
];

fn consts(plan: &Plan, uses: &Uses) -> TokenStream {
    let Some(first) = plan.rows.first() else {
        return placeholders();
    };
    let name = &plan.kernel_name;
    let arch = &first.arch;
    let block = first.block_size;
    let [bx, by, bz] = first.block;
    let smem = first.dynamic_smem;
    let blocks = first.blocks_per_sm;
    let occupancy = f32_lit(first.occupancy);
    let measured = first.measured;
    let mut out = TokenStream::new();
    // No doc comments: items inside a function body are not documented,
    // and each would be one more attribute for rustc per site.
    let mut item = |which: &str, tokens: TokenStream| {
        if uses.wants(which) {
            out.extend(quote!(#[allow(dead_code)] #tokens));
        }
    };
    item("KERNEL_NAME", quote!(const KERNEL_NAME: &str = #name;));
    item("ARCH", quote!(const ARCH: &str = #arch;));
    item("BLOCK_SIZE", quote!(const BLOCK_SIZE: u32 = #block;));
    item(
        "BLOCK",
        quote!(const BLOCK: (u32, u32, u32) = (#bx, #by, #bz);),
    );
    item(
        "DYNAMIC_SMEM_BYTES",
        quote!(const DYNAMIC_SMEM_BYTES: u32 = #smem;),
    );
    item("BLOCKS_PER_SM", quote!(const BLOCKS_PER_SM: u32 = #blocks;));
    item("OCCUPANCY", quote!(const OCCUPANCY: f32 = #occupancy;));
    item("MEASURED", quote!(const MEASURED: bool = #measured;));
    if uses.wants("LAUNCH") {
        let rows = plan.rows.iter().map(|r| {
            let (a, maj, min, s, n) = (&r.arch, r.major, r.minor, r.dynamic_smem, r.blocks_per_sm);
            let [x, y, z] = r.block;
            let o = f32_lit(r.occupancy);
            quote!(::occ::BakedArch {
                arch: #a,
                major: #maj,
                minor: #min,
                block: (#x, #y, #z),
                dynamic_smem_bytes: #s,
                blocks_per_sm: #n,
                occupancy: #o,
            })
        });
        // One table per site; the rules that read it (which row's code runs
        // on a GPU, grids) are `occ`'s, not pasted here.
        item(
            "LAUNCH",
            quote!(const LAUNCH: ::occ::Baked = ::occ::Baked {
                kernel: #name,
                archs: &[#(#rows),*],
            };),
        );
    }
    item(
        "grid_for",
        quote!(
            const fn grid_for(n: u32) -> u32 {
                n.div_ceil(BLOCK_SIZE)
            }
        ),
    );
    out
}

/// The same names with harmless values, so a failed site gives one error.
fn placeholders() -> TokenStream {
    quote! {
        #[allow(dead_code)]
        const KERNEL_NAME: &str = "";
        #[allow(dead_code)]
        const ARCH: &str = "";
        #[allow(dead_code)]
        const BLOCK_SIZE: u32 = 1;
        #[allow(dead_code)]
        const BLOCK: (u32, u32, u32) = (1, 1, 1);
        #[allow(dead_code)]
        const DYNAMIC_SMEM_BYTES: u32 = 0;
        #[allow(dead_code)]
        const BLOCKS_PER_SM: u32 = 0;
        #[allow(dead_code)]
        const OCCUPANCY: f32 = 0.0;
        #[allow(dead_code)]
        const MEASURED: bool = false;
        #[allow(dead_code)]
        const LAUNCH: ::occ::Baked = ::occ::Baked {
            kernel: "",
            archs: &[],
        };
        #[allow(dead_code)]
        const fn grid_for(n: u32) -> u32 {
            n
        }
    }
}

fn f32_lit(v: f64) -> Literal {
    let v = v as f32;
    Literal::f32_suffixed(if v.is_finite() { v } else { 0.0 })
}
