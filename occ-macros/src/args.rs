//! Step 1: the attribute's arguments, parsed with syn's meta parser. Every
//! error is collected (not just the first) and spanned on its key or value.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitStr};

/// `kernel = "saxpy"`: the kernel to configure.
pub const KERNEL: &str = "kernel";
/// `arch = "sm_90"`: the arch of the plain consts (and the only one of the table).
pub const ARCH: &str = "arch";
/// `dynamic_smem = BYTES` or `dynamic_smem = "max"`.
pub const DYNAMIC_SMEM: &str = "dynamic_smem";
/// `smem_per_thread = BYTES`: dynamic shared memory that grows with the block.
pub const SMEM_PER_THREAD: &str = "smem_per_thread";
/// `smem_fixed = BYTES`: bytes per block on top of `smem_per_thread`.
pub const SMEM_FIXED: &str = "smem_fixed";
/// `max_block_size = N`.
pub const MAX_BLOCK_SIZE: &str = "max_block_size";
/// `block_multiple = N`.
pub const BLOCK_MULTIPLE: &str = "block_multiple";
/// `min_occupancy = 0.5`.
pub const MIN_OCCUPANCY: &str = "min_occupancy";
/// `allow_spills`.
pub const ALLOW_SPILLS: &str = "allow_spills";
/// `max_spill_bytes = N`.
pub const MAX_SPILL_BYTES: &str = "max_spill_bytes";
/// `block = (16, 16)` or `block = (32, _)`: the block's shape.
pub const BLOCK: &str = "block";
/// `tuned = true`: bake the block measured on a GPU (occ.lock's `measured`).
pub const TUNED: &str = "tuned";
/// `bucket = "n=1M"`: which problem-size bucket's measurement `tuned` bakes.
pub const BUCKET: &str = "bucket";

/// Every option, in the order the docs list them.
pub const OPTIONS: [&str; 13] = [
    KERNEL,
    ARCH,
    BLOCK,
    DYNAMIC_SMEM,
    SMEM_PER_THREAD,
    SMEM_FIXED,
    MAX_BLOCK_SIZE,
    BLOCK_MULTIPLE,
    MIN_OCCUPANCY,
    ALLOW_SPILLS,
    MAX_SPILL_BYTES,
    TUNED,
    BUCKET,
];

/// A value with the span of the argument it came from.
#[derive(Debug, Clone)]
pub struct At<T> {
    /// The value.
    pub value: T,
    /// The span of the whole `key = value` argument.
    pub span: Span,
}

/// `dynamic_smem = ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicSmemArg {
    /// A fixed number of bytes.
    Bytes(u32),
    /// `"max"`: the most a block can take without lowering occupancy.
    Max,
}

/// `block = (x, y, z)`: each dimension fixed, or the last one given free
/// (`_`: the tuner picks it). Missing trailing dimensions are 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockShape {
    /// The fixed dimensions, x first; `None` for the free one.
    pub dims: [Option<u32>; 3],
}

impl BlockShape {
    /// Threads of the fixed dimensions (all of the block when none is free).
    pub fn fixed_threads(&self) -> u32 {
        self.dims
            .iter()
            .flatten()
            .fold(1u32, |a, &d| a.saturating_mul(d))
    }

    /// Whether a dimension is left to the tuner.
    pub fn has_free(&self) -> bool {
        self.dims.iter().any(Option::is_none)
    }

    /// The shape of a block of `threads` threads: the free dimension takes
    /// what the fixed ones leave.
    pub fn with_threads(&self, threads: u32) -> [u32; 3] {
        let fixed = self.fixed_threads().max(1);
        self.dims.map(|d| d.unwrap_or(threads / fixed))
    }
}

/// The most threads a block has along x, y and z (`maxThreadsDim`), and in
/// all (`maxThreadsPerBlock`): the same on every compute capability from
/// 2.0 on (CUDA C++ Programming Guide, "Compute Capabilities", technical
/// specifications). A launch past either fails with
/// `CUDA_ERROR_INVALID_VALUE`.
pub const MAX_BLOCK_DIMS: [u32; 3] = [1024, 1024, 64];
/// See [`MAX_BLOCK_DIMS`].
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// The parsed arguments of one `#[launch_config(...)]`.
#[derive(Debug, Clone, Default)]
pub struct Args {
    /// `kernel`.
    pub kernel: Option<At<String>>,
    /// `arch`.
    pub arch: Option<At<String>>,
    /// `dynamic_smem`.
    pub dynamic_smem: Option<At<DynamicSmemArg>>,
    /// `smem_per_thread`.
    pub smem_per_thread: Option<At<u32>>,
    /// `smem_fixed`.
    pub smem_fixed: Option<At<u32>>,
    /// `max_block_size`.
    pub max_block_size: Option<At<u32>>,
    /// `block_multiple`.
    pub block_multiple: Option<At<u32>>,
    /// `min_occupancy`.
    pub min_occupancy: Option<At<f64>>,
    /// `allow_spills`.
    pub allow_spills: Option<Span>,
    /// `max_spill_bytes`.
    pub max_spill_bytes: Option<At<u32>>,
    /// `block`.
    pub block: Option<At<BlockShape>>,
    /// `tuned = true` (or bare `tuned`); `tuned = false` is `None`.
    pub tuned: Option<Span>,
    /// `bucket`.
    pub bucket: Option<At<String>>,
}

/// Collects errors; `combine`s them into one `syn::Error`.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(e) => e.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// Adds an error at a span.
    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// The combined error, if any.
    pub fn into_error(self) -> Option<syn::Error> {
        self.0
    }

    /// Whether any error was added.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// Parses the attribute's tokens. Returns what parsed and every error.
pub fn parse(tokens: proc_macro2::TokenStream) -> (Args, Errors) {
    let mut args = Args::default();
    let mut errors = Errors::default();
    let parser = syn::meta::parser(|meta| {
        if let Err(e) = one(&mut args, &meta) {
            errors.push(e);
            // Skip the value of a bad argument so the next one still parses.
            if meta.input.peek(syn::Token![=]) {
                let _ = meta.value().and_then(|v| v.parse::<Expr>());
            } else if meta.input.peek(syn::token::Paren) {
                let content;
                let _ = syn::parenthesized!(content in meta.input);
                let _ = content.parse::<proc_macro2::TokenStream>();
            }
        }
        Ok(())
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, tokens) {
        errors.push(e);
    }
    (args, errors)
}

/// Parses one `key = value` of the attribute into `args`: each option once,
/// its value checked by the parser of its kind.
fn one(args: &mut Args, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    let path = &meta.path;
    let Some(key) = path.get_ident().map(|i| i.to_string()) else {
        return Err(meta.error(unknown_option_message(&quote::quote!(#path).to_string())));
    };
    let span = path.span();
    let once = |given: bool| {
        if given {
            Err(syn::Error::new(
                span,
                format!("`{key}` is given twice; keep one"),
            ))
        } else {
            Ok(())
        }
    };
    match key.as_str() {
        KERNEL => {
            once(args.kernel.is_some())?;
            args.kernel = Some(kernel_name(meta, &key)?);
        }
        ARCH => {
            once(args.arch.is_some())?;
            let lit = string(meta, &key, "arch = \"sm_90\"")?;
            args.arch = Some(At {
                value: lit.value(),
                span: lit.span(),
            });
        }
        DYNAMIC_SMEM => {
            once(args.dynamic_smem.is_some())?;
            args.dynamic_smem = Some(dynamic_smem(meta, &key)?);
        }
        SMEM_PER_THREAD | SMEM_FIXED | MAX_BLOCK_SIZE | BLOCK_MULTIPLE | MAX_SPILL_BYTES => {
            let slot = match key.as_str() {
                SMEM_PER_THREAD => &mut args.smem_per_thread,
                SMEM_FIXED => &mut args.smem_fixed,
                MAX_BLOCK_SIZE => &mut args.max_block_size,
                BLOCK_MULTIPLE => &mut args.block_multiple,
                _ => &mut args.max_spill_bytes,
            };
            once(slot.is_some())?;
            *slot = Some(count(meta, &key)?);
        }
        MIN_OCCUPANCY => {
            once(args.min_occupancy.is_some())?;
            args.min_occupancy = Some(min_occupancy(meta, &key)?);
        }
        ALLOW_SPILLS => {
            once(args.allow_spills.is_some())?;
            if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                return Err(meta.error(
                    "`allow_spills` takes no value; write `allow_spills`, or `max_spill_bytes = N` for a budget",
                ));
            }
            args.allow_spills = Some(span);
        }
        BLOCK => {
            once(args.block.is_some())?;
            let example = "block = (16, 16), block = (32, _) or block = 256";
            let expr = value(meta, &key, example)?;
            args.block = Some(At {
                value: block_shape(&expr, example)?,
                span: expr.span(),
            });
        }
        TUNED => {
            once(args.tuned.is_some())?;
            args.tuned = tuned(meta, &key, span)?;
        }
        BUCKET => {
            once(args.bucket.is_some())?;
            args.bucket = Some(bucket(meta, &key)?);
        }
        other => return Err(syn::Error::new(span, unknown_option_message(other))),
    }
    Ok(())
}

/// `kernel = "saxpy"`: a name that is not empty.
fn kernel_name(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<At<String>> {
    let lit = string(meta, key, "kernel = \"saxpy\"")?;
    let name = lit.value();
    if name.trim().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "`kernel` is empty; name the kernel: its extern \"C\" name, its demangled name without parameters, or its base name",
        ));
    }
    Ok(At {
        value: name,
        span: lit.span(),
    })
}

/// `dynamic_smem = 4096` or `dynamic_smem = "max"`.
fn dynamic_smem(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<At<DynamicSmemArg>> {
    let expr = value(meta, key, "dynamic_smem = 4096 or dynamic_smem = \"max\"")?;
    let value = match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => {
            if s.value() == "max" {
                DynamicSmemArg::Max
            } else {
                return Err(syn::Error::new(
                    s.span(),
                    format!(
                        "`dynamic_smem = \"{}\"` is not a size; use a number of bytes (dynamic_smem = 4096) or \"max\"",
                        s.value()
                    ),
                ));
            }
        }
        _ => DynamicSmemArg::Bytes(integer(
            &expr,
            key,
            "dynamic_smem = 4096 or dynamic_smem = \"max\"",
        )?),
    };
    Ok(At {
        value,
        span: expr.span(),
    })
}

/// `key = 256`: a count of bytes or threads; positive for the block options.
fn count(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<At<u32>> {
    let example = format!("{key} = 256");
    let expr = value(meta, key, &example)?;
    let n = integer(&expr, key, &example)?;
    let positive = matches!(key, MAX_BLOCK_SIZE | BLOCK_MULTIPLE);
    if positive && n == 0 {
        return Err(syn::Error::new(
            expr.span(),
            format!("`{key} = 0` allows no block size; use a positive number such as 32"),
        ));
    }
    Ok(At {
        value: n,
        span: expr.span(),
    })
}

/// `min_occupancy = 0.5`: a fraction above 0 and at most 1.
fn min_occupancy(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<At<f64>> {
    let expr = value(meta, key, "min_occupancy = 0.5")?;
    let v = match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f.base10_parse::<f64>().ok(),
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<f64>().ok(),
        _ => None,
    };
    match v {
        Some(v) if v > 0.0 && v <= 1.0 => Ok(At {
            value: v,
            span: expr.span(),
        }),
        _ => Err(syn::Error::new(
            expr.span(),
            "`min_occupancy` is a fraction of the SM's warp slots above 0 and at most 1: min_occupancy = 0.5",
        )),
    }
}

/// `tuned` or `tuned = true|false`: where it was asked for, `None` for false.
fn tuned(meta: &ParseNestedMeta<'_>, key: &str, span: Span) -> syn::Result<Option<Span>> {
    if meta.input.peek(syn::Token![=]) {
        let expr = value(meta, key, "tuned = true")?;
        match &expr {
            Expr::Lit(ExprLit {
                lit: Lit::Bool(b), ..
            }) => Ok(b.value.then(|| expr.span())),
            _ => Err(syn::Error::new(
                expr.span(),
                "`tuned` is true or false: tuned = true bakes the block measured on a GPU (cargo occ tune import)",
            )),
        }
    } else {
        Ok(Some(span))
    }
}

/// `bucket = "n=1M"`: a name that is not empty.
fn bucket(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<At<String>> {
    let lit = string(meta, key, "bucket = \"n=1M\"")?;
    if lit.value().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "`bucket` is empty; name the problem-size bucket the measurement was taken for, as the results file does",
        ));
    }
    Ok(At {
        value: lit.value(),
        span: lit.span(),
    })
}

/// `256`, `(16, 16)`, `(32, _)`, `(8, 8, _)`: at most three dimensions,
/// each a positive integer; the last may be `_`.
fn block_shape(expr: &Expr, example: &str) -> syn::Result<BlockShape> {
    let elems: Vec<&Expr> = match expr {
        Expr::Tuple(t) => t.elems.iter().collect(),
        Expr::Paren(p) => vec![&*p.expr],
        other => vec![other],
    };
    if elems.is_empty() || elems.len() > 3 {
        return Err(syn::Error::new(
            expr.span(),
            format!("`block` has one to three dimensions (x, y, z): {example}"),
        ));
    }
    let mut dims = [Some(1); 3];
    for (i, e) in elems.iter().enumerate() {
        if matches!(e, Expr::Infer(_)) {
            if i + 1 != elems.len() || i == 0 {
                return Err(syn::Error::new(
                    e.span(),
                    "only the last of two or three dimensions can be `_` (left to the tuner): block = (32, _) or block = (8, 8, _); for a free 1-D block drop `block`",
                ));
            }
            dims[i] = None;
            continue;
        }
        let n = integer(e, BLOCK, example)?;
        if n == 0 {
            return Err(syn::Error::new(
                e.span(),
                "a block dimension of 0 has no threads; use a positive number",
            ));
        }
        if n > MAX_BLOCK_DIMS[i] {
            return Err(syn::Error::new(
                e.span(),
                format!(
                    "a block's {} dimension is at most {} threads on every GPU, not {n}",
                    ["x", "y", "z"][i],
                    MAX_BLOCK_DIMS[i]
                ),
            ));
        }
        dims[i] = Some(n);
    }
    let shape = BlockShape { dims };
    let fixed = shape.fixed_threads();
    if fixed > MAX_BLOCK_THREADS {
        return Err(syn::Error::new(
            expr.span(),
            format!(
                "this block has {fixed} threads{}; a block has at most {MAX_BLOCK_THREADS} on every GPU",
                if shape.has_free() { " before its free dimension" } else { "" }
            ),
        ));
    }
    Ok(shape)
}

fn unknown_option_message(name: &str) -> String {
    let best = OPTIONS
        .iter()
        .map(|o| (strsim::jaro_winkler(name, o), *o))
        .filter(|(s, _)| *s > 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let hint = match best {
        Some((_, o)) => format!("; did you mean `{o}`?"),
        None => String::new(),
    };
    format!(
        "unknown option `{name}`{hint} #[launch_config] takes: {}",
        OPTIONS.join(", ")
    )
}

fn value(meta: &ParseNestedMeta<'_>, key: &str, example: &str) -> syn::Result<Expr> {
    if !meta.input.peek(syn::Token![=]) {
        return Err(meta.error(format!("`{key}` needs a value: {example}")));
    }
    meta.value()?.parse::<Expr>()
}

fn string(meta: &ParseNestedMeta<'_>, key: &str, example: &str) -> syn::Result<LitStr> {
    let expr = value(meta, key, example)?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s),
        other => Err(syn::Error::new(
            other.span(),
            format!("`{key}` takes a string literal: {example}"),
        )),
    }
}

/// An integer from a literal or a constant expression of literals
/// (`48 * 1024`, `1 << 14`, `(2 + 1) * 256`).
fn integer(expr: &Expr, key: &str, example: &str) -> syn::Result<u32> {
    let bad = || {
        syn::Error::new(
            expr.span(),
            format!("`{key}` takes a whole number of at most {} (integer literals and + - * / << of them): {example}", u32::MAX),
        )
    };
    let v = eval(expr).ok_or_else(bad)?;
    u32::try_from(v).map_err(|_| bad())
}

fn eval(expr: &Expr) -> Option<u64> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => match i.suffix() {
            "" | "u32" | "usize" | "u64" | "i32" | "i64" => i.base10_parse::<u64>().ok(),
            _ => None,
        },
        Expr::Paren(p) => eval(&p.expr),
        Expr::Group(g) => eval(&g.expr),
        Expr::Binary(b) => {
            let l = eval(&b.left)?;
            let r = eval(&b.right)?;
            match b.op {
                syn::BinOp::Add(_) => l.checked_add(r),
                syn::BinOp::Sub(_) => l.checked_sub(r),
                syn::BinOp::Mul(_) => l.checked_mul(r),
                syn::BinOp::Div(_) => l.checked_div(r),
                syn::BinOp::Shl(_) => u32::try_from(r).ok().and_then(|r| l.checked_shl(r)),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn parses_every_option() {
        let (a, e) = parse(quote!(
            kernel = "saxpy",
            arch = "sm_90",
            dynamic_smem = 48 * 1024,
            max_block_size = 512,
            block_multiple = 64,
            min_occupancy = 0.5,
            max_spill_bytes = 1 << 4
        ));
        assert!(e.is_empty());
        assert_eq!(a.kernel.map(|k| k.value).as_deref(), Some("saxpy"));
        assert_eq!(a.arch.map(|k| k.value).as_deref(), Some("sm_90"));
        assert_eq!(
            a.dynamic_smem.map(|d| d.value),
            Some(DynamicSmemArg::Bytes(49152))
        );
        assert_eq!(a.max_block_size.map(|v| v.value), Some(512));
        assert_eq!(a.block_multiple.map(|v| v.value), Some(64));
        assert_eq!(a.min_occupancy.map(|v| v.value), Some(0.5));
        assert_eq!(a.max_spill_bytes.map(|v| v.value), Some(16));
        let (a, e) = parse(quote!(
            kernel = "k",
            dynamic_smem = "max",
            allow_spills,
            smem_per_thread = 8,
            smem_fixed = 128
        ));
        assert!(e.is_empty());
        assert_eq!(a.dynamic_smem.map(|d| d.value), Some(DynamicSmemArg::Max));
        assert!(a.allow_spills.is_some());
        assert_eq!(a.smem_per_thread.map(|v| v.value), Some(8));
        assert_eq!(a.smem_fixed.map(|v| v.value), Some(128));
    }

    #[test]
    fn collects_every_error() {
        let (a, e) = parse(quote!(
            kernl = "x",
            kernel = 3,
            min_occupancy = 1.5,
            block_multiple = 0,
            dynamic_smem = "lots",
            max_block_size = 5000000000,
            allow_spills = true,
            arch = "sm_80"
        ));
        let errors: Vec<String> = e
            .into_error()
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default();
        assert_eq!(errors.len(), 7, "{errors:#?}");
        assert!(errors[0].contains("did you mean `kernel`"), "{}", errors[0]);
        assert!(errors[1].contains("string literal"));
        assert!(errors[2].contains("min_occupancy"));
        assert!(errors[3].contains("block_multiple = 0"));
        assert!(errors[4].contains("\"lots\""));
        assert!(errors[5].contains("whole number"));
        assert!(errors[6].contains("takes no value"));
        // The argument after the bad ones still parsed.
        assert_eq!(a.arch.map(|k| k.value).as_deref(), Some("sm_80"));
    }

    #[test]
    fn block_shapes() {
        let shape = |t: proc_macro2::TokenStream| {
            let (a, e) = parse(t);
            let err = e.into_error().map(|e| e.to_string());
            (a.block.map(|b| b.value.dims), err)
        };
        assert_eq!(
            shape(quote!(block = (16, 16))).0,
            Some([Some(16), Some(16), Some(1)])
        );
        assert_eq!(
            shape(quote!(block = (32, _))).0,
            Some([Some(32), None, Some(1)])
        );
        assert_eq!(
            shape(quote!(block = (4, 4, _))).0,
            Some([Some(4), Some(4), None])
        );
        assert_eq!(
            shape(quote!(block = 256)).0,
            Some([Some(256), Some(1), Some(1)])
        );
        let free = BlockShape {
            dims: [Some(32), None, Some(1)],
        };
        assert_eq!(free.with_threads(256), [32, 8, 1]);
        assert!(shape(quote!(block = (_, 4)))
            .1
            .unwrap()
            .contains("only the last"));
        assert!(shape(quote!(block = (1, 2, 3, 4)))
            .1
            .unwrap()
            .contains("one to three"));
        assert!(shape(quote!(block = (0, 4))).1.unwrap().contains("of 0"));
        // CUDA's limits per dimension (1024, 1024, 64) and per block (1024).
        assert_eq!(
            shape(quote!(block = (1, 1, 64))).0,
            Some([Some(1), Some(1), Some(64)])
        );
        let z = shape(quote!(block = (1, 1, 128))).1.unwrap();
        assert!(z.contains("z dimension is at most 64"), "{z}");
        let x = shape(quote!(block = (1025, _))).1.unwrap();
        assert!(x.contains("x dimension is at most 1024"), "{x}");
        let all = shape(quote!(block = (64, 32))).1.unwrap();
        assert!(
            all.contains("2048 threads; a block has at most 1024"),
            "{all}"
        );
        let free = shape(quote!(block = (64, 32, _))).1.unwrap();
        assert!(free.contains("before its free dimension"), "{free}");
    }

    #[test]
    fn tuned_and_bucket() {
        let (a, e) = parse(quote!(kernel = "k", tuned = true, bucket = "n=1M"));
        assert!(e.is_empty());
        assert!(a.tuned.is_some());
        assert_eq!(a.bucket.map(|b| b.value).as_deref(), Some("n=1M"));
        let (a, e) = parse(quote!(kernel = "k", tuned));
        assert!(e.is_empty() && a.tuned.is_some());
        let (a, e) = parse(quote!(kernel = "k", tuned = false));
        assert!(e.is_empty() && a.tuned.is_none());
        let (_, e) = parse(quote!(kernel = "k", tuned = 1));
        let msg = e.into_error().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("true or false"), "{msg}");
        let (_, e) = parse(quote!(kernel = "k", tuned, bucket = ""));
        let msg = e.into_error().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("`bucket` is empty"), "{msg}");
    }

    #[test]
    fn duplicates_are_errors() {
        let (_, e) = parse(quote!(kernel = "a", kernel = "b"));
        let msg = e.into_error().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("given twice"), "{msg}");
    }
}
