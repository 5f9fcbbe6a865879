//! Statements a session keeps prepared on the server, as psycopg 3 does: a statement that
//! ran [`PREPARE_THRESHOLD`] times unprepared is prepared under a name on its next run, and
//! from then on runs without being parsed and planned again; at most [`PREPARED_MAX`] are kept, the least
//! recently used given back first.
//!
//! The writer lock serializes writes, so whatever the server does between granting the
//! lock and the commit is paid by every writer in line: planning a write's statements
//! again each time is such a cost.
//!
//! Only a session that talks to the server directly keeps statements: behind a
//! transaction pooler the next transaction may run on another server connection, where
//! the name means nothing (the session decides; see `Connection::query`). A statement that
//! drops the server's prepared statements (`DISCARD ALL`, `DEALLOCATE`) empties the cache,
//! and a kept statement the server refuses is forgotten, to be prepared again later.

use std::collections::HashMap;

use postgres::types::Type;
use postgres::Statement;

use super::words::mentions;

/// How many times a statement runs unprepared before it is prepared, on its next run
/// (psycopg 3's `prepare_threshold` default).
pub const PREPARE_THRESHOLD: u32 = 5;

/// How many statements a session keeps prepared at most (psycopg 3's `prepared_max`
/// default).
pub const PREPARED_MAX: usize = 100;

/// How many statement texts are counted at most; past it, the counts of statements not
/// kept start again from zero, so a program that sends ever new texts uses bounded memory.
const COUNTED_MAX: usize = 1000;

/// One statement text with one list of parameter types.
struct Variant {
    types: Vec<Type>,
    uses: u32,
    kept: Option<Statement>,
    last_used: u64,
}

/// What to run a statement with.
pub(crate) enum Plan {
    /// The statement kept prepared under a name.
    Kept(Statement),
    /// Prepare it now and keep it (it has run often enough).
    Prepare,
    /// An unnamed statement, parsed and planned for this run.
    Unnamed,
}

/// A session's prepared statements, by text and parameter types.
#[derive(Default)]
pub(crate) struct Prepared {
    by_text: HashMap<String, Vec<Variant>>,
    kept: usize,
    clock: u64,
}

impl Prepared {
    /// How to run `sql` with parameters of `types`; counts the use.
    pub(crate) fn plan(&mut self, sql: &str, types: &[Type]) -> Plan {
        self.clock += 1;
        let clock = self.clock;
        if let Some(variants) = self.by_text.get_mut(sql) {
            if let Some(v) = variants.iter_mut().find(|v| v.types == types) {
                v.last_used = clock;
                if let Some(statement) = &v.kept {
                    return Plan::Kept(statement.clone());
                }
                v.uses += 1;
                return if v.uses > PREPARE_THRESHOLD {
                    Plan::Prepare
                } else {
                    Plan::Unnamed
                };
            }
            variants.push(Variant::new(types, clock));
            return Plan::Unnamed;
        }
        if self.by_text.len() >= COUNTED_MAX {
            self.forget_counts();
        }
        self.by_text
            .insert(sql.to_string(), vec![Variant::new(types, clock)]);
        Plan::Unnamed
    }

    /// Keeps `statement`, prepared for `sql` with `types`, giving back the least recently
    /// used one when [`PREPARED_MAX`] are kept.
    pub(crate) fn keep(&mut self, sql: &str, types: &[Type], statement: Statement) {
        if self.kept >= PREPARED_MAX {
            self.give_back_oldest();
        }
        let clock = self.clock;
        let variants = self.by_text.entry(sql.to_string()).or_default();
        let variant = match variants.iter_mut().position(|v| v.types == types) {
            Some(i) => &mut variants[i],
            None => {
                variants.push(Variant::new(types, clock));
                let last = variants.len() - 1;
                &mut variants[last]
            }
        };
        if variant.kept.replace(statement).is_none() {
            self.kept += 1;
        }
    }

    /// Forgets `sql` with `types` (the server refused the kept statement, or preparing it
    /// failed): it runs unnamed again, and is prepared again after as many runs.
    pub(crate) fn forget(&mut self, sql: &str, types: &[Type]) {
        if let Some(variants) = self.by_text.get_mut(sql) {
            if let Some(i) = variants.iter().position(|v| v.types == types) {
                if variants.swap_remove(i).kept.is_some() {
                    self.kept -= 1;
                }
            }
            if variants.is_empty() {
                self.by_text.remove(sql);
            }
        }
    }

    /// Forgets every statement (the server dropped them, or the session ends).
    pub(crate) fn clear(&mut self) {
        self.by_text.clear();
        self.kept = 0;
    }

    /// Takes every kept statement out, for a caller that must not let them close (a child
    /// after `fork()`, whose closing would speak on the parent's session).
    pub(crate) fn take_all(&mut self) -> Vec<Statement> {
        let taken = self
            .by_text
            .drain()
            .flat_map(|(_, variants)| variants.into_iter().filter_map(|v| v.kept))
            .collect();
        self.kept = 0;
        taken
    }

    /// How many statements are kept prepared.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.kept
    }

    fn give_back_oldest(&mut self) {
        let oldest = self
            .by_text
            .iter()
            .flat_map(|(sql, variants)| {
                variants
                    .iter()
                    .filter(|v| v.kept.is_some())
                    .map(move |v| (v.last_used, sql.clone(), v.types.clone()))
            })
            .min_by_key(|(last_used, _, _)| *last_used);
        if let Some((_, sql, types)) = oldest {
            // Dropping the statement closes it on the server.
            self.forget(&sql, &types);
        }
    }

    fn forget_counts(&mut self) {
        self.by_text.retain(|_, variants| {
            variants.retain(|v| v.kept.is_some());
            !variants.is_empty()
        });
    }
}

impl Variant {
    fn new(types: &[Type], clock: u64) -> Variant {
        Variant {
            types: types.to_vec(),
            uses: 1,
            kept: None,
            last_used: clock,
        }
    }
}

/// Whether `sql` may drop the session's prepared statements on the server (`DISCARD ALL`,
/// `DEALLOCATE`), anywhere in it; a false alarm only costs preparing statements again.
pub(crate) fn drops_prepared(sql: &str) -> bool {
    mentions(sql, "discard") || mentions(sql, "deallocate")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_prepared_after_five_runs_and_counted_by_its_types() {
        let mut p = Prepared::default();
        let int = [Type::INT8];
        for _ in 0..PREPARE_THRESHOLD {
            assert!(matches!(p.plan("SELECT $1", &int), Plan::Unnamed));
        }
        // Other parameter types count on their own.
        assert!(matches!(p.plan("SELECT $1", &[Type::TEXT]), Plan::Unnamed));
        assert!(matches!(p.plan("SELECT $1", &int), Plan::Prepare));
        p.forget("SELECT $1", &int);
        assert!(matches!(p.plan("SELECT $1", &int), Plan::Unnamed));
        assert_eq!(p.kept(), 0);
    }

    #[test]
    fn discard_and_deallocate_are_told_as_words() {
        assert!(drops_prepared("DISCARD ALL"));
        assert!(drops_prepared("select 1; deallocate all"));
        assert!(drops_prepared("DEALLOCATE PREPARE s1"));
        assert!(!drops_prepared("SELECT discarded FROM t"));
        assert!(!drops_prepared("UPDATE t SET x_discard = 1"));
    }

    #[test]
    fn counts_stay_bounded() {
        let mut p = Prepared::default();
        for i in 0..(COUNTED_MAX * 3) {
            let _ = p.plan(&format!("SELECT {i}"), &[]);
        }
        assert!(p.by_text.len() <= COUNTED_MAX);
    }
}
