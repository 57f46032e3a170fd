//! Entity name normalisation: the key under which surface forms become one node.

/// Lowercases, turns punctuation into spaces, collapses whitespace: "U.S.", "u.s" and
/// "U S" meet; "Varn  Island" and "varn island" meet. Accents are kept (they distinguish
/// names in many languages).
pub fn normalize_entity(name: &str) -> String {
    let spaced: String =
        name.chars().map(|c| if c.is_alphanumeric() { c.to_lowercase().next().unwrap_or(c) } else { ' ' }).collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_case_whitespace_and_punctuation() {
        assert_eq!(normalize_entity("  Varn   Island "), "varn island");
        assert_eq!(normalize_entity("U.S."), "u s");
        assert_eq!(normalize_entity("O'Neil"), "o neil");
        assert_eq!(normalize_entity("Émile Darrow"), "émile darrow");
        assert_eq!(normalize_entity("--"), "");
    }
}
