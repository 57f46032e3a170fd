//! The GBNF grammar a JSON request is decoded under: llama.cpp masks every token that
//! would leave the grammar, so the answer is a JSON object by construction, not by
//! the model's goodwill.
//!
//! Whitespace between tokens is bounded (one space, or a newline and up to 16 spaces
//! of indentation, as the stages' demonstrations are laid out): an unbounded `ws` lets
//! a small model pad forever until its token cap, leaving an unfinished object.

/// A JSON object: any keys, any values. The stages' parsers check the shape.
pub const JSON_OBJECT: &str = r#"
root   ::= object
object ::= "{" ws ( member ( "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( "," ws value )* )? ws "]"
value  ::= object | array | string | number | "true" | "false" | "null"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F\x7F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= ( " " | "\n" [ ]{0,16} )?
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule the grammar uses is defined, and every defined rule is used: a
    /// typo would otherwise surface only when a model loads the grammar.
    #[test]
    fn rules_are_defined_and_used() {
        let mut defined = Vec::new();
        let mut body = String::new();
        for line in JSON_OBJECT.lines().filter(|l| !l.trim().is_empty()) {
            let (name, rhs) = line.split_once("::=").expect("rule line");
            defined.push(name.trim().to_string());
            // Drop quoted literals and character classes before looking for names.
            let mut plain = String::new();
            let mut chars = rhs.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => {
                        while let Some(d) = chars.next() {
                            if d == '\\' {
                                chars.next();
                            } else if d == '"' {
                                break;
                            }
                        }
                        plain.push(' ');
                    }
                    '[' => {
                        while let Some(d) = chars.next() {
                            if d == '\\' {
                                chars.next();
                            } else if d == ']' {
                                break;
                            }
                        }
                        plain.push(' ');
                    }
                    _ => plain.push(c),
                }
            }
            body.push_str(&plain);
            body.push(' ');
        }
        let used: Vec<&str> =
            body.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| !w.is_empty() && *w != "u").collect();
        for name in &used {
            assert!(defined.iter().any(|d| d == name), "rule {name} is used but not defined");
        }
        for name in defined.iter().filter(|d| *d != "root") {
            assert!(used.contains(&name.as_str()), "rule {name} is defined but not used");
        }
    }
}
