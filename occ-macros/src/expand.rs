//! Step 4: the expansion. The original function comes back with the consts
//! (or, on error, `compile_error!` and placeholder consts, so one mistake
//! gives one message) injected at the top of its body.

use crate::args;
use crate::manifest::{self, Loaded, Source, OVERRIDE_VAR};
use crate::plans;
use crate::validate::{self, Plan};
use occ_model::schema::manifest::FILE_NAME;
use proc_macro2::{Delimiter, Group, Literal, Span, TokenStream, TokenTree};
use quote::quote;
use syn::spanned::Spanned;

/// Expands `#[launch_config(attr)] item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    // The item is not parsed: its body is spliced as tokens, which keeps
    // hundreds of sites cheap (parsing whole functions dominated the cost).
    let func = split_body(&item);
    // A site whose attribute an earlier error-free site wrote, against the
    // same manifest, takes that site's plan (`plans`): no syn parse, no tuner.
    let key = plans::key(&attr);
    let loaded = manifest::load();
    if let (Some((head, body)), Ok(loaded), Some(key)) = (&func, &loaded, &key) {
        if let Some(plan) = plans::get(&loaded.manifest, key) {
            return site(head.clone(), body, Ok(&plan), Some(loaded));
        }
    }
    let (args, mut errors) = args::parse(attr);
    if func.is_none() {
        errors.at(
            item.span(),
            "#[launch_config] goes on a function or method with a body",
        );
    }
    let span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
    let (plan, loaded) = match loaded {
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
    match (errors.into_error(), plan) {
        (None, Some(plan)) => {
            if let (Some(key), Some(loaded)) = (key, &loaded) {
                plans::put(&loaded.manifest, key, &plan);
            }
            site(head, &body, Ok(&plan), loaded.as_ref())
        }
        (error, _) => {
            let error = error
                .unwrap_or_else(|| syn::Error::new(span, "no launch could be computed; rebuild"))
                .to_compile_error();
            site(head, &body, Err(error), loaded.as_ref())
        }
    }
}

/// The function again: its head, then its body with the plan's consts (or
/// the error and placeholders) and the manifest's tracking at the top.
fn site(
    mut head: TokenStream,
    body: &Group,
    plan: Result<&Plan, TokenStream>,
    loaded: Option<&Loaded>,
) -> TokenStream {
    let mut inner = body.stream();
    let injected = match plan {
        Ok(plan) => {
            let mut uses = Uses::of(&inner);
            // `grid_for(n)` calls become `u32::div_ceil(n, BLOCK)`: no
            // function item per site for rustc to check and generate.
            if let (true, Some(row)) = (uses.inlines_grid(), plan.rows.first()) {
                if let Some(rewritten) = inline_grid_calls(&inner, row.block_size) {
                    inner = rewritten;
                    uses.grid_inlined = true;
                }
            }
            consts(plan, &uses)
        }
        Err(error) => {
            let placeholders = placeholders();
            quote!(#error #placeholders)
        }
    };
    let tracking = tracking(loaded);
    let mut new_body = Group::new(Delimiter::Brace, quote!(#injected #tracking #inner));
    new_body.set_span(body.span());
    head.extend([TokenTree::Group(new_body)]);
    head
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
    /// The names the body surely uses: a bare identifier (not after `.`
    /// or `::`, not only inside a literal). Their consts need no
    /// `#[allow(dead_code)]`, an attribute rustc would process per site.
    bare: Vec<String>,
    /// Every `grid_for(..)` of the body was rewritten ([`inline_grid_calls`]).
    grid_inlined: bool,
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
            bare: Vec::new(),
            grid_inlined: false,
        };
        uses.scan(body.clone());
        uses
    }

    fn scan(&mut self, tokens: TokenStream) {
        let mut last_ident: Option<String> = None;
        // The previous token was `.` or `:` (a field, method or path segment).
        let mut after_path = false;
        for t in tokens {
            match t {
                TokenTree::Ident(i) => {
                    let name = i.to_string();
                    if INJECTED.contains(&name.as_str()) {
                        if !self.names.contains(&name) {
                            self.names.push(name.clone());
                        }
                        if !after_path && !self.bare.contains(&name) {
                            self.bare.push(name.clone());
                        }
                    }
                    last_ident = Some(name);
                    after_path = false;
                }
                TokenTree::Punct(p) if p.as_char() == '!' => {
                    if let Some(m) = &last_ident {
                        if !PLAIN_MACROS.contains(&m.as_str()) {
                            self.all = true;
                        }
                    }
                    last_ident = None;
                    after_path = false;
                }
                TokenTree::Punct(p) if matches!(p.as_char(), '.' | ':') => {
                    last_ident = None;
                    after_path = true;
                }
                TokenTree::Group(g) => {
                    self.scan(g.stream());
                    last_ident = None;
                    after_path = false;
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
                    after_path = false;
                }
                _ => {
                    last_ident = None;
                    after_path = false;
                }
            }
        }
    }

    fn wants(&self, name: &str) -> bool {
        if self.grid_inlined && name == "grid_for" {
            return false;
        }
        self.all
            || self.names.iter().any(|n| n == name)
            // grid_for reads BLOCK_SIZE.
            || (name == "BLOCK_SIZE" && !self.grid_inlined && self.wants("grid_for"))
    }

    /// Whether the injected `name` is surely used by the body, so that its
    /// item needs no `#[allow(dead_code)]`: the body names it bare, and no
    /// unknown macro could hide a second definition; `BLOCK_SIZE` also
    /// when the injected `grid_for` reads it and is itself used.
    fn surely_used(&self, name: &str) -> bool {
        !self.all
            && (self.bare.iter().any(|n| n == name)
                || (name == "BLOCK_SIZE" && !self.grid_inlined && self.surely_used("grid_for")))
    }

    /// Whether the body's `grid_for` calls may be rewritten: it names
    /// `grid_for` and calls no macro that could name it unseen.
    fn inlines_grid(&self) -> bool {
        !self.all && self.names.iter().any(|n| n == "grid_for")
    }
}

/// `grid_for(n)` → `::core::primitive::u32::div_ceil(n, BLOCK)` throughout
/// `body`, or `None` (inject the function as before) unless every
/// `grid_for` in it is a plain call of one argument: not after `.`, `::` or
/// `fn` (someone else's `grid_for`), not a binding or a value (no local can
/// then shadow the injected name), not in a literal (a format string's
/// capture). The call keeps the name's span and the argument's group, so
/// rustc's messages about the argument point where they did; `div_ceil`
/// is a `const fn` of the same signature, so the calls mean the same in
/// every context.
fn inline_grid_calls(body: &TokenStream, block: u32) -> Option<TokenStream> {
    rewrite_grid_calls(body, block).map(|(tokens, _)| tokens)
}

/// [`inline_grid_calls`], and whether anything was rewritten (a group
/// without a call is kept whole).
fn rewrite_grid_calls(body: &TokenStream, block: u32) -> Option<(TokenStream, bool)> {
    let tokens: Vec<TokenTree> = body.clone().into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Ident(name) if name == "grid_for" => {
                let after_path = match out.last() {
                    Some(TokenTree::Punct(p)) => matches!(p.as_char(), '.' | ':'),
                    Some(TokenTree::Ident(k)) => k == "fn",
                    _ => false,
                };
                let arg = match tokens.get(i + 1) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => g,
                    _ => return None,
                };
                let one_arg = !arg.stream().is_empty()
                    && !arg
                        .stream()
                        .into_iter()
                        .any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','));
                if after_path || !one_arg {
                    return None;
                }
                let (inner, _) = rewrite_grid_calls(&arg.stream(), block)?;
                let lit = Literal::u32_suffixed(block);
                let path = quote::quote_spanned!(name.span()=>
                    ::core::primitive::u32::div_ceil);
                let mut call = Group::new(Delimiter::Parenthesis, quote!(#inner, #lit));
                call.set_span(arg.span());
                out.extend(path);
                out.push(TokenTree::Group(call));
                changed = true;
                i += 2;
                continue;
            }
            TokenTree::Literal(l) if l.to_string().contains("grid_for") => return None,
            TokenTree::Group(g) => {
                let (inner, rewritten) = rewrite_grid_calls(&g.stream(), block)?;
                if rewritten {
                    let mut group = Group::new(g.delimiter(), inner);
                    group.set_span(g.span());
                    out.push(TokenTree::Group(group));
                    changed = true;
                } else {
                    out.push(TokenTree::Group(g.clone()));
                }
            }
            // `r#grid_for` names the same thing and may bind a local.
            TokenTree::Ident(name) if name == "r#grid_for" => return None,
            other => out.push(other.clone()),
        }
        i += 1;
    }
    Some(if changed {
        (out.into_iter().collect(), true)
    } else {
        (body.clone(), false)
    })
}

/// Every name the expansion can inject.
const INJECTED: [&str; 10] = [
    "KERNEL_NAME",
    "ARCH",
    "BLOCK_SIZE",
    "BLOCK",
    "DYNAMIC_SMEM",
    "ACTIVE_BLOCKS_PER_SM",
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
    let blocks = first.active_blocks_per_sm;
    let occupancy = f32_lit(first.occupancy);
    let measured = first.measured;
    let mut out = TokenStream::new();
    // No doc comments: items inside a function body are not documented,
    // and each would be one more attribute for rustc per site.
    let mut item = |which: &str, tokens: TokenStream| {
        if uses.surely_used(which) {
            out.extend(tokens);
        } else if uses.wants(which) {
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
    item("DYNAMIC_SMEM", quote!(const DYNAMIC_SMEM: u32 = #smem;));
    item(
        "ACTIVE_BLOCKS_PER_SM",
        quote!(const ACTIVE_BLOCKS_PER_SM: u32 = #blocks;),
    );
    item("OCCUPANCY", quote!(const OCCUPANCY: f32 = #occupancy;));
    item("MEASURED", quote!(const MEASURED: bool = #measured;));
    if uses.wants("LAUNCH") {
        let rows = plan.rows.iter().map(|r| {
            let (a, maj, min, s, n) = (
                &r.arch,
                r.major,
                r.minor,
                r.dynamic_smem,
                r.active_blocks_per_sm,
            );
            let [x, y, z] = r.block;
            let o = f32_lit(r.occupancy);
            quote!(::occ::BakedArch {
                arch: #a,
                major: #maj,
                minor: #min,
                block: (#x, #y, #z),
                dynamic_smem: #s,
                active_blocks_per_sm: #n,
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
        const DYNAMIC_SMEM: u32 = 0;
        #[allow(dead_code)]
        const ACTIVE_BLOCKS_PER_SM: u32 = 0;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn inlined(body: TokenStream) -> Option<String> {
        inline_grid_calls(&body, 256).map(|t| t.to_string())
    }

    #[test]
    fn grid_calls_become_div_ceil() {
        let out = inlined(quote!(let g = grid_for(n + 1); (g, [grid_for(grid_for(m))])));
        let expected = quote!(
            let g = ::core::primitive::u32::div_ceil(n + 1, 256u32);
            (g, [::core::primitive::u32::div_ceil(::core::primitive::u32::div_ceil(m, 256u32), 256u32)])
        );
        assert_eq!(out, Some(expected.to_string()));
        // Inside a std macro's arguments too.
        let out = inlined(quote!(assert_eq!(grid_for(n), 4);));
        assert!(out.is_some_and(|o| o.contains("div_ceil (n , 256u32)")));
    }

    #[test]
    fn other_grid_fors_keep_the_function() {
        for body in [
            quote!(let grid_for = |x: u32| x; grid_for(3)),
            quote!(x.grid_for(n)),
            quote!(other::grid_for(n)),
            quote!(
                fn grid_for(n: u32) -> u32 {
                    n
                }
            ),
            quote!(let f = grid_for; f(n)),
            quote!(grid_for(n, 2)),
            quote!(grid_for()),
            quote!(println!("{}", "{grid_for}")),
            quote!(let r#grid_for = 1; grid_for(n)),
            quote!([1].map(grid_for)),
        ] {
            assert_eq!(inlined(body.clone()), None, "{body}");
        }
    }

    #[test]
    fn an_inlined_grid_leaves_block_size_to_the_body() {
        let mut uses = Uses::of(&quote!(grid_for(n)));
        assert!(uses.inlines_grid() && uses.wants("BLOCK_SIZE") && uses.wants("grid_for"));
        uses.grid_inlined = true;
        assert!(!uses.wants("BLOCK_SIZE") && !uses.wants("grid_for"));
        let mut uses = Uses::of(&quote!((grid_for(n), BLOCK_SIZE)));
        uses.grid_inlined = true;
        assert!(uses.wants("BLOCK_SIZE") && !uses.wants("grid_for"));
        // A macro of the user's may name it: nothing is rewritten.
        assert!(!Uses::of(&quote!(my_launch!(grid_for(n)))).inlines_grid());
    }

    #[test]
    fn only_names_the_body_surely_uses_go_without_allow_dead_code() {
        let uses = Uses::of(&quote!((
            BLOCK_SIZE,
            x.ARCH,
            occ::OCCUPANCY,
            println!("{BLOCK}")
        )));
        assert!(uses.surely_used("BLOCK_SIZE"));
        // A field, a path segment, a format string: injected, maybe unused.
        for name in ["ARCH", "OCCUPANCY", "BLOCK"] {
            assert!(uses.wants(name) && !uses.surely_used(name), "{name}");
        }
        // A user's macro may define or hide anything: every name allowed.
        let uses = Uses::of(&quote!(my_macro!(); BLOCK_SIZE));
        assert!(uses.wants("BLOCK_SIZE") && !uses.surely_used("BLOCK_SIZE"));
        // The injected `grid_for` reads `BLOCK_SIZE`.
        let uses = Uses::of(&quote!(grid_for(n)));
        assert!(uses.surely_used("grid_for") && uses.surely_used("BLOCK_SIZE"));
    }
}
