//! Short function names for sites: a C++ template's demangled name can run to hundreds of
//! characters (miniFE's `cg_solve<CSRMatrix<double, int, int>, …>(…)` is 640), which buried
//! every line of a report that named the site. The file and line beside the name say which
//! function it is; the whole name stays in `site_frames.function`, and sites are told apart by
//! it, never by the short one.

/// Names up to this long are kept whole: they read well, and overloads keep their parameters.
const LONG_NAME: usize = 80;

/// `name` as a site shows it: whole when short; else with its return type dropped and the
/// contents of its template arguments and parameter list elided (`ns::f<…>(…) const`). A name
/// whose brackets cannot be read is cut at [`LONG_NAME`] characters instead.
pub fn short_function_name(name: &str) -> String {
    if name.chars().count() <= LONG_NAME {
        return name.to_string();
    }
    elide_brackets(name)
        .and_then(|elided| function_start(&elided).map(|start| elided[start..].to_string()))
        .unwrap_or_else(|| {
            let cut: String = name.chars().take(LONG_NAME - 1).collect();
            format!("{cut}…")
        })
}

/// Operators spelled with brackets, longest first.
const BRACKET_OPERATORS: &[&str] = &[
    "()", "<<=", ">>=", "<=>", "->*", "<<", ">>", "<=", ">=", "->", "<", ">",
];

const ANONYMOUS: &str = "(anonymous namespace)";

/// Keeps the outermost level of `name` and replaces what each outermost `<…>` or `(…)` holds
/// by an ellipsis (an empty `()` stays). Inside parentheses `<` and `>` are comparisons, not
/// brackets, as is a `<` right after `)`; an operator's name is never a bracket. `None` when
/// the brackets do not balance.
fn elide_brackets(name: &str) -> Option<String> {
    let mut out = String::with_capacity(LONG_NAME);
    let mut open: Vec<char> = Vec::new();
    let mut empty_inside = true;
    let mut i = 0;
    while let Some(c) = name[i..].chars().next() {
        let rest = &name[i..];
        if open.is_empty() && rest.starts_with(ANONYMOUS) {
            out.push_str(ANONYMOUS);
            i += ANONYMOUS.len();
            continue;
        }
        if ends_with_operator_keyword(&name[..i])
            && let Some(op) = BRACKET_OPERATORS.iter().find(|op| rest.starts_with(**op))
        {
            if open.is_empty() {
                out.push_str(op);
            } else {
                empty_inside = false;
            }
            i += op.len();
            continue;
        }
        let before = open.len();
        let in_parens = open.last() == Some(&'(');
        let after_paren = name[..i].ends_with(')');
        match c {
            '(' => open.push('('),
            '<' if !in_parens && !after_paren => open.push('<'),
            ')' if in_parens => {
                open.pop();
            }
            // `(1)>(2)` in a template argument is a comparison; `<(1)>` closes.
            '>' if open.last() == Some(&'<') && !(after_paren && rest[1..].starts_with('(')) => {
                open.pop();
            }
            _ => {}
        }
        match (before, open.len()) {
            (0, 0) => out.push(c),
            (0, _) => {
                out.push(c);
                empty_inside = true;
            }
            (1, 0) => {
                if !empty_inside {
                    out.push('…');
                }
                out.push(c);
            }
            _ => empty_inside = false,
        }
        i += c.len_utf8();
    }
    open.is_empty().then_some(out)
}

/// Whether `before` ends with the keyword `operator` (not `my_operator`).
fn ends_with_operator_keyword(before: &str) -> bool {
    before.strip_suffix("operator").is_some_and(|head| {
        !head
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Where the function's own name starts in an elided name: after a return type, which a space
/// before the name separates from it at the outermost level (`void ns::f<…>(…)`). The parameter
/// list is the first `(…)` or `()` right after a name or its template arguments (not a
/// `decltype (…)` or a function pointer's `(…)(…)` in the return type); the spaces of
/// `(anonymous namespace)` and of an operator's name (`operator<< <…>`) are not that space.
/// `None` when there is no parameter list or no name before it.
fn function_start(elided: &str) -> Option<usize> {
    // Same length, so that positions in it are positions in `elided`.
    let scopes = elided.replace(ANONYMOUS, "(anonymous_namespace)");
    let params = scopes.char_indices().find_map(|(at, c)| {
        let before = scopes[..at].chars().next_back();
        (c == '(' && before.is_some_and(|b| b.is_alphanumeric() || b == '_' || b == '>'))
            .then_some(at)
    })?;
    let head = &scopes[..params];
    let name_end = keyword_operator(head).unwrap_or(params);
    let start = head[..name_end].rfind(' ').map_or(0, |space| space + 1);
    let name = &scopes[start..params];
    name.chars()
        .any(|c| c.is_alphanumeric() || c == '_')
        .then_some(start)
}

/// Where the keyword `operator` starts in `head`, if it is there.
fn keyword_operator(head: &str) -> Option<usize> {
    head.match_indices("operator")
        .map(|(at, _)| at)
        .find(|&at| ends_with_operator_keyword(&head[..at + "operator".len()]))
}

#[cfg(test)]
mod tests {
    use super::short_function_name as short;

    /// A template argument long enough to make any name it is in a long one.
    const ARG: &str =
        "std::map<int, std::vector<double, std::allocator<double> >, std::less<int> >";

    #[test]
    fn short_names_are_kept_whole() {
        for name in [
            "main",
            "Domain::AllocateNodePersistent(int)",
            "operator new(unsigned long)",
        ] {
            assert_eq!(short(name), name);
        }
    }

    #[test]
    fn a_long_template_function_keeps_its_scope_and_name() {
        let name = "void miniFE::cg_solve<miniFE::CSRMatrix<double, int, int>, miniFE::Vector<double, \
                    int, int>, miniFE::matvec_std<miniFE::CSRMatrix<double, int, int>, \
                    miniFE::Vector<double, int, int> > >(miniFE::CSRMatrix<double, int, int>&, \
                    miniFE::Vector<double, int, int> const&, double*)";
        assert_eq!(short(name), "miniFE::cg_solve<…>(…)");
        assert_eq!(
            short(&format!("ns::Holder<{ARG}>::reset()")),
            "ns::Holder<…>::reset()"
        );
    }

    #[test]
    fn qualifiers_scopes_and_operators_survive() {
        let cases = [
            (
                format!("(anonymous namespace)::Solver<{ARG}>::step(int, {ARG}) const"),
                "(anonymous namespace)::Solver<…>::step(…) const",
            ),
            (
                format!("bool ns::Less<{ARG}>::operator()(int, {ARG}) const"),
                "ns::Less<…>::operator()(…) const",
            ),
            (
                format!("bool ns::operator<< <{ARG}>(ns::Key<{ARG}> const&)"),
                "ns::operator<< <…>(…)",
            ),
            (
                format!("ns::Res<int> ns::my_operator_utils::compute<{ARG}>(int)"),
                "ns::my_operator_utils::compute<…>(…)",
            ),
            (
                format!(
                    "ns::Table<{ARG}>::lookup[abi:cxx11](int)::{{lambda(int)#1}}::operator()(int) const"
                ),
                "ns::Table<…>::lookup[abi:cxx11](…)::{lambda(…)#1}::operator()(…) const",
            ),
        ];
        for (name, want) in cases {
            assert_eq!(short(&name), want, "{name}");
        }
    }

    /// Return types and template arguments that hold brackets of their own, as demanglers write
    /// them (`addr2line::demangle_auto`'s output for g++'s symbols).
    #[test]
    fn brackets_that_are_not_the_names_own_are_read_as_such() {
        let cases = [
            (
                format!("std::enable_if<(1)<(2), int*>::type ns::make_buffer<{ARG}>(int)"),
                "ns::make_buffer<…>(…)",
            ),
            (
                format!("bool ns::apply<&ns::operator<(A const&, A const&), {ARG}>(A const&)"),
                "ns::apply<…>(…)",
            ),
            (
                format!("int ns::apply<&ns::operator>, {ARG}>(int, int)"),
                "ns::apply<…>(…)",
            ),
            (
                format!("decltype ({{parm#1}}+{{parm#2}}) ns::add<int, {ARG}>(int, double)"),
                "ns::add<…>(…)",
            ),
            (
                format!("void (*)(int) ns::get_handler<{ARG}>(int)"),
                "ns::get_handler<…>(…)",
            ),
        ];
        for (name, want) in cases {
            assert_eq!(short(&name), want, "{name}");
        }
    }

    #[test]
    fn a_name_whose_brackets_do_not_balance_is_cut() {
        let name = format!("ns::broken<{ARG}(int");
        let got = short(&name);
        assert_eq!(got.chars().count(), 80);
        assert!(got.ends_with('…') && name.starts_with(got.trim_end_matches('…')));
        let no_name = format!("(*)({ARG}, {ARG})");
        assert!(short(&no_name).ends_with('…'));
    }
}
