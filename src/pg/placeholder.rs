//! Translation of sqlite3-style `?` placeholders to Postgres `$1..$n`.
//!
//! A `?` becomes `$n` (numbered from 1, left to right) unless it sits inside a string
//! literal (`'...'`, `E'...'`), a quoted identifier (`"..."`), a comment (`-- ...`,
//! `/* ... */`, nested) or a dollar-quoted string (`$$...$$`, `$tag$...$tag$`). A statement
//! that already uses `$1`-style placeholders is left exactly as it is, so its `?` (the JSON
//! operators `?`, `?|`, `?&`) keep their meaning.

use std::borrow::Cow;

/// Translates the `?` placeholders of `sql` to `$1..$n`; returns `sql` unchanged when it has
/// none or already uses `$n` placeholders.
pub fn translate(sql: &str) -> Cow<'_, str> {
    let marks = scan(sql);
    if marks.positional || marks.questions.is_empty() {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len() + marks.questions.len() * 2);
    let mut last = 0;
    for (n, &at) in marks.questions.iter().enumerate() {
        out.push_str(&sql[last..at]);
        out.push('$');
        out.push_str(&(n + 1).to_string());
        last = at + 1;
    }
    out.push_str(&sql[last..]);
    Cow::Owned(out)
}

/// How many parameters `sql` takes after [`translate`]: the number of `?` placeholders, or
/// the highest `$n` when it uses those.
pub fn parameter_count(sql: &str) -> usize {
    let marks = scan(sql);
    if marks.positional {
        marks.highest
    } else {
        marks.questions.len()
    }
}

/// The first placeholder of psycopg's styles (`%s` or `%(name)s`) in `sql` outside string
/// literals, quoted identifiers, comments and dollar quotes, as written; `None` when there
/// is none. These are not Postgres placeholders, so a host can tell its user to write `?`
/// instead of letting the server answer with a syntax error at `%`.
pub fn pyformat_marker(sql: &str) -> Option<&str> {
    scan(sql).pyformat.map(|(start, end)| &sql[start..end])
}

/// Whether `sql` has `?` or `$n` placeholders outside literals and comments.
pub fn has_placeholders(sql: &str) -> bool {
    let marks = scan(sql);
    marks.positional || !marks.questions.is_empty()
}

/// `sql` with each `?` or `$n` placeholder replaced by its parameter as a SQL literal of the
/// type the parameter declares (see [`Value::sql_literal`](super::Value::sql_literal)), for
/// statements sent many at a time in one simple-query message. `None` when the parameter
/// count does not match.
pub(crate) fn inline(sql: &str, params: &[super::Value]) -> Option<String> {
    let marks = scan(sql);
    let mut spans: Vec<(usize, usize, usize)> = if marks.positional {
        marks.dollars
    } else {
        marks
            .questions
            .iter()
            .enumerate()
            .map(|(k, &at)| (at, at + 1, k + 1))
            .collect()
    };
    let expected = if marks.positional {
        marks.highest
    } else {
        spans.len()
    };
    if expected != params.len() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(sql.len() + 16 * spans.len());
    let mut last = 0;
    for (start, end, n) in spans {
        out.push_str(&sql[last..start]);
        out.push_str(&params.get(n.checked_sub(1)?)?.sql_literal());
        last = end;
    }
    out.push_str(&sql[last..]);
    Some(out)
}

/// Whether `sql` may return rows: it starts with `SELECT`, `WITH`, `VALUES`, `TABLE`,
/// `SHOW`, `EXPLAIN`, `FETCH` or `EXECUTE`, or has `RETURNING` somewhere. A statement that
/// returned no row is described again only then, to give its columns.
pub(crate) fn may_return_rows(sql: &str) -> bool {
    super::words::starts_with_any(
        sql,
        &[
            "SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN", "FETCH", "EXECUTE",
        ],
    ) || super::words::mentions(sql, "returning")
}

struct Marks {
    questions: Vec<usize>,
    /// Each `$n`: where it starts, where it ends, and `n`.
    dollars: Vec<(usize, usize, usize)>,
    positional: bool,
    highest: usize,
    pyformat: Option<(usize, usize)>,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

fn scan(sql: &str) -> Marks {
    let b = sql.as_bytes();
    let mut marks = Marks {
        questions: Vec::new(),
        dollars: Vec::new(),
        positional: false,
        highest: 0,
        pyformat: None,
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => {
                let escapes = i > 0
                    && (b[i - 1] == b'E' || b[i - 1] == b'e')
                    && (i < 2 || !is_ident(b[i - 2]));
                i = skip_quoted(b, i + 1, b'\'', escapes);
            }
            b'"' => i = skip_quoted(b, i + 1, b'"', false),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 1;
                i += 2;
                while i < b.len() && depth > 0 {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
            }
            b'$' if i == 0 || !is_ident(b[i - 1]) => {
                let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if digits > 0 {
                    marks.positional = true;
                    let n = sql[i + 1..i + 1 + digits].parse().unwrap_or(usize::MAX);
                    marks.highest = marks.highest.max(n);
                    marks.dollars.push((i, i + 1 + digits, n));
                    i += 1 + digits;
                } else if let Some(end) = dollar_tag(b, i) {
                    let tag = &b[i..end];
                    i = end;
                    loop {
                        if i >= b.len() {
                            break;
                        }
                        if b[i..].starts_with(tag) {
                            i += tag.len();
                            break;
                        }
                        i += 1;
                    }
                } else {
                    i += 1;
                }
            }
            b'?' => {
                marks.questions.push(i);
                i += 1;
            }
            b'%' => {
                let end = pyformat_end(b, i);
                if let (Some(end), None) = (end, marks.pyformat) {
                    marks.pyformat = Some((i, end));
                }
                i = end.unwrap_or(i + 1);
            }
            c if is_ident(c) => {
                // Skip a whole identifier or keyword, so `a$1` or `E` inside a word do not
                // start anything.
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    marks
}

/// Skips a quoted run that started just before `i`; a doubled quote is an escaped quote,
/// and with `escapes` a backslash escapes the next byte. Returns the index after the close.
fn skip_quoted(b: &[u8], mut i: usize, quote: u8, escapes: bool) -> usize {
    while i < b.len() {
        if escapes && b[i] == b'\\' {
            i += 2;
        } else if b[i] == quote {
            if b.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// If a `%s` or `%(name)s` placeholder starts at `i`, the index after it. `%s` followed by
/// a letter, digit or `_` is the modulo operator before a name, not a placeholder.
fn pyformat_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i + 1) {
        Some(b's') => {
            let next = b.get(i + 2).copied();
            (!next.is_some_and(is_ident)).then_some(i + 2)
        }
        Some(b'(') => {
            let name = i + 2;
            let close = b[name..].iter().position(|&c| c == b')')? + name;
            let ok = close > name
                && b[name..close]
                    .iter()
                    .all(|&c| c.is_ascii_alphanumeric() || c == b'_');
            (ok && b.get(close + 1) == Some(&b's')).then_some(close + 2)
        }
        _ => None,
    }
}

/// If a dollar-quote tag (`$$` or `$tag$`) starts at `i`, the index after it.
fn dollar_tag(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if j < b.len() && (b[j].is_ascii_alphabetic() || b[j] == b'_' || b[j] >= 0x80) {
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] >= 0x80) {
            j += 1;
        }
    }
    (b.get(j) == Some(&b'$')).then_some(j + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_question_marks() {
        assert_eq!(
            translate("SELECT * FROM t WHERE a = ? AND b IN (?, ?)"),
            "SELECT * FROM t WHERE a = $1 AND b IN ($2, $3)"
        );
        assert_eq!(parameter_count("INSERT INTO t VALUES (?, ?)"), 2);
    }

    #[test]
    fn leaves_literals_identifiers_and_comments() {
        let sql = "SELECT '?', 'it''s ?', E'\\'?', \"col?\", ? -- why?\n, ? /* a /* ? */ ? */ ";
        assert_eq!(
            translate(sql),
            "SELECT '?', 'it''s ?', E'\\'?', \"col?\", $1 -- why?\n, $2 /* a /* ? */ ? */ "
        );
    }

    #[test]
    fn leaves_dollar_quotes() {
        assert_eq!(
            translate("SELECT $$ ? $$, $tag$ ?$$ ? $tag$, ?"),
            "SELECT $$ ? $$, $tag$ ?$$ ? $tag$, $1"
        );
    }

    #[test]
    fn positional_passes_through() {
        let sql = "SELECT $1::jsonb ? 'key', $2";
        assert!(matches!(translate(sql), Cow::Borrowed(_)));
        assert_eq!(parameter_count(sql), 2);
        assert!(matches!(translate("SELECT 1"), Cow::Borrowed(_)));
    }

    #[test]
    fn standard_strings_do_not_escape_with_backslash() {
        assert_eq!(translate("SELECT 'a\\', ?"), "SELECT 'a\\', $1");
        assert_eq!(translate("SELECT e'a\\'', ?"), "SELECT e'a\\'', $1");
        // A word that ends in E is not an escape-string prefix.
        assert_eq!(translate("SELECT some'a\\', ?"), "SELECT some'a\\', $1");
    }

    #[test]
    fn identifiers_with_dollar_and_casts() {
        assert_eq!(translate("SELECT a$b, ?::int"), "SELECT a$b, $1::int");
        assert_eq!(translate("SELECT ?"), "SELECT $1");
    }

    #[test]
    fn finds_psycopgs_placeholders_outside_literals() {
        assert_eq!(
            pyformat_marker("UPDATE t SET x = %s WHERE id = %s"),
            Some("%s")
        );
        assert_eq!(
            pyformat_marker("SELECT * FROM t WHERE id = %(id)s"),
            Some("%(id)s")
        );
        assert_eq!(pyformat_marker("SELECT '%s', \"%s\", $$%s$$ -- %s\n"), None);
        assert_eq!(pyformat_marker("SELECT a % b, 7 %sum FROM t"), None);
        assert_eq!(pyformat_marker("SELECT 10 % 3, format('%s', 1)"), None);
        assert_eq!(pyformat_marker("SELECT %(bad name)s, %"), None);
        assert!(has_placeholders("SELECT ?") && has_placeholders("SELECT $1"));
        assert!(!has_placeholders("SELECT '?'"));
    }

    #[test]
    fn unterminated_runs_do_not_panic() {
        assert_eq!(translate("SELECT 'abc ?"), "SELECT 'abc ?");
        assert_eq!(translate("SELECT $x$ ?"), "SELECT $x$ ?");
        assert_eq!(translate("SELECT /* ?"), "SELECT /* ?");
        assert_eq!(translate("SELECT $"), "SELECT $");
        assert_eq!(translate("?"), "$1");
    }

    #[test]
    fn inlines_parameters_as_typed_literals() {
        use crate::pg::Value;
        let params = [Value::Int(7), Value::from("it's \\ ?"), Value::Null];
        assert_eq!(
            inline("INSERT INTO t VALUES (?, ?, ?) -- ?", &params).as_deref(),
            Some("INSERT INTO t VALUES ((E'7'::int2), (E'it''s \\\\ ?'), NULL) -- ?")
        );
        assert_eq!(
            inline("SELECT $2, $1, $2", &[Value::Int(1), Value::Bool(true)]).as_deref(),
            Some("SELECT (E't'::bool), (E'1'::int2), (E't'::bool)")
        );
        assert_eq!(
            inline("SELECT ?[1]", &[Value::Array(vec![Value::Int(1 << 20)])]).as_deref(),
            Some("SELECT (E'{1048576}'::_int4)[1]")
        );
        assert_eq!(inline("SELECT ?, ?", &[Value::Int(1)]), None);
        assert_eq!(inline("SELECT '?'", &[]).as_deref(), Some("SELECT '?'"));
    }
}
