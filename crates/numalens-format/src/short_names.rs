//! Short function names for sites: a C++ template's demangled name can run to hundreds of
//! characters (miniFE's `cg_solve<CSRMatrix<double, int, int>, …>(…)` is 640), which buried
//! every line of a report that named the site. The file and line beside the name say which
//! function it is; the whole name stays in `site_frames.function`.

/// Names up to this long are kept whole: they read well, and overloads keep their parameters.
const LONG_NAME: usize = 80;

/// `name` as a site shows it: whole when short; else with its return type dropped and the
/// contents of its template arguments and parameter list elided (`ns::f<…>(…) const`).
pub fn short_function_name(name: &str) -> String {
    if name.chars().count() <= LONG_NAME {
        return name.to_string();
    }
    let elided = elide_brackets(name);
    match function_start(&elided) {
        Some(start) => elided[start..].to_string(),
        None => elided,
    }
}

/// Operators spelled with brackets, longest first.
const BRACKET_OPERATORS: &[&str] = &[
    "()", "<<=", ">>=", "<=>", "->*", "<<", ">>", "<=", ">=", "->", "<", ">",
];

/// Keeps the outermost level of `name` and replaces what each outermost `<…>` or `(…)` holds
/// by an ellipsis. `(anonymous namespace)` is a scope, not a parameter list, and is kept.
fn elide_brackets(name: &str) -> String {
    const ANONYMOUS: &str = "(anonymous namespace)";
    let mut out = String::with_capacity(LONG_NAME);
    let mut depth = 0usize;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if depth == 0 && rest.starts_with(ANONYMOUS) {
            out.push_str(ANONYMOUS);
            rest = &rest[ANONYMOUS.len()..];
            continue;
        }
        // `operator<`, `operator()` and their kin name a function: their brackets open nothing.
        if depth == 0
            && out.ends_with("operator")
            && let Some(op) = BRACKET_OPERATORS.iter().find(|op| rest.starts_with(**op))
        {
            out.push_str(op);
            rest = &rest[op.len()..];
            continue;
        }
        match c {
            '<' | '(' => {
                if depth == 0 {
                    out.push(c);
                    out.push('…');
                }
                depth += 1;
            }
            '>' | ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push(c);
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Where the function's own name starts: after a return type, which a space before the name
/// separates from it at the outermost level (`void ns::f<…>(…)`). The spaces of
/// `(anonymous namespace)` and of an operator's name (`operator<< <…>`) are not that space.
fn function_start(elided: &str) -> Option<usize> {
    // Same length, so that positions in it are positions in `elided`.
    let scopes = elided.replace("(anonymous namespace)", "(anonymous_namespace)");
    let params = scopes.find("(…)")?;
    let name_end = scopes[..params].find("operator").unwrap_or(params);
    scopes[..name_end].rfind(' ').map(|space| space + 1)
}

#[cfg(test)]
mod tests {
    use super::short_function_name;

    #[test]
    fn short_names_are_kept_whole() {
        for name in [
            "main",
            "Domain::AllocateNodePersistent(int)",
            "operator new(unsigned long)",
        ] {
            assert_eq!(short_function_name(name), name);
        }
    }

    #[test]
    fn a_long_template_function_keeps_its_scope_and_name() {
        let name = "void miniFE::cg_solve<miniFE::CSRMatrix<double, int, int>, miniFE::Vector<double, \
                    int, int>, miniFE::matvec_std<miniFE::CSRMatrix<double, int, int>, \
                    miniFE::Vector<double, int, int> > >(miniFE::CSRMatrix<double, int, int>&, \
                    miniFE::Vector<double, int, int> const&, double*)";
        assert_eq!(short_function_name(name), "miniFE::cg_solve<…>(…)");
    }

    #[test]
    fn qualifiers_scopes_and_operators_survive() {
        let long =
            "std::vector<double, std::allocator<double> >, std::map<int, int, std::less<int> >";
        assert_eq!(
            short_function_name(&format!(
                "(anonymous namespace)::Solver<{long}>::step(int, {long}) const"
            )),
            "(anonymous namespace)::Solver<…>::step(…) const"
        );
        assert_eq!(
            short_function_name(&format!(
                "bool ns::Less<{long}>::operator()(int, {long}) const"
            )),
            "ns::Less<…>::operator()(…) const"
        );
        assert_eq!(
            short_function_name(&format!(
                "bool ns::operator<< <{long}>(ns::Key<{long}> const&)"
            )),
            "ns::operator<< <…>(…)"
        );
    }
}
