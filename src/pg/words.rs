//! A statement's words, read from its text without parsing it: its first keyword, and
//! whether it mentions a word anywhere. Hosts and the session run these on every statement,
//! so they neither allocate nor look at more than they need.

/// Whether the byte continues a word (`\w`: letters, digits, `_`; any byte of a non-ASCII
/// character counts as a letter).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// The statement's first keyword, as written: after white space, `--` and `/* */`
/// comments, opening parentheses and `;`. `None` when a comment is not closed (the
/// statement has no keyword to read); empty when the text starts with something else.
pub fn first_keyword(sql: &str) -> Option<&str> {
    let mut rest = sql;
    loop {
        let trimmed = rest.trim_start();
        if let Some(after) = trimmed.strip_prefix("--") {
            rest = after.find('\n').map_or("", |i| &after[i + 1..]);
        } else if let Some(after) = trimmed.strip_prefix("/*") {
            rest = &after[after.find("*/")? + 2..];
        } else if let Some(after) = trimmed.strip_prefix(['(', ';']) {
            rest = after;
        } else {
            rest = trimmed;
            break;
        }
    }
    let end = rest
        .bytes()
        .position(|b| !is_word_byte(b))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether the statement's first keyword is one of `keywords` (any ASCII case).
pub fn starts_with_any(sql: &str, keywords: &[&str]) -> bool {
    first_keyword(sql).is_some_and(|w| keywords.iter().any(|k| w.eq_ignore_ascii_case(k)))
}

/// Whether `word` occurs in `sql` as a whole word, in any ASCII case (in literals and
/// comments too: a caller uses it where a false alarm only costs a little).
pub fn mentions(sql: &str, word: &str) -> bool {
    let (text, word) = (sql.as_bytes(), word.as_bytes());
    if word.is_empty() || text.len() < word.len() {
        return false;
    }
    (0..=text.len() - word.len()).any(|i| {
        text[i..i + word.len()].eq_ignore_ascii_case(word)
            && (i == 0 || !is_word_byte(text[i - 1]))
            && text.get(i + word.len()).is_none_or(|&b| !is_word_byte(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_keyword_comes_after_space_comments_and_parentheses() {
        assert_eq!(first_keyword("  select 1"), Some("select"));
        assert_eq!(
            first_keyword("-- note\n/* a */ (WITH x AS (SELECT 1) TABLE x)"),
            Some("WITH")
        );
        assert_eq!(first_keyword("; COMMIT"), Some("COMMIT"));
        assert_eq!(first_keyword("/* not closed SELECT"), None);
        assert_eq!(first_keyword("-- only a comment"), Some(""));
        assert!(starts_with_any("\n\tinsert into t values (1)", &["INSERT"]));
        assert!(!starts_with_any("inserted", &["INSERT"]));
    }

    #[test]
    fn a_word_is_found_whole_in_any_case() {
        assert!(mentions("DISCARD ALL", "discard"));
        assert!(mentions("select 1; Deallocate all", "deallocate"));
        assert!(!mentions("SELECT discarded FROM t", "discard"));
        assert!(!mentions("UPDATE t SET x_discard = 1", "discard"));
        assert!(!mentions("SELECT éreset", "reset"));
        assert!(mentions("RESET", "reset"));
        assert!(!mentions("", "reset"));
    }
}
